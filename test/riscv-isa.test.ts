// The ISA table (src/riscv/isa.ts) against LLVM and against its consumers: every entry's encodings
// decode to that entry and disassemble as llvm-objdump 14 prints them (test/golden/isa-table.txt,
// made by scripts/update-golden.sh from conformance/gen-table.ts), the all-encodings listing names
// every entry, and the table is consistent (no stray match bits, no overlapping 32-bit entries).
import { readFileSync } from 'node:fs';
import t from 'tap';
import { SAMPLES_PER_ENTRY, TABLE_TEXT_ADDRESS, tableSamples } from '../conformance/gen-table.js';
import { decode } from '../src/riscv/decode.js';
import { COMPRESSED, ENTRY, INSTRUCTIONS } from '../src/riscv/isa.js';
import { compareListing, parseListing } from './helpers/golden-listing.js';

const golden = (name: string) => readFileSync(new URL(`./golden/${name}`, import.meta.url), 'utf8');

t.test('table consistency', async (t) => {
  for (const e of [...INSTRUCTIONS, ...COMPRESSED]) {
    t.equal((e.match & ~e.mask) >>> 0, 0, `${e.name}: match has no bits outside its mask`);
  }
  t.equal(new Set(INSTRUCTIONS.map((e) => e.name)).size, INSTRUCTIONS.length, 'mnemonics are unique');
  t.equal(new Set(COMPRESSED.map((e) => e.name)).size, COMPRESSED.length, 'compressed names are unique');
  // two 32-bit entries overlap when they agree on the bits both fix: the table must not rely on order
  const overlaps: string[] = [];
  for (const a of INSTRUCTIONS)
    for (const b of INSTRUCTIONS) {
      if (a === b) continue;
      const common = a.mask & b.mask;
      if ((a.match & common) >>> 0 === (b.match & common) >>> 0) overlaps.push(`${a.name}/${b.name}`);
    }
  t.same(overlaps, [], 'no two 32-bit entries match one word');
  for (const e of COMPRESSED) t.ok(e.expands in ENTRY, `${e.name} expands to a table entry (${e.expands})`);
  for (const e of INSTRUCTIONS) {
    const memory = e.kind === 'load' || e.kind === 'store' || e.ext === 'A';
    t.equal(e.width !== undefined, memory, `${e.name}: a width exactly when it accesses memory`);
  }
});

t.test('every entry decodes from its samples and disassembles as llvm-objdump does', async (t) => {
  const samples = tableSamples();
  const entries = INSTRUCTIONS.length + COMPRESSED.length;
  t.equal(
    samples.length,
    entries * SAMPLES_PER_ENTRY,
    `${SAMPLES_PER_ENTRY} samples of each of ${entries} entries`,
  );
  const { lines } = parseListing(golden('isa-table.txt'));
  const byAddress = new Map(lines.map((l) => [l.address, l.text]));
  let pc = TABLE_TEXT_ADDRESS;
  const wrong: string[] = [];
  for (const s of samples) {
    const llvm = byAddress.get(pc);
    const ins = decode(s.word);
    // LLVM's mnemonic, without the A extension's ordering suffix and the HINT spelling c.slli64
    const llvmName = llvm
      ?.split('\t')[0]
      .replace(/\.(aqrl|aq|rl)$/, '')
      .replace(/^(c\.s[rl][la]i)64$/, '$1');
    const decoded = s.size === 2 ? ins.compressed : ins.op;
    if (llvmName !== s.entry) wrong.push(`${s.entry} 0x${s.word.toString(16)}: llvm-objdump says ${llvm}`);
    if (decoded !== s.entry) wrong.push(`${s.entry} 0x${s.word.toString(16)}: decoded as ${decoded}`);
    if (ins.size !== s.size) wrong.push(`${s.entry} 0x${s.word.toString(16)}: size ${ins.size}`);
    if (s.size === 2 && ins.op !== COMPRESSED.find((e) => e.name === s.entry)!.expands)
      wrong.push(`${s.entry} 0x${s.word.toString(16)}: expands to ${ins.op}`);
    pc += s.size;
  }
  t.same(wrong, [], 'every sample decodes to its entry, which llvm-objdump names alike');
  // and the disassembly of every line, with llvm-objdump's symbolization of targets
  const elf = readFileSync(new URL('./golden/isa-table.elf', import.meta.url));
  const { checked, diffs } = compareListing(elf, golden('isa-table.txt'));
  t.equal(checked, samples.length, 'one listing line per sample');
  t.same(diffs, [], 'berm disassembles every sample as llvm-objdump does');
});

t.test('the all-encodings golden listing covers every table entry', async (t) => {
  const seen = new Set(
    parseListing(golden('all-encodings.txt')).lines.map((l) =>
      l.text
        .split('\t')[0]
        .replace(/\.(aqrl|aq|rl)$/, '')
        .replace(/^(c\.s[rl][la]i)64$/, '$1'),
    ),
  );
  const missing = [...INSTRUCTIONS, ...COMPRESSED].map((e) => e.name).filter((n) => !seen.has(n));
  t.same(missing, [], 'conformance/gen-all-encodings.ts emits every mnemonic of the table');
});

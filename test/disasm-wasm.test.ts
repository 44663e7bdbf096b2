// `berm disasm --wasm`: each guest instruction followed by the WAT of the code the baseline tier
// translated it to, printed by wabt. Checked against independent facts: the guest lines are
// exactly `berm disasm`'s (which test/cli.test.ts holds to llvm-objdump's), the module text is read
// back and validated by wabt's own parser and validator, and the code of every load and store
// raises its memory fault with the instruction's own pc (RISC-V: a fault reports the pc of the
// faulting instruction), so the trap's `i32.const <pc>` must sit in that instruction's lines.
import t from 'tap';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readElf } from '../src/elf/reader.js';
import { DEFAULT_TRANSLATE_OPTIONS } from '../src/translate/abi.js';
import { translateBaseline } from '../src/translate/baseline.js';
import { loadWabt, WABT_FEATURES } from '../src/translate/listing.js';
import { ROOT } from './helpers/fixtures.js';

const BUILD = join(ROOT, 'fixtures', 'build');
const ECHO = join(BUILD, 'echo-gcc-O2.elf');
const CONTROL = join(BUILD, 'control-clang-O2.elf');

function berm(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--stack-size=4000', join(ROOT, 'bin', 'berm.js'), ...args], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The loads and stores of RV64IMAC (base, compressed), by mnemonic. */
const MEMORY = /^(c\.)?(lb|lh|lw|ld|lbu|lhu|lwu|sb|sh|sw|sd|lwsp|ldsp|swsp|sdsp)\t/;

/** A `--wasm` listing: guest lines (as `berm disasm` prints them) each with its WAT lines. */
function parse(text: string): { guest: string[]; rows: { line: string; wat: string[] }[] } {
  const guest: string[] = [];
  const rows: { line: string; wat: string[] }[] = [];
  for (const l of text.split('\n')) {
    if (l.startsWith(' '.repeat(16))) rows[rows.length - 1].wat.push(l.slice(16));
    else {
      guest.push(l);
      if (/^\s*[0-9a-f]+:\s/.test(l)) rows.push({ line: l, wat: [] });
    }
  }
  return { guest, rows };
}

for (const elf of [ECHO, CONTROL]) {
  t.test(
    `disasm --wasm ${elf.split('/').pop()}: the guest lines of disasm, each with its code`,
    async (t) => {
      const [plain, wasm] = await Promise.all([berm(['disasm', elf]), berm(['disasm', '--wasm', elf])]);
      t.equal(plain.code, 0, plain.stderr);
      t.equal(wasm.code, 0, wasm.stderr);
      const { guest, rows } = parse(wasm.stdout);
      t.same(guest, plain.stdout.split('\n'), 'the same guest lines, in the same order');
      t.ok(rows.length > 100, `${rows.length} instructions`);
      let memory = 0;
      for (const r of rows) {
        const [addr, text] = r.line.trim().split(/:\s+/);
        if (!MEMORY.test(text)) continue;
        memory++;
        t.ok(
          r.wat.some((l) => l.trim() === `i32.const ${parseInt(addr, 16)}`),
          `${addr} ${text}: its fault names its own pc`,
        );
      }
      t.ok(memory > 20, `${memory} loads and stores checked`);
      const lines = rows.flatMap((r) => r.wat).length;
      t.ok(lines > 5 * rows.length, `${lines} WAT lines`);
      const one = await berm(['disasm', '--wasm', elf, '-f', 'strlen']);
      t.equal(one.code, 0, one.stderr);
      const at = wasm.stdout.indexOf(one.stdout.split('\n')[0]);
      t.ok(
        at >= 0 && wasm.stdout.slice(at).startsWith(one.stdout),
        '-f strlen: that function of the whole listing',
      );
    },
  );
}

t.test('disasm --wasm --wat prints a module wabt parses and validates', async (t) => {
  const wabt = await loadWabt();
  for (const args of [
    ['disasm', '--wasm', '--wat', ECHO],
    ['disasm', '--wasm', '--wat', CONTROL, '-f', 'ctl_switch'],
  ]) {
    const r = await berm(args);
    t.equal(r.code, 0, r.stderr);
    t.match(r.stdout, /^\(module\n/);
    const m = wabt.parseWat('listing.wat', r.stdout, WABT_FEATURES);
    try {
      m.resolveNames();
      t.doesNotThrow(() => m.validate(WABT_FEATURES), args.join(' '));
    } finally {
      m.destroy();
    }
  }
  const bad = await berm(['disasm', '--wasm', ECHO, '-f', 'no_such_function']);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /no function named no_such_function/);
});

t.test('recording the pcs leaves the module byte for byte as the normal compile writes it', async (t) => {
  for (const elf of [ECHO, CONTROL]) {
    const image = readElf(new Uint8Array(readFileSync(elf)));
    const plain = translateBaseline(image, DEFAULT_TRANSLATE_OPTIONS);
    const listed = translateBaseline(image, DEFAULT_TRANSLATE_OPTIONS, true);
    t.same(Buffer.from(listed.wasm), Buffer.from(plain.wasm), elf.split('/').pop()!);
    t.ok(listed.pcOffsets.size > 10, `${listed.pcOffsets.size} functions with pc offsets`);
  }
});

// ELF reader: every refusal on hand-built ELFs, the real toolchain ELFs in test/data, and fuzzing.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ElfError, readElf, relocationTypeName } from '../src/elf/reader.js';
import { relocationTargets } from '../src/elf/targets.js';
import { buildElf, type BuiltElf, type ElfOptions } from './helpers/elf-builder.js';

function refuses(
  name: string,
  code: string,
  hint: RegExp,
  mutate: (e: BuiltElf) => Uint8Array | void,
  opts?: ElfOptions,
): void {
  t.test(name, async (t) => {
    const e = buildElf(opts);
    const bytes = mutate(e) ?? e.bytes;
    let err: unknown;
    try {
      readElf(bytes);
    } catch (x) {
      err = x;
    }
    t.ok(err instanceof ElfError, 'throws ElfError');
    t.equal((err as ElfError).code, code);
    t.match((err as ElfError).message, hint);
  });
}

t.test('minimal ELF', async (t) => {
  const e = buildElf();
  const img = readElf(e.bytes);
  t.equal(img.entry, e.textAddr);
  t.equal(img.segments.length, 1);
  t.same(
    img.functions.map((f) => [f.name, f.names, f.start, f.size, f.global]),
    [
      ['f', ['f', 'f_alias'], e.textAddr, 8, true],
      ['h', ['h'], e.textAddr + 12, 8, false],
    ],
  );
  t.equal(img.relocations.length, 2);
  t.match(img.relocations[1], {
    typeName: 'R_RISCV_HI20',
    symbolName: 'f',
    symbolValue: e.textAddr,
    addend: 12,
  });
  t.equal(new TextDecoder().decode(img.manifest ?? new Uint8Array()), 'abi-v1');
  t.equal(img.globalPointer, 0x10800);
  t.equal(img.imageStart, 0x10000);
  t.same([...relocationTargets(img).codeAddresses], [e.textAddr + 12]);
  t.equal(readElf(buildElf({ manifest: null }).bytes).manifest, null);
});

t.test('relocation type names follow the psABI', async (t) => {
  t.equal(relocationTypeName(23), 'R_RISCV_PCREL_HI20');
  t.equal(relocationTypeName(47), 'R_RISCV_GPREL_I');
  t.equal(relocationTypeName(57), 'R_RISCV_32_PCREL');
  t.equal(relocationTypeName(58), 'R_RISCV_IRELATIVE');
  t.equal(relocationTypeName(200), 'R_RISCV_200');
});

refuses('not ELF', 'not-elf', /not an ELF/, (e) => void e.bytes.set([0], 0));
refuses('empty file', 'not-elf', /not an ELF/, () => new Uint8Array(0));
refuses('short header', 'truncated', /truncated/, (e) => e.bytes.subarray(0, 40));
refuses('32-bit', 'not-64-bit', /RV64/, (e) => void (e.bytes[4] = 1));
refuses('big-endian', 'not-little-endian', /little-endian/, (e) => void (e.bytes[5] = 2));
refuses('not RISC-V', 'not-riscv', /riscv64/, (e) => e.view.setUint16(18, 62, true));
refuses('ET_DYN', 'not-executable', /static executable/, (e) => e.view.setUint16(16, 3, true));
refuses('float ABI', 'float-abi', /-mabi=lp64/, (e) => e.view.setUint32(48, 5, true));
refuses('RVE', 'rve', /rv64imac/, (e) => e.view.setUint32(48, 9, true));
refuses('no relocations', 'no-relocations', /--emit-relocs/, () => undefined, { relocations: false });
refuses('no symtab', 'no-symtab', /do not strip/, () => undefined, { symtab: false, relocations: false });
refuses('no section headers', 'no-symtab', /do not strip/, (e) => e.view.setUint16(60, 0, true));
refuses('filesz > memsz', 'bad-segment', /filesz > memsz/, (e) => e.view.setUint32(e.phoff + 40, 4, true));
refuses('segment past 4 GiB', 'address-range', /4 GiB/, (e) =>
  e.view.setUint32(e.phoff + 16, 0xffffff00, true),
);
refuses('segment past the file', 'truncated', /past the end/, (e) =>
  e.view.setUint32(e.phoff + 8, 0x100000, true),
);
refuses('over 1 GiB', 'too-large', /1 GiB/, (e) => e.view.setUint32(e.phoff + 40, 0x40000001, true));
refuses('entry outside code', 'bad-entry', /entry point/, (e) => e.view.setUint32(24, 0x20000, true));
refuses('entry in a non-executable segment', 'bad-entry', /entry point/, (e) =>
  e.view.setUint32(e.phoff + 4, 4, true),
);
refuses('program headers past the file', 'truncated', /program header/, (e) =>
  e.view.setUint16(56, 500, true),
);
refuses('bad phentsize', 'bad-header', /e_phentsize/, (e) => e.view.setUint16(54, 32, true));
refuses('section headers past the file', 'truncated', /section header/, (e) =>
  e.view.setUint16(60, 500, true),
);
refuses('bad shentsize', 'bad-header', /e_shentsize/, (e) => e.view.setUint16(58, 40, true));
refuses('section past the file', 'truncated', /section 1/, (e) =>
  e.view.setUint32(e.shoff + 64 + 32, 1e6, true),
);
refuses('section past 4 GiB', 'address-range', /4 GiB/, (e) => e.view.setUint32(e.shoff + 64 + 20, 1, true));
refuses('bad shstrndx', 'bad-header', /e_shstrndx/, (e) => e.view.setUint16(62, 99, true));
refuses('relocation symbol out of range', 'bad-relocation', /out of range/, (e) => {
  const relaOff = e.view.getUint32(e.shoff + 64 * e.index['.rela.text'] + 24, true);
  e.view.setUint32(relaOff + 12, 99, true);
});
refuses('overlapping segments', 'overlapping-segments', /overlap/, (e) => {
  // a second PT_LOAD inside the first, replacing the section header count's worth of room: grow the
  // program header table into the .text padding (offset 120 .. 176 is free)
  e.view.setUint16(56, 2, true);
  e.bytes.copyWithin(120, 64, 120);
  e.view.setUint32(120 + 16, 0x10010, true);
  e.view.setUint32(120 + 4, 6, true);
});

refuses('overlapping segments with an empty one between them', 'overlapping-segments', /overlap/, (e) => {
  // three PT_LOADs sorted by address: the first, an empty one inside it, and a third inside the
  // first; comparing each only with its neighbour missed the overlap (the empty one is skipped)
  e.view.setUint16(56, 3, true);
  e.bytes.copyWithin(120, 64, 120);
  e.bytes.copyWithin(176, 64, 120);
  e.view.setUint32(120 + 4, 6, true);
  e.view.setUint32(120 + 16, 0x10008, true);
  e.view.setUint32(120 + 32, 0, true);
  e.view.setUint32(120 + 40, 0, true);
  e.view.setUint32(176 + 4, 6, true);
  e.view.setUint32(176 + 16, 0x10010, true);
});

t.test('shared-tail functions are cut at the next entry', async (t) => {
  const e = buildElf();
  // make f (8 bytes at text) run 16 bytes, through h at text + 12
  const symOff = e.view.getUint32(e.shoff + 64 * e.index['.symtab'] + 24, true);
  e.view.setUint32(symOff + 24 + 16, 16, true);
  e.view.setUint32(symOff + 48 + 16, 16, true);
  const img = readElf(e.bytes);
  t.match(img.functions[0], { name: 'f', size: 12, symbolSize: 16 });
  t.equal(img.functions[1].symbolSize, undefined);
});

const data = new URL('./data/', import.meta.url);
const read = (n: string): Uint8Array => readFileSync(new URL(n, data));

t.test('clang/lld medany ELF', async (t) => {
  const img = readElf(read('sample-clang.elf'));
  const byName = new Map(img.functions.map((f) => [f.name, f]));
  t.same(byName.get('op_add')?.names.sort(), ['op_add', 'op_plus']);
  t.ok(byName.has('op_mul') && !byName.get('op_mul')?.global, 'static function found, local');
  t.equal(new TextDecoder().decode(img.manifest ?? new Uint8Array()), 'berm-abi v1');
  const targets = relocationTargets(img).codeAddresses;
  for (const n of ['op_add', 'op_sub', 'op_mul'])
    t.ok(targets.has(byName.get(n)?.start ?? -1), `${n} is a target`);
  t.notOk(targets.has(byName.get('dispatch')?.start ?? -1), 'only called directly');
  // clang's jump table: 8-byte R_RISCV_64 entries into dispatch
  const d = byName.get('dispatch');
  const cases = [...targets].filter((a) => d && a > d.start && a < d.start + d.size);
  t.ok(cases.length >= 5, `${cases.length} jump-table cases`);
  t.ok(
    img.relocations.some((r) => r.typeName === 'R_RISCV_64' && r.section === '.rodata'),
    'R_RISCV_64 in .rodata',
  );
});

for (const f of ['sample-gcc.elf', 'sample-gcc-medlow.elf']) {
  t.test(`gcc/GNU ld ELF ${f}`, async (t) => {
    const img = readElf(read(f));
    t.ok(img.globalPointer !== null, '__global_pointer$');
    const byName = new Map(img.functions.map((fn) => [fn.name, fn]));
    t.equal(byName.get('op_plus')?.start, byName.get('op_plus')?.start);
    t.ok(byName.get('op_plus')?.names.includes('op_add'), 'alias merged');
    const targets = relocationTargets(img).codeAddresses;
    for (const n of ['op_plus', 'op_sub', 'op_mul'])
      t.ok(targets.has(byName.get(n)?.start ?? -1), `${n} is a target`);
    const d = byName.get('dispatch');
    const cases = [...targets].filter((a) => d && a > d.start && a < d.start + d.size);
    t.ok(cases.length >= 5, `${cases.length} jump-table cases`);
    // jump tables and data live in .rodata/.data, never taken as code
    const rodata = img.sections.find((s) => s.name === '.rodata');
    t.notOk([...targets].some((a) => rodata && a >= rodata.addr && a < rodata.addr + rodata.size));
    if (f === 'sample-gcc.elf') {
      t.ok(img.relocations.some((r) => r.typeName === 'R_RISCV_ADD32'));
      t.ok(img.relocations.some((r) => r.typeName === 'R_RISCV_SUB32'));
    } else {
      t.ok(
        img.relocations.some((r) => r.typeName === 'R_RISCV_RVC_LUI'),
        'relaxed HI20',
      );
    }
  });
}

t.test('GNU ld gp relaxation (R_RISCV_GPREL_I)', async (t) => {
  const img = readElf(read('gprel.elf'));
  const fn = img.functions.find((f) => f.name === 'fn');
  t.ok(img.relocations.some((r) => r.typeName === 'R_RISCV_GPREL_I'));
  t.same([...relocationTargets(img).codeAddresses], [fn?.start]);
});

// Fuzz: truncations and byte flips never produce anything but ElfError or a valid image.
function fuzzFiles(): [string, Uint8Array][] {
  const out: [string, Uint8Array][] = [];
  for (const n of readdirSync(data).filter((n) => n.endsWith('.elf'))) out.push([n, read(n)]);
  out.push(['built', buildElf().bytes]);
  // The fixture builds are committed: their absence is a broken checkout, not a reason to skip.
  const fx = new URL('../fixtures/build/', import.meta.url);
  for (const n of readdirSync(fx).filter((n) => n.endsWith('.elf')))
    out.push([n, readFileSync(new URL(n, fx))]);
  return out;
}

t.test('fuzz', async (t) => {
  let seed = 12345;
  const rnd = (n: number): number => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed % n;
  };
  let bad = 0;
  let checked = 0;
  for (const [name, file] of fuzzFiles()) {
    for (let i = 0; i < 50; i++) {
      let bytes: Uint8Array;
      if (i % 2 === 0) {
        bytes = file.subarray(0, rnd(file.length));
      } else {
        bytes = file.slice();
        const flips = 1 + rnd(8);
        // bias flips toward the headers and tables where the checks live
        for (let k = 0; k < flips; k++) {
          const at = k % 2 === 0 ? rnd(Math.min(bytes.length, 256)) : rnd(bytes.length);
          bytes[at] ^= 1 << rnd(8);
        }
      }
      checked++;
      try {
        const img = readElf(bytes);
        relocationTargets(img);
      } catch (e) {
        // readElf turns any exception into an ElfError, so also refuse one that wraps an internal
        // error (a missed bounds check): each refusal must come from a check of the reader.
        if (!(e instanceof ElfError) || e.cause !== undefined || /^malformed ELF/.test(e.message)) {
          bad++;
          t.fail(
            `${name} #${i}: ${String(e)}${e instanceof Error && e.cause ? ` (cause: ${String(e.cause)})` : ''}`,
          );
        }
      }
    }
  }
  t.equal(bad, 0, `${checked} mutated files`);
  t.ok(fuzzFiles().length >= 50, 'the test data and every fixture build were fuzzed');
});

t.test('every fixture ELF reads', async (t) => {
  for (const [name, file] of fuzzFiles()) {
    const img = readElf(file);
    t.ok(img.functions.length > 0, name);
  }
});

// The symbol table is read in place and its entries made into objects on first use: they must be
// exactly what binutils' readelf lists (an independent reader), in table order.
t.test('symbols read on demand are what readelf lists', async (t) => {
  const TYPES = ['NOTYPE', 'OBJECT', 'FUNC', 'SECTION', 'FILE', 'COMMON', 'TLS'];
  const BINDS = ['LOCAL', 'GLOBAL', 'WEAK'];
  for (const f of ['fixtures/build/text-clang-O0.elf', 'fixtures/big/big-gcc-O2.elf']) {
    const listing = execFileSync('readelf', ['--symbols', '--wide', f], {
      encoding: 'utf8',
      maxBuffer: 1 << 26,
    });
    const want: [string, number, number, string, string][] = [];
    let gp: number | null = null;
    for (const line of listing.split('\n')) {
      const m = /^\s*(\d+): ([0-9a-f]+)\s+(\S+) (\S+)\s+(\S+)\s+\S+\s+\S+ (.*)$/.exec(line);
      if (!m || m[1] === '0') continue;
      const value = parseInt(m[2], 16);
      // readelf prints a section symbol with its section's name; berm keeps the (empty) symbol name
      // (and shows a control character c as ^ and c + 64: clang's ".L1\x021" labels)
      const name =
        m[4] === 'SECTION'
          ? ''
          : m[6].replace(/\^([@-_])/g, (_, c: string) => String.fromCharCode(c.charCodeAt(0) - 64));
      want.push([name, value, Number(m[3]), m[4], m[5]]);
      if (gp === null && name === '__global_pointer$') gp = value;
    }
    t.ok(want.length > 1000, `${f}: readelf listed ${want.length} symbols`);
    const img = readElf(new Uint8Array(readFileSync(f)));
    t.equal(img.globalPointer, gp, `${f}: __global_pointer$`);
    const got = img.symbols.map((s) => [s.name, s.value, s.size, TYPES[s.type], BINDS[s.bind]]);
    t.same(got, want, `${f}: every symbol, in order`);
    t.equal(img.symbols, img.symbols, 'made once');
  }
});

// __global_pointer$ is found by searching the string table and the st_name fields in native code,
// with an entry-by-entry search when the string table names it more than a few times: both must
// give the value of the first symbol of that name, as binutils' readelf lists them.
t.test('__global_pointer$ is the first symbol of that name, as readelf lists', async (t) => {
  const src = 'fixtures/build/text-clang-O0.elf';
  const bytes = new Uint8Array(readFileSync(src));
  const img = readElf(bytes);
  const symtab = img.sections.find((s) => s.name === '.symtab')!;
  const strtab = img.sections[symtab.link];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  // entries (other than the real one) whose names are long enough to be rewritten in place
  const long: number[] = [];
  for (let i = 1; i < symtab.size / 24; i++) {
    const at = strtab.offset + view.getUint32(symtab.offset + i * 24, true);
    let n = 0;
    while (bytes[at + n] !== 0) n++;
    if (n >= 17 && n < 40 && bytes[at] !== 0x5f) long.push(i);
  }
  t.ok(long.length > 20, `${long.length} long names`);
  const gpName = Buffer.from('__global_pointer$\0', 'latin1');
  // 2 renamed symbols: the native search; 8: the entry-by-entry search
  for (const renamed of [2, 8]) {
    const copy = bytes.slice();
    // rename entries spread through the table (its later half, so some come after the real one)
    for (let k = 0; k < renamed; k++) {
      const i = long[Math.floor(((k + 1) * long.length) / (renamed + 1))];
      copy.set(gpName, strtab.offset + view.getUint32(symtab.offset + i * 24, true));
    }
    const dir = mkdtempSync(join(tmpdir(), 'berm-gp-'));
    const file = join(dir, 'gp.elf');
    writeFileSync(file, copy);
    const listing = execFileSync('readelf', ['--symbols', '--wide', file], {
      encoding: 'utf8',
      maxBuffer: 1 << 26,
    });
    rmSync(dir, { recursive: true });
    let gp: number | null = null;
    let named = 0;
    for (const line of listing.split('\n')) {
      const m = /^\s*(\d+): ([0-9a-f]+)\s+\S+ \S+\s+\S+\s+\S+\s+\S+ (.*)$/.exec(line);
      if (!m || m[3] !== '__global_pointer$') continue;
      named++;
      if (gp === null) gp = parseInt(m[2], 16);
    }
    // (a string may be the name of several symbols)
    t.ok(named > renamed, `${renamed} renamed: readelf lists ${named}`);
    t.not(gp, img.globalPointer, `${renamed} renamed: a renamed symbol comes first`);
    t.equal(readElf(copy).globalPointer, gp, `${renamed} renamed: __global_pointer$`);
  }
});

/**
 * `b` with `nLoads` empty executable PT_LOADs before its own (so every lookup by address walks
 * them first) and `nSyms` more copies of function symbol f at the end of its .symtab.
 */
function withManyLoads(b: BuiltElf, nLoads: number, nSyms: number): Uint8Array {
  const src = b.bytes;
  const v = b.view;
  const phnum = v.getUint16(56, true);
  const sh = b.shoff + b.index['.symtab']! * 64;
  const symOff = Number(v.getBigUint64(sh + 24, true));
  const symSize = Number(v.getBigUint64(sh + 32, true));
  const phBytes = (phnum + nLoads) * 56;
  const out = new Uint8Array(src.length + phBytes + symSize + 24 * nSyms);
  out.set(src);
  const o = new DataView(out.buffer);
  const p = src.length;
  o.setBigUint64(32, BigInt(p), true);
  o.setUint16(56, phnum + nLoads, true);
  for (let i = 0; i < nLoads; i++) {
    o.setUint32(p + i * 56, 1, true); // PT_LOAD
    o.setUint32(p + i * 56 + 4, 5, true); // R+X, no bytes
    o.setBigUint64(p + i * 56 + 16, 0x1000n, true);
  }
  out.set(src.subarray(b.phoff, b.phoff + phnum * 56), p + nLoads * 56);
  const s = p + phBytes;
  out.set(src.subarray(symOff, symOff + symSize), s);
  for (let i = 0; i < nSyms; i++) out.set(src.subarray(symOff + 24, symOff + 48), s + symSize + 24 * i);
  o.setBigUint64(sh + 24, BigInt(s), true);
  o.setBigUint64(sh + 32, BigInt(symSize + 24 * nSyms), true);
  return out;
}

t.test('many PT_LOAD segments are refused: each lookup by address walked them all', async (t) => {
  // 65,000 empty PT_LOADs and 10,000 function symbols (of the 131,072 bermd admits) took readElf
  // ~12 s, one segment walk per symbol; 65,534 and 131,072 ~150 s on the serving thread
  const t0 = Date.now();
  t.throws(() => readElf(withManyLoads(buildElf(), 65_000, 10_000)), {
    name: 'ElfError',
    code: 'bad-segment',
    message:
      "the ELF has more than 64 PT_LOAD segments: link the harness with the berm guest SDK's linker script",
  });
  t.ok(Date.now() - t0 < 2000, `refused in ${Date.now() - t0} ms`);
  // 64 in all (63 empty ones and the builder's one) are read
  const img = readElf(withManyLoads(buildElf(), 63, 10));
  t.equal(img.segments.length, 64);
  t.same(
    img.functions.map((f) => f.name),
    ['f', 'h'],
  );
});

t.test('relocation targets are found in time among 60,000 code sections', async (t) => {
  // the code sections were scanned once per relocation: 60,000 x 100,000 took minutes
  const img = readElf(buildElf().bytes);
  const text = img.sections.find((s) => s.name === '.text')!;
  const sections = [...img.sections];
  for (let i = 0; i < 60_000; i++) sections.push({ ...text, name: `.text.${i}`, addr: 0x100 + i, size: 1 });
  const r0 = img.relocations.find((r) => r.type === 19)!;
  const relocations = Array.from({ length: 100_000 }, (_, i) => ({
    ...r0,
    type: 2,
    // in .text, or in the executable segment before .text (its headers) but in no code section
    symbolValue: i % 2 === 0 ? text.addr : img.segments[0]!.vaddr,
    addend: 0,
  }));
  const t0 = Date.now();
  const { codeAddresses } = relocationTargets({ ...img, sections, relocations });
  const ms = Date.now() - t0;
  t.ok(img.segments[0]!.vaddr < text.addr && (img.segments[0]!.flags & 1) !== 0);
  t.same([...codeAddresses], [text.addr], 'the address in .text; the one in no code section left out');
  t.ok(ms < 5000, `${ms} ms`);
});

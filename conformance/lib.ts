/**
 * Conformance harness: renders batches of test functions to one assembly source, builds
 * it twice (a guest image for berm and a Linux-user program for qemu-riscv64 that writes the data
 * area to stdout), runs both and compares the data area test by test.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Engine, Linker, type GuestModule, type Instance } from '../src/engine/engine.js';
import { decode } from '../src/riscv/decode.js';

export const CONFORMANCE_DIR = resolve(import.meta.dirname);
const LINK_SCRIPT = join(CONFORMANCE_DIR, 'link.ld');
export const MEMORY_SIZE = 16 << 20;

/** One test function t_<n>: `body` runs, then the registers in `outs` are stored to its slot. */
export interface TestCase {
  /** human-readable description, e.g. `div 0x8000000000000000 -1` */
  name: string;
  /** assembly lines; `%M` is replaced by the label of the test's memory cell, `%T` by its own label,
   * `%R` by its result slot, `%D` by its data block */
  body: string[];
  /** registers dumped (8 bytes each) after the body */
  outs: string[];
  /** bytes of zeroed memory after the dumped registers (label %M), 8-aligned */
  mem?: number;
  /** initialised bytes in .data (label `%D`), compared after the run too; length a multiple of 8 */
  data?: number[];
  /** extra functions emitted after the test (e.g. call targets); `%T` and `%M` are substituted */
  extra?: string[];
  /** the body calls other functions, so ra is saved in a frame */
  saveRa?: boolean;
  /** the test is a whole function written by hand (no dump epilogue): `body` includes `ret` */
  raw?: boolean;
  /** values the spec requires for `outs` (checked against both berm and qemu) */
  expect?: bigint[];
}

export function slotBytes(t: TestCase): number {
  return t.outs.length * 8 + (t.mem ?? 0);
}

const sub = (lines: string[], i: number) =>
  lines.map((l) =>
    l
      .replaceAll('%T', `t_${i}`)
      .replaceAll('%M', `m_${i}`)
      .replaceAll('%D', `d_${i}`)
      .replaceAll('%R', `r_${i}`),
  );

/** Render a batch to assembly. The dump base register is t6 unless t6 is an output (then s0). */
export function render(tests: TestCase[]): string {
  const text: string[] = ['  .option nopic', '  .attribute arch, "rv64i2p0_m2p0_a2p0_c2p0"', '  .text'];
  const data: string[] = ['  .data', '  .p2align 3'];
  const bss: string[] = ['  .bss', '  .p2align 3'];
  tests.forEach((t, i) => {
    const f = `t_${i}`;
    text.push(
      `# ${i}: ${t.name.replaceAll('\n', ' ')}`,
      '  .p2align 1',
      `  .globl ${f}`,
      `  .type ${f}, @function`,
      `${f}:`,
    );
    if (t.raw) {
      text.push(...sub(t.body, i));
    } else {
      if (t.saveRa) text.push('  addi sp, sp, -16', '  sd ra, 8(sp)');
      text.push(...sub(t.body, i));
      const base = t.outs.includes('t6') ? 's0' : 't6';
      if (t.outs.includes(base)) throw new Error(`${t.name}: dumps both t6 and s0`);
      text.push(`  la ${base}, r_${i}`);
      t.outs.forEach((r, k) => text.push(`  sd ${r}, ${k * 8}(${base})`));
      if (t.saveRa) text.push('  ld ra, 8(sp)', '  addi sp, sp, 16');
      text.push('  ret');
    }
    text.push(`  .size ${f}, .-${f}`);
    if (t.extra) text.push(...sub(t.extra, i));
    if (t.data) data.push('  .p2align 3', `d_${i}:`, `  .byte ${t.data.join(', ')}`);
    bss.push('  .p2align 3', `  .globl r_${i}`, `r_${i}:`);
    if (t.outs.length) bss.push(`  .zero ${t.outs.length * 8}`);
    bss.push(`m_${i}:`, `  .zero ${t.mem ?? 0}`, `  .size r_${i}, ${slotBytes(t)}`);
  });
  return [...text, ...data, ...bss, ''].join('\n');
}

/** The qemu wrapper: call the given tests in order, write [__cf_begin, __cf_end) to stdout, exit 0. */
export function renderWrapper(indices: number[]): string {
  const l = [
    '  .option nopic',
    '  .section .wrap, "ax"',
    '  .globl _start',
    '  .type _start, @function',
    '_start:',
  ];
  for (const i of indices) l.push(`  call t_${i}`);
  l.push(
    '  la s1, __cf_begin',
    '  la s2, __cf_end',
    '1:',
    '  li a0, 1',
    '  mv a1, s1',
    '  sub a2, s2, s1',
    '  beqz a2, 2f',
    '  li a7, 64',
    '  ecall',
    '  bltz a0, 3f',
    '  add s1, s1, a0',
    '  j 1b',
    '2:',
    '  li a0, 0',
    '  li a7, 93',
    '  ecall',
    '3:',
    '  li a0, 2',
    '  li a7, 93',
    '  ecall',
    '  .size _start, .-_start',
    '',
  );
  return l.join('\n');
}

const AS = 'riscv64-unknown-elf-as';
const LD = 'riscv64-unknown-elf-ld';
const AS_FLAGS = ['-march=rv64imac', '-mabi=lp64', '-mno-relax'];

export interface Built {
  dir: string;
  guestElf: string;
  qemuElf: string;
  cleanup(): void;
}

/** Assemble `source` into a guest image and a qemu program (calling `qemuTests` in order). */
export function build(source: string, qemuTests: number[]): Built {
  const dir = mkdtempSync(join(tmpdir(), 'berm-cf-'));
  const s = join(dir, 'tests.s');
  writeFileSync(s, source);
  writeFileSync(join(dir, 'wrap.s'), renderWrapper(qemuTests));
  const run = (cmd: string, args: string[]) => {
    try {
      execFileSync(cmd, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (e) {
      const err = e as { stderr?: Buffer };
      throw new Error(`${cmd} failed in ${dir}: ${err.stderr?.toString() ?? String(e)}`);
    }
  };
  run(AS, [...AS_FLAGS, '-o', 'tests.o', 'tests.s']);
  run(AS, [...AS_FLAGS, '-o', 'wrap.o', 'wrap.s']);
  run(LD, ['-T', LINK_SCRIPT, '--emit-relocs', '-e', 't_0', '-o', 'guest.elf', 'tests.o']);
  run(LD, [
    '-T',
    LINK_SCRIPT,
    '--no-warn-rwx-segments',
    '-e',
    '_start',
    '-o',
    'qemu.elf',
    'tests.o',
    'wrap.o',
  ]);
  return {
    dir,
    guestElf: join(dir, 'guest.elf'),
    qemuElf: join(dir, 'qemu.elf'),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** Run the qemu build; its stdout is the data area. */
export function runQemu(elf: string): Uint8Array {
  const out = execFileSync('qemu-riscv64', [elf], { maxBuffer: 1 << 28, timeout: 60_000 });
  return new Uint8Array(out);
}

const engines = new Map<number, Engine>();
/**
 * One engine per level: 0 is the baseline tier (Wasm written directly, no Binaryen), 1..3 the
 * optimising tier at that Binaryen level (2 is what production uses).
 */
export function getEngine(optimizeLevel = 2): Engine {
  let e = engines.get(optimizeLevel);
  if (!e) {
    e = new Engine({
      cacheDir: join(tmpdir(), 'berm-conformance-cache'),
      memorySize: MEMORY_SIZE,
      optimizeLevel: Math.max(1, optimizeLevel),
      tier: optimizeLevel === 0 ? 'baseline' : 'optimized',
    });
    engines.set(optimizeLevel, e);
  }
  return e;
}

export function symbol(mod: GuestModule, name: string): number {
  const s = mod.elf.symbols.find((x) => x.name === name);
  if (!s) throw new Error(`no symbol ${name}`);
  return s.value;
}

export interface EngineRun {
  mod: GuestModule;
  inst: Instance;
  /** the data area after the run */
  data: Uint8Array;
  /** per test: the error thrown by the call, if any */
  errors: Map<number, unknown>;
}

/** Compile the guest image and call the given tests in order in one instance. */
export async function runEngine(elf: string, tests: number[], optimizeLevel = 2): Promise<EngineRun> {
  const mod = await getEngine(optimizeLevel).compile(elf);
  const inst = new Linker(getEngine(optimizeLevel)).instantiate(mod, { timeoutMs: 5000 });
  const errors = new Map<number, unknown>();
  for (const i of tests) {
    try {
      inst.call(`t_${i}`);
    } catch (e) {
      errors.set(i, e);
    }
  }
  const begin = symbol(mod, '__cf_begin');
  const data = inst.memory.read(begin, symbol(mod, '__cf_end') - begin);
  return { mod, inst, data, errors };
}

export interface Divergence {
  index: number;
  test: TestCase;
  /** per dumped register/word: `reg: ours=0x.. qemu=0x..` */
  details: string[];
  ours: Uint8Array;
  qemu: Uint8Array;
}

const hex64 = (b: Uint8Array, off: number) =>
  '0x' + new DataView(b.buffer, b.byteOffset + off, 8).getBigUint64(0, true).toString(16).padStart(16, '0');

/** Compare the slot (and data block) of every test. */
export function compareSlots(
  mod: GuestModule,
  tests: TestCase[],
  indices: number[],
  ours: Uint8Array,
  qemu: Uint8Array,
  errors: Map<number, unknown>,
): Divergence[] {
  const begin = symbol(mod, '__cf_begin');
  const out: Divergence[] = [];
  for (const i of indices) {
    const t = tests[i];
    const ranges: [string, number, number][] = [[`r_${i}`, symbol(mod, `r_${i}`) - begin, slotBytes(t)]];
    if (t.data) ranges.push([`d_${i}`, symbol(mod, `d_${i}`) - begin, t.data.length]);
    const details: string[] = [];
    const err = errors.get(i);
    if (err !== undefined) details.push(`ours trapped: ${err instanceof Error ? err.message : String(err)}`);
    for (const [label, off, len] of ranges) {
      for (let k = 0; k + 8 <= len; k += 8) {
        const a = hex64(ours, off + k);
        const b = hex64(qemu, off + k);
        if (a !== b) {
          const what = label.startsWith('r_') && k / 8 < t.outs.length ? t.outs[k / 8] : `${label}+${k}`;
          details.push(`${what}: ours=${a} qemu=${b}`);
        }
      }
    }
    if (t.expect) {
      const base = symbol(mod, `r_${i}`) - begin;
      t.expect.forEach((v, k) => {
        const want = '0x' + BigInt.asUintN(64, v).toString(16).padStart(16, '0');
        for (const [who, b] of [
          ['ours', ours],
          ['qemu', qemu],
        ] as const) {
          const got = hex64(b, base + k * 8);
          if (got !== want) details.push(`${t.outs[k]}: ${who}=${got}, the spec says ${want}`);
        }
      });
    }
    if (details.length) out.push({ index: i, test: t, details, ours, qemu });
  }
  return out;
}

/** Per test: the decoded names (compressed name when 2 bytes) of its function's instructions. */
export function decodedNames(mod: GuestModule, count: number): string[][] {
  const fns = new Map(mod.image.functions.map((f) => [f.name, f]));
  const res: string[][] = [];
  for (let i = 0; i < count; i++) {
    const names: string[] = [];
    for (const fname of [`t_${i}`, `t_${i}_x`, `t_${i}_y`]) {
      const f = fns.get(fname);
      if (!f) continue;
      const seg = mod.elf.segments.find((s) => f.start >= s.vaddr && f.start < s.vaddr + s.filesz);
      if (!seg) continue;
      let pc = f.start;
      while (pc < f.start + f.size) {
        const o = pc - seg.vaddr;
        const b = seg.data;
        const bits = (b[o] | (b[o + 1] << 8) | ((b[o + 2] ?? 0) << 16) | ((b[o + 3] ?? 0) << 24)) >>> 0;
        const ins = decode(bits);
        names.push(ins.compressed ?? ins.op);
        pc += ins.size;
      }
    }
    res.push(names);
  }
  return res;
}

/** The build {@link runBatch} makes of `tests` (every test also run under qemu). */
export function buildBatch(tests: TestCase[]): Built {
  return build(
    render(tests),
    tests.map((_, i) => i),
  );
}

export interface BatchResult {
  divergences: Divergence[];
  names: string[][];
  mod: GuestModule;
  inst: Instance;
  errors: Map<number, unknown>;
  built: Built;
  qemuOut: Uint8Array;
}

/**
 * Build, run in both, compare. `qemuSkip` lists tests run only in berm (traps, host clocks).
 * `prebuilt`: the build of these tests already made by {@link buildBatch} (cleaned up here unless
 * `keep`).
 */
export async function runBatch(
  tests: TestCase[],
  keep = false,
  optimizeLevel = 2,
  alsoLevels: number[] = [],
  prebuilt?: Built,
): Promise<BatchResult> {
  const idx = tests.map((_, i) => i);
  const built = prebuilt ?? buildBatch(tests);
  try {
    const qemuOut = runQemu(built.qemuElf);
    const r = await runEngine(built.guestElf, idx, optimizeLevel);
    const divergences = compareSlots(r.mod, tests, idx, r.data, qemuOut, r.errors);
    // the same build and qemu run checked against other levels (tiers): only the engine runs again
    for (const level of alsoLevels) {
      const o = await runEngine(built.guestElf, idx, level);
      for (const d of compareSlots(o.mod, tests, idx, o.data, qemuOut, o.errors)) {
        divergences.push({ ...d, details: d.details.map((x) => `[level ${level}] ${x}`) });
      }
    }
    return {
      divergences,
      names: decodedNames(r.mod, tests.length),
      mod: r.mod,
      inst: r.inst,
      errors: r.errors,
      built,
      qemuOut,
    };
  } finally {
    if (!keep) built.cleanup();
  }
}

export function readText(p: string): string {
  return readFileSync(p, 'utf8');
}

export const REGRESSION_DIR = join(CONFORMANCE_DIR, 'regressions');

/**
 * Save a divergence as a regression: `<name>.s` (the complete source; its first line says what
 * diverged and, when the translator is known to be wrong, `# todo:`) and `<name>.expected` (the
 * qemu data area in hex).
 */
export function saveRegression(
  name: string,
  tests: TestCase[],
  qemuOut: Uint8Array,
  note: string,
  todo: boolean,
): void {
  const head = note
    .split('\n')
    .map((l, i) => `# ${i === 0 && todo ? 'todo: ' : ''}${l}`)
    .join('\n');
  writeFileSync(join(REGRESSION_DIR, `${name}.s`), `${head}\n${render(tests)}`);
  writeFileSync(join(REGRESSION_DIR, `${name}.expected`), Buffer.from(qemuOut).toString('hex') + '\n');
}

export interface RegressionResult {
  name: string;
  todo: string | null;
  /** empty when berm's data area equals the saved qemu output */
  mismatch: string[];
  /** qemu still produces the saved output */
  qemuAgrees: boolean;
}

/** Rebuild a saved regression and compare berm (and qemu) with the saved expected output. */
export async function runRegression(name: string): Promise<RegressionResult> {
  const src = readFileSync(join(REGRESSION_DIR, `${name}.s`), 'utf8');
  const expected = new Uint8Array(
    Buffer.from(readFileSync(join(REGRESSION_DIR, `${name}.expected`), 'utf8').trim(), 'hex'),
  );
  const todoLine = src.split('\n').find((l) => l.startsWith('# todo:'));
  const n = (src.match(/^ {2}\.globl t_\d+$/gm) ?? []).length;
  const idx = Array.from({ length: n }, (_, i) => i);
  const built = build(src, idx);
  try {
    const q = runQemu(built.qemuElf);
    const r = await runEngine(built.guestElf, idx);
    const mismatch: string[] = [];
    for (const [i, e] of r.errors)
      mismatch.push(`t_${i} trapped: ${e instanceof Error ? e.message : String(e)}`);
    for (let k = 0; k + 8 <= expected.length; k += 8) {
      const a = hex64(r.data, k);
      const b = hex64(expected, k);
      if (a !== b) mismatch.push(`__cf_begin+${k}: ours=${a} expected=${b}`);
    }
    return {
      name,
      todo: todoLine ? todoLine.slice('# todo:'.length).trim() : null,
      mismatch,
      qemuAgrees: Buffer.from(q).equals(Buffer.from(expected)),
    };
  } finally {
    built.cleanup();
  }
}

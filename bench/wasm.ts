// `make bench` section "wasm": WebAssembly harness images beside translated ELFs and native code.
// The guest-speed programs (fixtures/src/compute.c, wrapped as tools by bench/wasm/speed.c) built
// as a Wasm harness (clang -O2 --target=wasm32), as an ELF (gcc -O2, translated by the optimising
// tier) and natively (gcc -O2, bench/lib/native.ts: the speed section's driver); and, as the
// reference for what V8 gives, the same Wasm module uninstrumented, called with a minimal host of
// the three calls the tools make. All in CPU time (the native driver's clock, the process's CPU
// here), in interleaved rounds, best call per side; each berm call a fresh instance. Then the
// tool-call latency (p50/p99) of the echo fixture in both forms.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine } from '../src/engine/engine.js';
import { Harness } from '../src/harness/harness.js';
import { fnv1a64 } from '../src/util/fnv.js';
import { median, percentile } from './lib/figures.js';
import { SPEED_PROGRAMS, buildDrivers, runDriver, type SpeedProgram } from './lib/native.js';

type Fig = (name: string, value: number, unit: string, label: string, better?: 'lower' | 'higher') => void;

const ROOT = join(import.meta.dirname, '..');

/**
 * The speed section's programs as the Wasm tools take them: always two arguments ("a0 a1"), so a
 * one-argument program gets a 0 after its own.
 */
const PROGRAMS: SpeedProgram[] = SPEED_PROGRAMS.map((p) => ({
  ...p,
  args: p.args.length === 1 ? [...p.args, 0] : [...p.args],
}));

function build(dir: string, target: 'wasm32' | 'riscv64'): string {
  const extra = target === 'wasm32' ? ['BERM_TARGET=wasm32'] : ['BERM_CC=gcc'];
  execFileSync(
    'make',
    [
      '--no-print-directory',
      '-s',
      '-f',
      'guest-sdk/berm.mk',
      'all',
      'HARNESS=speed',
      'SRCS=bench/wasm/speed.c',
      `BUILD=${dir}`,
      'OPT=-O2',
      ...extra,
    ],
    { cwd: ROOT, stdio: 'inherit' },
  );
  return join(dir, target === 'wasm32' ? 'speed.wasm' : 'speed.elf');
}

/** CPU ms of the process (all threads) spent in `f`, and its result. */
function cpu<T>(f: () => T): { ms: number; value: T } {
  const t0 = process.cpuUsage();
  const value = f();
  const d = process.cpuUsage(t0);
  return { ms: (d.user + d.system) / 1000, value };
}

/** CPU ms of `calls` timed tool calls after one warm-up (each a fresh instance); the result. */
function timed(h: Harness, tool: string, args: string, calls: number): { ms: number[]; result: string } {
  let result = '';
  const ms: number[] = [];
  for (let i = 0; i <= calls; i++) {
    const r = cpu(() => h.invoke(tool, new TextEncoder().encode(args)));
    if (r.value.status !== 'ok')
      throw new Error(`${tool}: ${r.value.status === 'failed' ? r.value.message : ''}`);
    result = r.value.result;
    if (i > 0) ms.push(r.ms);
  }
  return { ms, result };
}

const ARGS_LEN = fnv1a64('berm.args.len');
const ARGS_READ = fnv1a64('berm.args.read');
const DONE = fnv1a64('berm.done');

/**
 * The uninstrumented module with the least host there is: `berm.syscall` answering only the
 * three calls bench/wasm/speed.c makes, no fuel, no timeout, a new instance per call. What V8
 * itself gives the clang-built code; not a way berm runs anything.
 */
function rawV8(file: string): (tool: string, args: string) => { ms: number; value: string } {
  const module = new WebAssembly.Module(readFileSync(file));
  return (tool, args) => {
    const a = new TextEncoder().encode(args);
    let memory: WebAssembly.Memory | null = null;
    let out = '';
    const syscall = (n: bigint, ptr: number, len: number): bigint => {
      const num = BigInt.asUintN(64, n);
      const u8 = new Uint8Array(memory!.buffer);
      if (num === ARGS_LEN) return BigInt(a.length);
      if (num === ARGS_READ) {
        u8.set(a.subarray(0, len), ptr);
        return BigInt(Math.min(len, a.length));
      }
      if (num === DONE) out = new TextDecoder().decode(u8.subarray(ptr, ptr + len));
      return 0n;
    };
    const inst = new WebAssembly.Instance(module, { berm: { syscall } });
    memory = inst.exports.memory as WebAssembly.Memory;
    const fn = inst.exports[`berm_tool_${tool}`] as () => void;
    return { ms: cpu(fn).ms, value: out };
  };
}

const geomean = (xs: number[]): number => Math.exp(xs.reduce((a, r) => a + Math.log(r), 0) / xs.length);

/** The "wasm" section (see the module comment). */
export async function benchWasm(fig: Fig, progress: (msg: string) => void, quick = false): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'berm-bench-wasm-'));
  progress('wasm: build bench/wasm/speed.c for wasm32 (clang), riscv64 (gcc -O2) and natively (gcc -O2)');
  const wasmFile = build(dir, 'wasm32');
  const elfFile = build(dir, 'riscv64');
  const { native } = buildDrivers(dir, false);
  const engine = new Engine({ cacheDir: null, tier: 'optimized' });
  const wasm = await Harness.load(engine, wasmFile);
  const elf = await Harness.load(engine, elfFile);
  const raw = rawV8(wasmFile);
  const rounds = quick ? 1 : 3;
  const calls = quick ? 1 : 3;
  const ratios = {
    native: [] as number[],
    translated: [] as number[],
    raw: [] as number[],
    elf: [] as number[],
  };
  for (const p of PROGRAMS) {
    progress(`wasm: ${p.name}, ${rounds} rounds of native, Wasm, translated, raw V8: 1+${calls} calls each`);
    const best = { native: Infinity, wasm: Infinity, elf: Infinity, raw: Infinity };
    const args = p.args.join(' ');
    for (let round = 0; round < rounds; round++) {
      const n = runDriver([native], p, calls);
      const w = timed(wasm, p.name, args, calls);
      const e = timed(elf, p.name, args, calls);
      const r: number[] = [];
      let rawResult = '';
      for (let i = 0; i <= calls; i++) {
        const x = raw(p.name, args);
        rawResult = x.value;
        if (i > 0) r.push(x.ms);
      }
      // speed.c answers 16 hex digits, the driver without leading zeros
      const want = n.result.padStart(16, '0');
      for (const [side, got] of [
        ['Wasm', w.result],
        ['translated', e.result],
        ['raw V8', rawResult],
      ])
        if (got !== want) throw new Error(`${p.name}: ${side} ${got}, native ${want}`);
      best.native = Math.min(best.native, ...n.ms.slice(1));
      best.wasm = Math.min(best.wasm, ...w.ms);
      best.elf = Math.min(best.elf, ...e.ms);
      best.raw = Math.min(best.raw, ...r);
    }
    const base = `wasm.speed.${p.name}`;
    fig(
      `${base}.wasm_ms`,
      best.wasm,
      'ms',
      `${p.what}: Wasm harness (clang -O2 wasm32, instrumented), CPU, best call`,
    );
    fig(
      `${base}.translated_ms`,
      best.elf,
      'ms',
      `${p.what}: translated ELF (gcc -O2, optimising tier), CPU, best call`,
    );
    fig(
      `${base}.native_ms`,
      best.native,
      'ms',
      `${p.what}: x86-64 gcc -O2 (the speed section's driver), CPU, best call`,
    );
    fig(
      `${base}.v8_raw_ms`,
      best.raw,
      'ms',
      `${p.what}: the same Wasm uninstrumented, minimal host (what V8 gives), CPU`,
    );
    fig(`${base}.vs_native`, best.wasm / best.native, 'x', 'Wasm harness / native, best calls');
    fig(`${base}.translated_vs_native`, best.elf / best.native, 'x', 'translated ELF / native, best calls');
    fig(`${base}.vs_translated`, best.wasm / best.elf, 'x', 'Wasm harness / translated ELF, best calls');
    fig(
      `${base}.v8_raw_vs_native`,
      best.raw / best.native,
      'x',
      'uninstrumented Wasm / native: what V8 gives',
    );
    fig(
      `${base}.vs_v8_raw`,
      best.wasm / best.raw,
      'x',
      'Wasm harness / uninstrumented: the cost of berm (fuel, host)',
    );
    ratios.native.push(best.wasm / best.native);
    ratios.elf.push(best.elf / best.native);
    ratios.translated.push(best.wasm / best.elf);
    ratios.raw.push(best.raw / best.native);
  }
  fig('wasm.speed.geomean.vs_native', geomean(ratios.native), 'x', 'geometric mean of Wasm harness / native');
  fig(
    'wasm.speed.geomean.translated_vs_native',
    geomean(ratios.elf),
    'x',
    'geometric mean of translated / native',
  );
  fig(
    'wasm.speed.geomean.vs_translated',
    geomean(ratios.translated),
    'x',
    'geometric mean of Wasm / translated',
  );
  fig(
    'wasm.speed.geomean.v8_raw_vs_native',
    geomean(ratios.raw),
    'x',
    'geometric mean of uninstrumented Wasm / native',
  );

  progress('wasm: echo latency, Wasm and ELF');
  for (const [tag, file] of [
    ['wasm', join(ROOT, 'fixtures/build/echo-wasm32-O2.wasm')],
    ['elf', join(ROOT, 'fixtures/build/echo-gcc-O2.elf')],
  ] as const) {
    const h = await Harness.load(engine, file);
    const n = quick ? 200 : 2000;
    const us: number[] = [];
    for (let i = 0; i < n + 100; i++) {
      const t0 = performance.now();
      h.invoke('echo', '{"x":1}');
      if (i >= 100) us.push((performance.now() - t0) * 1000);
    }
    fig(
      `wasm.echo.${tag}.p50_us`,
      median(us),
      'us',
      `echo tool call p50, ${tag === 'wasm' ? 'Wasm harness' : 'translated ELF'} (fresh instance), wall`,
    );
    fig(
      `wasm.echo.${tag}.p99_us`,
      percentile(us, 99),
      'us',
      `echo tool call p99, ${tag === 'wasm' ? 'Wasm harness' : 'translated ELF'}, wall`,
    );
  }
  await engine.close();
}

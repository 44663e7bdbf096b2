/**
 * berm benchmarks: invocation latency, host-call round trip, compile time (cold and
 * warm), guest speed against native x86-64 and qemu-riscv64 baselines built in the same run,
 * memory, frames/s through a WebSocket connection into a harness (bench/ws.ts), and the workbench
 * page's bundle size, first paint and list of 1,000 harnesses (bench/workbench.ts). Prints a
 * table and writes bench/results/latest.json plus a timestamped copy.
 *   npm run bench            (or make bench)
 *   BENCH_QUICK=1 npm run bench   fewer iterations, for trying the harness out (not for comparing)
 */
import { execFileSync, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Engine, Linker, basicHostFunctions, type GuestModule } from '../src/engine/engine.js';
import { readElf } from '../src/elf/reader.js';
import { Harness } from '../src/harness/harness.js';
import {
  fmt,
  geomean,
  median,
  percentile,
  resultsTable,
  table,
  type Figure,
  type Results,
} from './lib/figures.js';
import { benchQueue } from './queue.js';
import { benchIndex } from './index.js';
import { benchFailover } from './failover.js';
import { benchStartup } from './startup.js';
import { benchWs } from './ws.js';
import { benchWasm } from './wasm.js';
import { buildDrivers, runDriver, SPEED_PROGRAMS } from './lib/native.js';
import { benchWorkbench } from './workbench.js';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const FIX = join(ROOT, 'fixtures/build');
const QUICK = process.env.BENCH_QUICK === '1';
const MiB = 1 << 20;

const figures: Record<string, Figure> = {};
function fig(
  name: string,
  value: number,
  unit: string,
  label: string,
  better: 'lower' | 'higher' = 'lower',
  anchor?: string,
): void {
  figures[name] =
    anchor === undefined ? { value, unit, better, label } : { value, unit, better, label, anchor };
}
function progress(msg: string): void {
  process.stderr.write(`[bench ${((performance.now() - START) / 1000).toFixed(1)}s] ${msg}\n`);
}
const START = performance.now();

/** Persistent cache for everything except the cold-compile figures (keys cover the translator). */
const CACHE = join(tmpdir(), 'berm-bench-cache');
mkdirSync(CACHE, { recursive: true });
const WORK = mkdtempSync(join(tmpdir(), 'berm-bench-'));

function nodeChild(args: string[], expose = false): Record<string, unknown> {
  const flags = ['--stack-size=4000', '--import', './scripts/ts/register.mjs'];
  if (expose) flags.unshift('--expose-gc');
  const script = args[0] === 'section' ? 'bench/run.ts' : 'bench/child.ts';
  const r = spawnSync(process.execPath, [...flags, script, ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    maxBuffer: 64 * MiB,
    stdio: ['ignore', 'pipe', args[0] === 'section' ? 'inherit' : 'pipe'],
  });
  if (r.status !== 0) throw new Error(`bench child ${args.join(' ')} failed:\n${r.stderr}`);
  const last = r.stdout.trim().split('\n').pop() ?? '';
  return JSON.parse(last) as Record<string, unknown>;
}

function textBytes(elf: string): number {
  const img = readElf(new Uint8Array(readFileSync(elf)));
  return img.sections.filter((s) => (s.flags & 4) !== 0).reduce((n, s) => n + s.size, 0);
}

const hr = (): number => performance.now();

// ---------------------------------------------------------------------------------------------
// 3. Compile: cold (empty cache) and warm (disk cache hit) in new processes, to the first call.
// Run first so the cold children start from a cache that holds nothing.
// ---------------------------------------------------------------------------------------------
interface CompileInfoJson {
  cached: boolean;
  wasmBytes: number;
  totalMs: number;
  translate?: { build: number; optimize: number; emit: number };
  wasmCompileMs: number;
}

function largestFixture(): string {
  const elfs = readdirSync(FIX).filter((f) => f.endsWith('.elf'));
  let best = '';
  let size = -1;
  for (const f of elfs) {
    const n = textBytes(join(FIX, f));
    if (n > size) [best, size] = [f, n];
  }
  return best;
}

type FirstCall = { raw: string; args: number[] } | { tool: string; args: string };

function firstCallFor(elf: string): FirstCall {
  if (elf.startsWith('rs_')) {
    // a Rust fixture (fixtures/rust): its harness's first case
    const harness = elf.replace(/-O.\.elf$/, '');
    const rust = JSON.parse(readFileSync(join(ROOT, 'fixtures/rust/cases.json'), 'utf8')) as {
      tools: { harness: string; tool: string; args: string }[];
    };
    const c = rust.tools.find((t) => t.harness === harness);
    if (!c) throw new Error(`no tool case for ${elf}`);
    return { tool: c.tool, args: c.args };
  }
  if (elf.startsWith('compute-')) return { raw: 'fib_rec', args: [20] };
  if (elf.startsWith('big-')) return { raw: 'big_run', args: [1, 7] };
  const cases = JSON.parse(readFileSync(join(ROOT, 'fixtures/cases.json'), 'utf8')) as {
    tools: { source: string; tool: string; args: string; abi?: number }[];
  };
  const src = elf.split('-')[0].replace(/0$/, '') + '.c';
  const abi = /^echo0-/.test(elf) ? 0 : 1;
  const c = cases.tools.find((t) => t.source === src && (t.abi ?? 1) === abi);
  if (!c) throw new Error(`no tool case for ${elf}`);
  return { tool: c.tool, args: c.args };
}

/**
 * Fixtures measured by the compile section: two small ones, the largest, the ~100 KiB guest, and
 * rustc-built harnesses (serde_json at opt-level 0, the ~380 KB-text guest, and 2; core::fmt at s;
 * dense matches at 2).
 */
function compileList(): string[] {
  return [
    ...new Set(['compute-gcc-O2.elf', 'compute-clang-O2.elf', largestFixture(), '../big/big-gcc-O2.elf']),
    ...['rs_json-O0', 'rs_json-O2', 'rs_fmt-Os', 'rs_dense-O2'].map((n) => `../rust/build/${n}.elf`),
  ];
}

function benchCompile(): void {
  const largest = largestFixture();
  for (const f of compileList()) {
    const elf = join(FIX, f);
    const name = `compile.${basename(f).replace(/\.elf$/, '')}`;
    const first = JSON.stringify(firstCallFor(basename(f)));
    const cold = mkdtempSync(join(WORK, 'cold-'));
    // cold, baseline tier ('auto' starts there): what a first call costs without a cache
    progress(`compile ${f} cold (baseline tier)`);
    const c = nodeChild(['compile', elf, cold, String(64 * MiB), first, 'auto']);
    const ci = c.info as CompileInfoJson;
    if (ci.cached) throw new Error(`cold compile of ${f} hit a cache`);
    // cold, optimising tier in the foreground: what `berm compile` costs per image
    progress(`compile ${f} cold (optimising tier)`);
    const co = nodeChild(['compile', elf, cold, String(64 * MiB), first, 'optimized']);
    const coi = co.info as CompileInfoJson;
    if (co.result !== c.result)
      throw new Error(`${f}: optimising tier gave ${co.result}, baseline ${c.result}`);
    progress(`compile ${f} warm (new process)`);
    const warm: Record<string, unknown>[] = [];
    const want = QUICK ? 1 : 3;
    for (let tries = 0; warm.length < want; tries++) {
      const w = nodeChild(['compile', elf, cold, String(64 * MiB), first, 'auto']);
      if (w.result !== c.result)
        throw new Error(`${f}: warm first call gave ${w.result}, cold gave ${c.result}`);
      if ((w.info as CompileInfoJson).cached) warm.push(w);
      // a miss means the translator sources changed meanwhile (the key covers them): that run
      // refilled the cache, so try again, a few times at most
      else if (tries >= want + 2) throw new Error(`warm compile of ${f} keeps missing the cache`);
      else progress(`warm compile of ${f} missed the cache (translator sources changed?): again`);
    }
    const wm = (k: string): number => median(warm.map((w) => w[k] as number));
    const wi = (k: keyof CompileInfoJson): number =>
      median(warm.map((w) => (w.info as CompileInfoJson)[k] as number));
    const tag =
      f === largest
        ? ' (largest fixture)'
        : f.includes('big-')
          ? ' (~100 KiB text guest)'
          : f.includes('/rust/')
            ? ' (rustc-built guest)'
            : '';
    fig(`${name}.text_bytes`, textBytes(elf), 'B', `guest executable section bytes${tag}`);
    fig(`${name}.wasm_bytes`, coi.wasmBytes, 'B', 'translated Wasm module bytes (optimising tier)');
    fig(`${name}.baseline_wasm_bytes`, ci.wasmBytes, 'B', 'translated Wasm module bytes (baseline tier)');
    fig(
      `${name}.cold_first_call_ms`,
      c.firstCallMs as number,
      'ms',
      'no cache, baseline tier: compile + instantiate + first call',
      'lower',
      'upstream 13.7 ms (99 KiB)',
    );
    // the same span in CPU time: the process's (every thread) and the main thread's alone, which a
    // shared machine disturbs far less than the wall clock
    fig(
      `${name}.cold_first_call_cpu_ms`,
      c.firstCallCpuMs as number,
      'ms',
      'cold first call, process CPU time (all threads)',
    );
    fig(
      `${name}.cold_first_call_main_cpu_ms`,
      (c.firstCallThreadCpuMs as number | null) ?? NaN,
      'ms',
      'cold first call, main-thread CPU time',
    );
    fig(
      `${name}.cold_translate_build_ms`,
      ci.translate?.build ?? NaN,
      'ms',
      'cold baseline: analyse + build',
    );
    fig(`${name}.cold_translate_emit_ms`, ci.translate?.emit ?? NaN, 'ms', 'cold baseline: write the binary');
    fig(`${name}.cold_v8_compile_ms`, ci.wasmCompileMs, 'ms', 'cold baseline: new WebAssembly.Module');
    fig(
      `${name}.cold_optimized_first_call_ms`,
      co.firstCallMs as number,
      'ms',
      'no cache, optimising tier (berm compile): compile + instantiate + first call',
    );
    fig(
      `${name}.cold_optimized_build_ms`,
      coi.translate?.build ?? NaN,
      'ms',
      'optimising: build Binaryen IR',
    );
    fig(
      `${name}.cold_optimized_optimize_ms`,
      coi.translate?.optimize ?? NaN,
      'ms',
      'optimising: Binaryen optimize',
    );
    fig(`${name}.cold_optimized_emit_ms`, coi.translate?.emit ?? NaN, 'ms', 'optimising: emit binary');
    fig(
      `${name}.warm_first_call_ms`,
      wm('firstCallMs'),
      'ms',
      'cache hit (optimising tier), new process: compile() + instantiate + first call',
      'lower',
      'upstream 5.3 ms; AOT 0.4 ms',
    );
    fig(`${name}.warm_compile_ms`, wi('totalMs'), 'ms', 'cache hit: engine.compile() total');
    fig(`${name}.warm_v8_compile_ms`, wi('wasmCompileMs'), 'ms', 'cache hit: new WebAssembly.Module');
    fig(
      `${name}.warm_import_ms`,
      wm('importMs'),
      'ms',
      'new process: import engine+harness modules (TS loader)',
    );
  }
}

/**
 * Compile `elf` with an engine on `cacheDir` and write the entry before returning: the cache
 * writes its entries on a later turn of the event loop, and a child started with spawnSync right
 * after would not find them.
 */
async function compiledInto(
  cacheDir: string,
  elf: string,
  config: { tier?: 'optimized' | 'baseline'; memorySize?: number },
): Promise<void> {
  const engine = new Engine({ cacheDir, ...config });
  await engine.compile(elf);
  engine.cache?.flush();
}

// ---------------------------------------------------------------------------------------------
// 1. Invocation: complete tool calls of the echo harness through Harness.invoke.
// ---------------------------------------------------------------------------------------------
async function benchInvocation(memorySize: number): Promise<void> {
  const n = QUICK ? 2000 : 10_000;
  const args = '{"x":1}';
  const tag = `mem${memorySize / MiB}MiB`;
  {
    progress(`invocation echo ${tag}: ${n} calls`);
    // the optimised tier, as a warm process runs it (translated in the foreground on a miss)
    const engine = new Engine({ cacheDir: CACHE, memorySize, tier: 'optimized' });
    const h = await Harness.load(engine, join(FIX, 'echo-gcc-O2.elf'));
    for (let i = 0; i < 300; i++) h.invoke('echo', args);
    const t = new Array<number>(n);
    for (let i = 0; i < n; i++) {
      const t0 = hr();
      const r = h.invoke('echo', args);
      t[i] = hr() - t0;
      if (r.status !== 'ok' || r.result !== args) throw new Error(`echo returned ${JSON.stringify(r)}`);
    }
    const us = t.map((x) => x * 1000);
    fig(
      `invoke.echo.${tag}.p50_us`,
      percentile(us, 50),
      'us',
      `tool call, fresh instance, ${n} calls`,
      'lower',
      'upstream ~17; libriscv 3',
    );
    fig(`invoke.echo.${tag}.p99_us`, percentile(us, 99), 'us', 'tool call p99 (includes GC pauses)');
    fig(`invoke.echo.${tag}.mean_us`, us.reduce((a, b) => a + b, 0) / n, 'us', 'tool call mean');

    // where the time goes: memory allocation, instantiation (memory + image copy + Instance)
    const m = QUICK ? 500 : 3000;
    const pages = memorySize / 65536;
    const alloc: number[] = [];
    for (let i = 0; i < m; i++) {
      const t0 = hr();
      new WebAssembly.Memory({ initial: pages, maximum: pages });
      alloc.push((hr() - t0) * 1000);
    }
    fig(`invoke.echo.${tag}.part_memory_p50_us`, median(alloc), 'us', 'part: new WebAssembly.Memory alone');
    const linker = new Linker(engine);
    const inst: number[] = [];
    for (let i = 0; i < m; i++) {
      const t0 = hr();
      linker.instantiate(h.module);
      inst.push((hr() - t0) * 1000);
    }
    fig(
      `invoke.echo.${tag}.part_instantiate_p50_us`,
      median(inst),
      'us',
      'part: Linker.instantiate (memory+image+Instance)',
    );
  }
}

// ---------------------------------------------------------------------------------------------
// 2. Host call round trip: hc_loop(n) makes n ecalls and nothing else; hc_interleave(n) makes one
//    berm.log ecall every 4 loop iterations (a host function doing real work).
// ---------------------------------------------------------------------------------------------
async function benchHostCall(): Promise<void> {
  const calls = QUICK ? 250_000 : 1_000_000;
  const engine = new Engine({ cacheDir: CACHE, tier: 'optimized' });
  const mod = await engine.compile(join(FIX, 'hostcalls-gcc-O2.elf'));
  const variants: [string, string, (m: GuestModule) => Linker][] = [
    [
      'noop',
      'ns per ecall to a no-op host function (incl. 4 loop iterations of guest work)',
      (m) => {
        const l = new Linker(engine);
        for (const [n, f] of basicHostFunctions(m)) l.define(n, f);
        return l.define('berm.log', () => {});
      },
    ],
    [
      'log',
      'ns per ecall to berm.log that decodes the 18-byte line (basicHostFunctions)',
      (m) => {
        const l = new Linker(engine);
        for (const [n, f] of basicHostFunctions(m)) l.define(n, f);
        return l;
      },
    ],
  ];
  let expect: bigint | null = null;
  for (const [tag, label, mk] of variants) {
    progress(`host call ${tag}: ${calls} ecalls`);
    const linker = mk(mod);
    let count = 0;
    const counting = new Linker(engine);
    for (const [n, f] of basicHostFunctions(mod)) counting.define(n, f);
    counting.define('berm.log', () => void count++);
    const check = counting.instantiate(mod).call('hc_interleave', 4000, 7)[0];
    if (count !== 1000) throw new Error(`hc_interleave(4000) made ${count} log calls, expected 1000`);
    void check;
    const runs: number[] = [];
    for (let i = 0; i < 3; i++) {
      const inst = linker.instantiate(mod);
      const t0 = hr();
      const r = inst.call('hc_interleave', 4 * calls, 7)[0];
      runs.push(((hr() - t0) * 1e6) / calls);
      if (expect !== null && r !== expect) throw new Error(`hc_interleave gave ${r}, earlier ${expect}`);
      expect = r;
    }
    fig(`hostcall.${tag}.ns`, median(runs), 'ns', label, 'lower', undefined);
  }
  // the pure round trip: hc_loop(n) makes n ecalls with no other guest work
  progress(`host call pure: ${calls} ecalls`);
  const pure = new Linker(engine).define('berm.heap.size', () => 0n);
  const runs: number[] = [];
  const cpu: number[] = [];
  for (let i = 0; i < 5; i++) {
    const inst = pure.instantiate(mod);
    const c0 = process.cpuUsage();
    const t0 = hr();
    const r = inst.call('hc_loop', calls)[0];
    runs.push(((hr() - t0) * 1e6) / calls);
    cpu.push((process.cpuUsage(c0).user * 1e3) / calls);
    if (r !== BigInt(calls)) throw new Error(`hc_loop(${calls}) returned ${r}`);
    inst.dispose();
  }
  fig(
    'hostcall.pure.ns',
    median(runs),
    'ns',
    'ns per ecall round trip with no guest work (hc_loop, host function returning 0)',
    'lower',
    'upstream ~30',
  );
  fig(
    'hostcall.pure.cpu_ns',
    median(cpu),
    'ns',
    'the same in CPU time of the thread (user; steadier than wall time on a shared machine)',
    'lower',
    'target <= 40',
  );
}

// ---------------------------------------------------------------------------------------------
// 4. Guest speed: berm vs native x86-64 gcc -O2 vs qemu-riscv64 (Linux-user, same C).
// ---------------------------------------------------------------------------------------------
const PROGRAMS = SPEED_PROGRAMS;

/** Interleaved rounds of the guest-speed figures, and calls per side in each (see benchSpeed). */
const SPEED_ROUNDS = QUICK ? 1 : 5;
const SPEED_CALLS = QUICK ? 1 : 3;

/**
 * Guest speed, per program and tier, in {@link SPEED_ROUNDS} interleaved rounds: each round runs
 * the native driver (a fresh process: one warm-up call, then {@link SPEED_CALLS} timed calls) and
 * then a fresh berm process (bench/child.ts speed: the module from the cache, one warm-up call,
 * then SPEED_CALLS timed calls, a fresh instance each), so both sides are measured the same way, a
 * burst of load from neighbours hits both sides rather than one, and berm's figure is not that of
 * one process's code placement. Figures: the minimum over every timed call per side (berm_ms,
 * native_ms, vs_native = their ratio), the median of the per-round ratios (vs_native_median: each
 * round's best berm call over its best native call) and each side's spread (median over minimum
 * of the per-round bests, minus 1, in %): a spread of several percent says the run was disturbed
 * and a difference of that size between two runs is noise. qemu runs once per program (1 warm-up
 * + 7 calls): it is a reference, not a target.
 */
async function benchSpeed(): Promise<void> {
  progress('build native (gcc -O2) and Linux-user RISC-V (riscv64-linux-gnu-gcc -O2 -static) drivers');
  const built = buildDrivers(WORK, true);
  const native = built.native;
  const rv = built.rv!;
  // the optimising tier (what `berm compile` caches) and the baseline tier (a cold start)
  const tiers = [
    { tier: 'optimized' as const, prefix: 'speed' },
    { tier: 'baseline' as const, prefix: 'speed.baseline' },
  ];
  const qemuCalls = QUICK ? 1 : 7;
  const qemuMs = new Map<string, number>();
  const want = new Map<string, string>();
  for (const p of PROGRAMS) {
    progress(`guest speed ${p.name}: qemu 1+${qemuCalls} calls`);
    const b = runDriver(['qemu-riscv64', rv], p, qemuCalls);
    want.set(p.name, b.result);
    qemuMs.set(p.name, Math.min(...b.ms.slice(1)));
    fig(`speed.${p.name}.qemu_ms`, qemuMs.get(p.name)!, 'ms', `${p.what}: qemu-riscv64 (rv64gc -O2), CPU`);
  }
  const spread = (bests: number[]): number => (median(bests) / Math.min(...bests) - 1) * 100;
  for (const { tier, prefix } of tiers) {
    // translated here once, into the cache each round's process compiles from
    const elf = join(FIX, 'compute-gcc-O2.elf');
    await compiledInto(CACHE, elf, { tier });
    const vsNative: number[] = [];
    const vsNativeMedian: number[] = [];
    const vsNativeThread: number[] = [];
    const vsQemu: number[] = [];
    for (const p of PROGRAMS) {
      progress(
        `guest speed ${p.name} (${tier} tier): ${SPEED_ROUNDS} rounds of native 1+${SPEED_CALLS}, berm 1+${SPEED_CALLS}, fresh processes`,
      );
      // one fresh process per round, as for the native driver: where V8 places a hot loop, and
      // so its speed, differs between processes running the same module by up to ~40 % here
      // (coremark 29-41 ms), which an in-process loop would take as the figure of the whole run
      let first = NaN;
      const natBest: number[] = [];
      const bermBest: number[] = [];
      const threadBest: number[] = [];
      for (let round = 0; round < SPEED_ROUNDS; round++) {
        const a = runDriver([native], p, SPEED_CALLS);
        if (a.result !== want.get(p.name))
          throw new Error(`${p.name}: native ${a.result}, qemu ${want.get(p.name)}`);
        natBest.push(Math.min(...a.ms.slice(1)));
        const spec = { symbol: p.symbol, args: p.args, warm: 1, calls: SPEED_CALLS };
        const b = nodeChild(['speed', elf, CACHE, String(64 * MiB), JSON.stringify(spec), tier]);
        if (b.result !== want.get(p.name) || b.tier !== tier) {
          throw new Error(
            `${p.name} (${tier} tier): berm ${String(b.result)} on ${String(b.tier)}, expected ${want.get(p.name)}`,
          );
        }
        const ms = b.ms as number[];
        if (round === 0) first = ms[0];
        bermBest.push(Math.min(...ms.slice(1)));
        threadBest.push(Math.min(...(b.threadMs as number[]).slice(1)));
      }
      const [o, n, q] = [Math.min(...bermBest), Math.min(...natBest), qemuMs.get(p.name)!];
      const ratioMedian = median(bermBest.map((b, i) => b / natBest[i]));
      vsNative.push(o / n);
      vsNativeThread.push(Math.min(...threadBest) / n);
      vsNativeMedian.push(ratioMedian);
      vsQemu.push(o / q);
      fig(
        `${prefix}.${p.name}.first_call_ms`,
        first,
        'ms',
        `${p.what}: first call of the first round's process, CPU (${tier} tier; V8 Liftoff code, tier-up compiles count)`,
      );
      fig(
        `${prefix}.${p.name}.berm_ms`,
        o,
        'ms',
        `${p.what}: translated (compute-gcc-O2.elf, ${tier} tier), CPU, best call`,
      );
      fig(
        `${prefix}.${p.name}.berm_spread_pct`,
        spread(bermBest),
        '%',
        `berm: median over best of the rounds' bests, minus 1 (${tier} tier)`,
      );
      fig(`${prefix}.${p.name}.vs_native`, o / n, 'x', `berm CPU / native CPU, best calls (${tier} tier)`);
      fig(
        `${prefix}.${p.name}.vs_native_thread`,
        Math.min(...threadBest) / n,
        'x',
        `berm main-thread CPU (V8's compiler and GC threads left out) / native CPU, best calls (${tier} tier)`,
      );
      fig(
        `${prefix}.${p.name}.vs_native_median`,
        ratioMedian,
        'x',
        `median over the interleaved rounds of berm / native, each round's best calls (${tier} tier)`,
      );
      fig(`${prefix}.${p.name}.vs_qemu`, o / q, 'x', `berm CPU / qemu CPU (${tier} tier)`);
      if (tier === 'optimized') {
        fig(`speed.${p.name}.native_ms`, n, 'ms', `${p.what}: x86-64 gcc -O2, CPU, best call`);
        fig(
          `speed.${p.name}.native_spread_pct`,
          spread(natBest),
          '%',
          `native: median over best of the rounds' bests, minus 1`,
        );
      }
    }
    fig(
      `${prefix}.geomean.vs_native`,
      geomean(vsNative),
      'x',
      `geometric mean of berm/native, best calls (${tier} tier)`,
    );
    fig(
      `${prefix}.geomean.vs_native_median`,
      geomean(vsNativeMedian),
      'x',
      `geometric mean of the programs' median round ratios berm/native (${tier} tier)`,
    );
    fig(
      `${prefix}.geomean.vs_native_thread`,
      geomean(vsNativeThread),
      'x',
      `geometric mean of berm main-thread CPU / native CPU, best calls (${tier} tier)`,
    );
    fig(`${prefix}.geomean.vs_qemu`, geomean(vsQemu), 'x', `geometric mean of berm/qemu (${tier} tier)`);
  }
}

// ---------------------------------------------------------------------------------------------
// 5. Memory: RSS of a process holding one compiled module; extra RSS per live instance.
// ---------------------------------------------------------------------------------------------
async function benchMemory(): Promise<void> {
  const n = QUICK ? 50 : 200;
  for (const [memorySize, tag] of [
    [64 * MiB, 'mem64MiB'],
    [MiB, 'mem1MiB'],
  ] as const) {
    const elf = join(FIX, 'echo-gcc-O2.elf');
    await compiledInto(CACHE, elf, { memorySize }); // make sure the child hits the cache
    progress(`memory ${tag}: ${n} live instances (child process)`);
    const r = nodeChild(['memory', elf, CACHE, String(memorySize), String(n)], true);
    if (tag === 'mem64MiB') {
      fig(
        'memory.process_base_rss_kib',
        r.rssBaseKiB as number,
        'KiB',
        'child RSS after importing the engine (node + loader)',
      );
      fig(
        'memory.process_with_module_rss_kib',
        r.rssModuleKiB as number,
        'KiB',
        'child RSS holding one compiled module (echo)',
      );
      fig(
        'memory.process_with_module_peak_kib',
        r.peakModuleKiB as number,
        'KiB',
        'child peak RSS (maxrss) holding one compiled module',
      );
    }
    fig(
      `memory.per_instance.${tag}_kib`,
      r.perInstanceKiB as number,
      'KiB',
      `extra RSS per live instance (${n} instances, one call each)`,
    );
  }
}

// ---------------------------------------------------------------------------------------------
function gitCommit(): string {
  try {
    const h = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], {
      cwd: ROOT,
      encoding: 'utf8',
    }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], {
      cwd: ROOT,
      encoding: 'utf8',
    }).trim();
    return dirty ? `${h}+dirty` : h;
  } catch {
    return 'unknown';
  }
}

function speedRows(): string[][] {
  const f = (k: string): string => fmt(figures[k]?.value ?? NaN);
  const rows = PROGRAMS.map((p) =>
    ['', 'berm_ms', 'first_call_ms', 'native_ms', 'qemu_ms', 'vs_native', 'vs_native_median', 'vs_qemu'].map(
      (k) => (k === '' ? p.name : f(`speed.${p.name}.${k}`)),
    ),
  );
  rows.push([
    'geomean',
    '',
    '',
    '',
    '',
    f('speed.geomean.vs_native'),
    f('speed.geomean.vs_native_median'),
    f('speed.geomean.vs_qemu'),
  ]);
  return rows;
}

/** bermd under load (bench/daemon.ts, its own process tree: bermd plus the load generator). */
function benchDaemon(): void {
  progress('daemon: tool and /health at 64 connections');
  const r = spawnSync(
    process.execPath,
    ['--stack-size=4000', '--import', './scripts/ts/register.mjs', 'bench/daemon.ts', '--json'],
    { cwd: ROOT, encoding: 'utf8', maxBuffer: 16 * MiB, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  if (r.status !== 0) throw new Error(`bench/daemon.ts failed (status ${r.status})`);
  const last = r.stdout.trim().split('\n').pop() ?? '{}';
  Object.assign(figures, (JSON.parse(last) as { figures: Record<string, Figure> }).figures);
}

/**
 * Scale-out (bench/scale-out.ts, its own process tree: PostgreSQL, 1-3 bermd, the load
 * generator): wakes/s and tool calls/s with 1, 2, 3 daemons on one PostgreSQL store, and one
 * daemon on SQLite. Runnable alone: `node --import ./scripts/ts/register.mjs bench/scale-out.ts`.
 */
function benchScaleOut(): void {
  progress('scale-out: 1, 2, 3 bermd on PostgreSQL, 1 on SQLite');
  const r = spawnSync(
    process.execPath,
    ['--stack-size=4000', '--import', './scripts/ts/register.mjs', 'bench/scale-out.ts', '--json'],
    { cwd: ROOT, encoding: 'utf8', maxBuffer: 16 * MiB, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  if (r.status !== 0) throw new Error(`bench/scale-out.ts failed (status ${r.status})`);
  const last = r.stdout.trim().split('\n').pop() ?? '{}';
  Object.assign(figures, (JSON.parse(last) as { figures: Record<string, Figure> }).figures);
}

/**
 * Many deployments (bench/deploys.ts, its own process tree: bermd --workers 16 and the client):
 * 1,000 distinct images deployed 8 at a time, each acknowledged one answering or refused 507
 * (the bench fails otherwise); deploys/s, PUT latency of the first and last tenth, RSS, restart.
 */
function benchDeploys(): void {
  progress('deploys: 1,000 distinct images on bermd --workers 16');
  const r = spawnSync(
    process.execPath,
    ['--stack-size=4000', '--import', './scripts/ts/register.mjs', 'bench/deploys.ts', '--json'],
    { cwd: ROOT, encoding: 'utf8', maxBuffer: 16 * MiB, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  if (r.status !== 0) throw new Error(`bench/deploys.ts failed (status ${r.status})`);
  const last = r.stdout.trim().split('\n').pop() ?? '{}';
  Object.assign(figures, (JSON.parse(last) as { figures: Record<string, Figure> }).figures);
}

/** Run one section in a fresh process (so GC state and JIT of one do not distort the next). */
function section(name: string): void {
  Object.assign(figures, nodeChild(['section', name]).figures);
}

const SECTIONS: Record<string, () => Promise<void>> = {
  invoke64: () => benchInvocation(64 * MiB),
  invoke1: () => benchInvocation(MiB),
  hostcall: benchHostCall,
  startup: () => benchStartup(fig, progress, WORK, CACHE),
  speed: benchSpeed,
  queue: () => benchQueue(fig, progress),
  compile: async () => benchCompile(),
  ws: () => benchWs(fig, progress),
  wasm: () => benchWasm(fig, progress, QUICK),
  workbench: () => benchWorkbench(fig, progress),
  index: () => benchIndex(fig, progress),
  failover: () => benchFailover(fig, progress),
};

async function main(): Promise<void> {
  for (const tool of ['gcc', 'riscv64-linux-gnu-gcc', 'qemu-riscv64']) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) {
      throw new Error(`${tool} is missing: run bench/setup.sh (make bench does) to install the baselines`);
    }
  }
  try {
    for (const name of Object.keys(SECTIONS)) section(name);
    await benchMemory();
    benchDaemon();
    benchScaleOut();
    benchDeploys();

    const results: Results = {
      version: 1,
      meta: {
        date: new Date().toISOString(),
        commit: gitCommit(),
        node: process.version,
        cpu: cpus()[0]?.model ?? 'unknown',
        nproc: Number(execFileSync('nproc', { encoding: 'utf8' }).trim()),
        platform: `${process.platform}-${process.arch}`,
        durationS: Math.round((performance.now() - START) / 100) / 10,
      },
      figures,
    };
    const dir = join(ROOT, 'bench/results');
    mkdirSync(dir, { recursive: true });
    const latest = join(dir, 'latest.json');
    writeFileSync(latest, JSON.stringify(results, null, 2) + '\n');
    const stamped = join(dir, `${results.meta.date.replace(/[:.]/g, '-')}.json`);
    copyFileSync(latest, stamped);

    const m = results.meta;
    console.log(`berm benchmarks  ${m.date}  commit ${m.commit}  node ${m.node}  ${m.cpu} x${m.nproc}`);
    console.log(QUICK ? '(BENCH_QUICK=1: reduced iterations, do not compare)\n' : '');
    console.log(resultsTable(results));
    console.log('\nGuest speed (ms; ratios are berm time / baseline time, lower is better)');
    console.log(
      table(
        ['program', 'berm CPU ms', 'first call', 'native', 'qemu', 'vs native', 'median', 'vs qemu'],
        speedRows(),
      ),
    );
    console.log(`\nwrote ${latest} and ${basename(stamped)} (${m.durationS} s)`);
  } finally {
    rmSync(WORK, { recursive: true, force: true });
  }
}

if (process.argv[2] === 'section') {
  const name = process.argv[3] ?? '';
  if (!Object.hasOwn(SECTIONS, name)) {
    rmSync(WORK, { recursive: true, force: true });
    process.stderr.write(
      `bench/run.ts section: no section ${JSON.stringify(name)}; the sections are ${Object.keys(SECTIONS).join(', ')} ` +
        '(memory, daemon, scale-out and deploys run only in the whole bench; bench/daemon.ts, bench/scale-out.ts and bench/deploys.ts run alone)\n',
    );
    process.exit(2);
  }
  try {
    await SECTIONS[name]();
  } finally {
    rmSync(WORK, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify({ figures }) + '\n');
} else {
  await main();
}

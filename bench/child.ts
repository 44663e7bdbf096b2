/**
 * Child-process measurements for bench/run.ts (a new process per figure, so caches, JIT state and
 * RSS are those of a fresh process). Prints one JSON line on stdout.
 *   child.ts compile <elf> <cacheDir> <memorySize> <first-call JSON> [tier: auto|optimized|baseline]
 *   child.ts memory <elf> <cacheDir> <memorySize> <instances>
 *   child.ts speed <elf> <cacheDir> <memorySize> <speed JSON> <tier: optimized|baseline>
 * First call JSON: {"raw": symbol, "args": [..]} or {"tool": name, "args": "json text"}.
 * Speed JSON: {"symbol": name, "args": [..], "warm": calls, "calls": calls}.
 */
import { readFileSync } from 'node:fs';
import { builtIsCurrent } from '../bin/launch.js';

type FirstCall = { raw: string; args: number[] } | { tool: string; args: string };

/** Resident set size now, KiB (VmRSS). */
function rssKiB(): number {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) : process.memoryUsage().rss / 1024;
}

/**
 * CPU time of the main thread so far, ns (the first field of Linux's schedstat: time on a core),
 * or NaN where there is none. Unlike process.cpuUsage(), V8's compiler and GC threads and the
 * background optimiser's worker do not count.
 */
function threadCpuNs(): number {
  try {
    return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]);
  } catch {
    return NaN;
  }
}

function gc(): void {
  const g = (globalThis as { gc?: () => void }).gc;
  if (g) for (let i = 0; i < 3; i++) g();
}

/** The compiled modules when dist/ is a build of the current sources (what the CLI runs), else the sources. */
const FROM = builtIsCurrent() ? '../dist' : '../src';

async function compile(
  elf: string,
  cacheDir: string,
  memorySize: number,
  first: FirstCall,
  tier: 'auto' | 'optimized' | 'baseline',
): Promise<object> {
  const t0 = performance.now();
  const { Engine, Linker, basicHostFunctions } = (await import(
    `${FROM}/engine/engine.js`
  )) as typeof import('../src/engine/engine.js');
  const { Harness } = (await import(
    `${FROM}/harness/harness.js`
  )) as typeof import('../src/harness/harness.js');
  const t1 = performance.now();
  const u1 = process.cpuUsage();
  const s1 = threadCpuNs();
  const engine = new Engine({ cacheDir, memorySize, tier });
  let result: string;
  let info;
  if ('raw' in first) {
    const mod = await engine.compile(elf);
    info = mod.info;
    const linker = new Linker(engine);
    for (const [n, f] of basicHostFunctions(mod)) linker.define(n, f);
    result = linker
      .instantiate(mod)
      .call(first.raw, ...first.args)[0]
      .toString(16);
  } else {
    const h = await Harness.load(engine, elf);
    info = h.module.info;
    const r = h.invoke(first.tool, first.args);
    result = r.status === 'ok' ? r.result : `failed: ${r.message}`;
  }
  const t2 = performance.now();
  const s2 = threadCpuNs();
  const u2 = process.cpuUsage(u1);
  // process CPU time (every thread) of the same span: what a shared machine disturbs least
  const firstCallCpuMs = (u2.user + u2.system) / 1000;
  const firstCallThreadCpuMs = (s2 - s1) / 1e6;
  return {
    importMs: t1 - t0,
    firstCallMs: t2 - t1,
    firstCallCpuMs,
    firstCallThreadCpuMs,
    info,
    result,
    from: FROM,
  };
}

async function memory(elf: string, cacheDir: string, memorySize: number, n: number): Promise<object> {
  const { Engine, Linker } = await import('../src/engine/engine.js');
  gc();
  const rssBase = rssKiB();
  const engine = new Engine({ cacheDir, memorySize });
  const mod = await engine.compile(elf);
  if (!mod.info.cached) throw new Error(`memory: ${elf} was not in the cache (binaryen would distort RSS)`);
  gc();
  const rssModule = rssKiB();
  const peakModule = process.resourceUsage().maxRSS;
  // the core host calls of a tool call, with empty arguments
  const linker = new Linker(engine)
    .define('berm.args.len', () => 0n)
    .define('berm.args.read', () => 0n)
    .define('berm.done', () => 0n)
    .define('berm.fail', () => 0n)
    .define('berm.log', () => 0n)
    .define('berm.heap.start', () => BigInt(mod.layout.heapStart))
    .define('berm.heap.size', () => BigInt(mod.layout.heapSize));
  const live = [];
  for (let i = 0; i < n; i++) {
    const inst = linker.instantiate(mod);
    inst.call('berm_tool_echo_len'); // touches stack and heap pages
    live.push(inst);
  }
  gc();
  const rssInstances = rssKiB();
  return {
    rssBaseKiB: rssBase,
    rssModuleKiB: rssModule,
    peakModuleKiB: peakModule,
    perInstanceKiB: (rssInstances - rssModule) / n,
    instances: live.length,
  };
}

/**
 * Guest speed in this fresh process: compile `elf` from the cache (the parent put it there) on
 * `tier`, then `warm` + `calls` calls of `symbol(...args)`, each on a fresh instance and timed in
 * process CPU time (user + system, every thread: V8's background compiles count against berm).
 * The first call runs V8's Liftoff code while TurboFan compiles; the warm-up calls are reported,
 * not compared. Returns each call's result (hex; they must agree), its process CPU ms and its
 * main thread's CPU ms (threadCpuNs: V8's compiler and GC threads left out), first call first.
 * @throws Error when the module was not in the cache or two calls' results differ
 */
async function speed(
  elf: string,
  cacheDir: string,
  memorySize: number,
  spec: { symbol: string; args: number[]; warm: number; calls: number },
  tier: 'optimized' | 'baseline',
): Promise<object> {
  const { Engine, Linker, basicHostFunctions } = (await import(
    `${FROM}/engine/engine.js`
  )) as typeof import('../src/engine/engine.js');
  const engine = new Engine({ cacheDir, memorySize, tier });
  const mod = await engine.compile(elf);
  if (!mod.info.cached) throw new Error(`speed: ${elf} (${tier} tier) was not in the cache`);
  const linker = new Linker(engine);
  for (const [n, f] of basicHostFunctions(mod)) linker.define(n, f);
  const ms: number[] = [];
  const threadMs: number[] = [];
  let result: string | null = null;
  for (let i = 0; i < spec.warm + spec.calls; i++) {
    const inst = linker.instantiate(mod); // a fresh instance per call, as for a tool call
    const c0 = process.cpuUsage();
    const t0 = threadCpuNs();
    const r = inst.call(spec.symbol, ...spec.args)[0];
    const t1 = threadCpuNs();
    const c = process.cpuUsage(c0);
    ms.push((c.user + c.system) / 1e3);
    threadMs.push((t1 - t0) / 1e6);
    const hex = r.toString(16);
    if (result !== null && hex !== result)
      throw new Error(`speed: ${spec.symbol} gave ${hex}, then ${result}`);
    result = hex;
    inst.dispose();
  }
  return { result, ms, threadMs, tier: mod.info.tier, from: FROM };
}

const [mode, elf, cacheDir, memorySize, extra, tier] = process.argv.slice(2);
const out =
  mode === 'compile'
    ? await compile(
        elf,
        cacheDir,
        Number(memorySize),
        JSON.parse(extra) as FirstCall,
        (tier ?? 'auto') as 'auto' | 'optimized' | 'baseline',
      )
    : mode === 'memory'
      ? await memory(elf, cacheDir, Number(memorySize), Number(extra))
      : mode === 'speed'
        ? await speed(
            elf,
            cacheDir,
            Number(memorySize),
            JSON.parse(extra) as { symbol: string; args: number[]; warm: number; calls: number },
            tier as 'optimized' | 'baseline',
          )
        : null;
if (out === null) throw new Error(`unknown mode ${mode}`);
process.stdout.write(JSON.stringify(out) + '\n');

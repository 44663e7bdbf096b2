/**
 * Child-process measurements for bench/run.ts (a new process per figure, so caches, JIT state and
 * RSS are those of a fresh process). Prints one JSON line on stdout.
 *   child.ts compile <elf> <cacheDir> <memorySize> <first-call JSON> [tier: auto|optimized|baseline]
 *   child.ts memory <elf> <cacheDir> <memorySize> <instances>
 * First call JSON: {"raw": symbol, "args": [..]} or {"tool": name, "args": "json text"}.
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
      : null;
if (out === null) throw new Error(`unknown mode ${mode}`);
process.stdout.write(JSON.stringify(out) + '\n');

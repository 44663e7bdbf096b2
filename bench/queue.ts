/**
 * Benchmarks of the runtime's queue (bench/run.ts section `queue`; run alone with
 *   node --stack-size=4000 --import ./scripts/ts/register.mjs bench/run.ts section queue):
 * - arm 100,000 wakes through BermRuntime.arm (one SQLite transaction each), wakes/s;
 * - reload 1,000,000 pending wakes: BermRuntime.create on a state holding them, in a fresh
 *   process (time and RSS; goals <= 0.5 s and <= 300 MiB);
 * - lateness of wakes due at 1,000/s and at 10,000/s of a trivial on_wake (the default pool),
 *   p50/p99/max (goals p99 <= 2 ms and <= 5 ms);
 * - trivial tool calls/s through the queue with the default pool, and the same harness called directly in
 *   one thread (Harness.invoke), as a ratio.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Engine } from '../src/engine/engine.js';
import { Harness } from '../src/harness/harness.js';
import { BermRuntime, SqliteStore, type WakeSpec } from '../src/runtime/index.js';
import { median, percentile } from './lib/figures.js';

type Fig = (name: string, value: number, unit: string, label: string, better?: 'lower' | 'higher') => void;

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const QUICK = process.env.BENCH_QUICK === '1';
const ELF = new Uint8Array(readFileSync(join(ROOT, 'test/data/queue-guest.elf')));
const CACHE = join(tmpdir(), 'berm-bench-cache');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function wake(i: number, when: number): WakeSpec {
  return {
    id: `w${i}`,
    kind: 'wake',
    harness: 'qg',
    entry: 'on_wake',
    when,
    payload: '',
    armedBy: 'bench',
    chain: null,
    depth: 0,
    armedAt: when,
  };
}

/** A runtime on `state` with the default pool (a worker per core, plus the reserve) unless `poolSize`. */
async function runtime(state: string, poolSize?: number): Promise<BermRuntime> {
  const rt = await BermRuntime.create({
    state,
    ...(poolSize !== undefined ? { poolSize } : {}),
    cacheDir: CACHE,
    // the per-harness rate and the cap on a harness's wakes armed through the API (10,000 by
    // default; these arms count as the API's) would refuse most of the load: lifted, the figures
    // are the path's, not the limiter's
    limits: { harnessRate: 1e9, harnessBurst: 1e9, harnessApiWakes: 1e9 },
  });
  await rt.deploy('qg', ELF, { capabilities: ['schedule'] });
  return rt;
}

async function benchArm(fig: Fig, work: string): Promise<void> {
  const n = QUICK ? 10_000 : 100_000;
  const rt = await runtime(join(work, 'arm'));
  const t0 = performance.now();
  for (let i = 0; i < n; i++) rt.arm({ harness: 'qg', delayMs: 3_600_000 + i, id: `a${i}` });
  const ms = performance.now() - t0;
  fig(
    'queue.arm.wakes_per_s',
    (n / ms) * 1000,
    '1/s',
    `BermRuntime.arm of ${n} wakes (one SQLite transaction each, WAL)`,
    'higher',
  );
  fig('queue.arm.us', (ms * 1000) / n, 'us', 'mean time of one arm');
  await rt.close();
}

async function benchReload(fig: Fig, work: string): Promise<void> {
  const n = QUICK ? 100_000 : 1_000_000;
  const state = join(work, 'reload');
  const store = SqliteStore.open(state);
  const t0 = Date.now() + 3_600_000;
  for (let i = 0; i < n; i += 50_000) {
    const batch: WakeSpec[] = [];
    for (let j = i; j < Math.min(n, i + 50_000); j++) batch.push(wake(j, t0 + ((j * 7919) % 86_400_000)));
    store.dues.armMany(batch);
  }
  store.close();
  const r = spawnSync(
    process.execPath,
    ['--stack-size=4000', '--import', './scripts/ts/register.mjs', 'bench/queue.ts', 'reload', state],
    { cwd: ROOT, encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`reload child failed: ${r.stderr}`);
  const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as {
    ms: number;
    rssMiB: number;
    baseMiB: number;
    pending: number;
  };
  if (out.pending !== n) throw new Error(`reloaded ${out.pending} of ${n}`);
  fig(
    'queue.reload.ms',
    out.ms,
    'ms',
    `BermRuntime.create on a state with ${n} pending wakes (fresh process; goal <= 500)`,
  );
  fig('queue.reload.rss_mib', out.rssMiB, 'MiB', `process RSS after the reload (goal <= 300)`);
  fig(
    'queue.reload.rss_delta_mib',
    out.rssMiB - out.baseMiB,
    'MiB',
    'RSS added by the reload over the same process before it',
  );
}

async function reloadChild(state: string): Promise<void> {
  // the modules are loaded first so the figure is the reload, not the TypeScript loader
  const probe = await BermRuntime.create({ state: mkdtempSync(join(tmpdir(), 'berm-probe-')), poolSize: 1 });
  await probe.close();
  const baseMiB = process.memoryUsage().rss / 2 ** 20;
  const t0 = performance.now();
  const rt = await BermRuntime.create({ state, poolSize: 1 });
  const ms = performance.now() - t0;
  const rssMiB = process.memoryUsage().rss / 2 ** 20;
  const pending = rt.stats().wakesPending;
  await rt.close(0);
  process.stdout.write(JSON.stringify({ ms, rssMiB, baseMiB, pending }) + '\n');
}

async function benchLateness(fig: Fig, work: string): Promise<void> {
  const seconds = QUICK ? 2 : 5;
  const n = seconds * 1000;
  const rt = await runtime(join(work, 'late'));
  // warm both workers
  await Promise.all([rt.invoke('qg', 'echo', '{}'), rt.invoke('qg', 'echo', '{}')]);
  const t0 = Date.now() + 1000;
  for (let i = 0; i < n; i++) rt.arm({ harness: 'qg', at: t0 + i, id: `l${i}` });
  const { late, spills } = await fire(rt, n);
  fig(
    'queue.lateness.p50_ms',
    percentile(late, 50),
    'ms',
    `wake lateness at 1,000 wakes/s of a trivial on_wake for ${seconds} s, default pool`,
  );
  fig('queue.lateness.p99_ms', percentile(late, 99), 'ms', 'the same, p99 (goal <= 2)');
  fig('queue.lateness.max_ms', late.at(-1)!, 'ms', 'the same, max');
  fig('queue.spills', spills, 'count', 'due wakes left for a later drain because both workers were busy');
  await rt.close();
}

/**
 * Lateness at 10,000 wakes/s: 20,000 wakes due 0.1 ms apart (ten to a millisecond: due instants
 * are whole ms). They are armed in one transaction through the store and taken in by a rescan,
 * as `berm wake add --count` arms them, so that arming 20,000 one by one (seconds on a loaded
 * machine) never overlaps the firing.
 */
async function benchLateness10k(fig: Fig, work: string): Promise<void> {
  const seconds = QUICK ? 0.5 : 2;
  const n = seconds * 10_000;
  const rt = await runtime(join(work, 'late10k'));
  await Promise.all([rt.invoke('qg', 'echo', '{}'), rt.invoke('qg', 'echo', '{}')]);
  const lead = 2000;
  const t0 = Date.now() + lead;
  const specs: WakeSpec[] = [];
  for (let i = 0; i < n; i++) specs.push(wake(i, t0 + Math.floor(i / 10)));
  rt.store.dues.armMany(specs);
  if (rt.rescan() !== n) throw new Error(`the rescan took in ${rt.stats().wakesPending} of ${n} wakes`);
  if (Date.now() >= t0) throw new Error(`arming ${n} wakes took longer than their ${lead} ms lead`);
  const { late, spills } = await fire(rt, n);
  fig(
    'queue.lateness_10k.p50_ms',
    percentile(late, 50),
    'ms',
    `wake lateness at 10,000 wakes/s of a trivial on_wake for ${seconds} s, default pool`,
  );
  fig('queue.lateness_10k.p99_ms', percentile(late, 99), 'ms', 'the same, p99 (goal <= 5)');
  fig('queue.lateness_10k.max_ms', late.at(-1)!, 'ms', 'the same, max');
  fig('queue.spills_10k', spills, 'count', 'due wakes left for a later drain, at 10,000 wakes/s');
  await rt.close();
}

/** Start `rt` and wait for its `n` armed wakes to run: their lateness (ms, sorted) and the spills. */
async function fire(rt: BermRuntime, n: number): Promise<{ late: number[]; spills: number }> {
  const late: number[] = [];
  rt.on('wake', (w: { lateMs: number }) => late.push(w.lateMs));
  const done = new Promise<void>((resolve) => {
    let k = 0;
    rt.on('invocation', () => ++k === n && resolve());
  });
  rt.start();
  // the due-set's timer does not keep a process alive (an embedder decides that): this does
  const keepAlive = setInterval(() => {}, 1000);
  await done;
  clearInterval(keepAlive);
  late.sort((a, b) => a - b);
  return { late, spills: rt.stats().spills };
}

async function benchCalls(fig: Fig, work: string): Promise<void> {
  const seconds = QUICK ? 1 : 5;
  // direct: the harness in this thread, one call after another
  const h = await Harness.load(new Engine({ cacheDir: CACHE }), ELF);
  for (let i = 0; i < 300; i++) h.invoke('echo', `{"i":${i}}`);
  let direct = 0;
  const d0 = performance.now();
  while (performance.now() - d0 < seconds * 1000) {
    h.invoke('echo', `{"i":${direct}}`);
    direct++;
  }
  const directRate = (direct / (performance.now() - d0)) * 1000;

  const rt = await runtime(join(work, 'calls'));
  const lat: number[] = [];
  let calls = 0;
  let stop = false;
  const worker = async () => {
    while (!stop) {
      const t = performance.now();
      const o = await rt.invoke('qg', 'echo', `{"i":${calls}}`);
      if (o.status !== 'ok') throw new Error(`call failed: ${JSON.stringify(o)}`);
      lat.push(performance.now() - t);
      calls++;
    }
  };
  await Promise.all(Array.from({ length: 4 }, () => rt.invoke('qg', 'echo', '{}')));
  const q0 = performance.now();
  const loops = Array.from({ length: 16 }, worker);
  await sleep(seconds * 1000);
  stop = true;
  await Promise.all(loops);
  const queueRate = (calls / (performance.now() - q0)) * 1000;
  await rt.close();
  fig(
    'queue.calls.direct_per_s',
    directRate,
    '1/s',
    'echo through Harness.invoke in one thread, back to back',
    'higher',
  );
  fig(
    'queue.calls.queue_per_s',
    queueRate,
    '1/s',
    'echo through BermRuntime.invoke, default pool, 16 outstanding',
    'higher',
  );
  fig('queue.calls.vs_direct', queueRate / directRate, 'x', 'queue calls/s / direct calls/s', 'higher');
  fig('queue.calls.p50_ms', median(lat), 'ms', 'latency of one call through the queue (16 outstanding)');
  fig('queue.calls.p99_ms', percentile(lat, 99), 'ms', 'the same, p99');
}

/** The `queue` section of bench/run.ts. */
export async function benchQueue(fig: Fig, progress: (msg: string) => void): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'berm-bench-queue-'));
  try {
    progress('queue: arm');
    await benchArm(fig, work);
    progress('queue: reload');
    await benchReload(fig, work);
    progress('queue: lateness at 1,000 wakes/s');
    await benchLateness(fig, work);
    progress('queue: lateness at 10,000 wakes/s');
    await benchLateness10k(fig, work);
    progress('queue: tool calls/s');
    await benchCalls(fig, work);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[2] === 'reload') await reloadChild(process.argv[3]!);

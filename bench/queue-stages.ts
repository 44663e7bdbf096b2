/**
 * Where a due wake's lateness comes from, stage by stage (the lateness figure of bench/queue.ts,
 * instrumented from outside the runtime). Run:
 *   node --stack-size=4000 --import ./scripts/ts/register.mjs bench/queue-stages.ts [rate/s] [seconds] [poolSize]
 * Prints one JSON line: lateness percentiles (ms), the drains (count, duration, gaps), the store
 * calls on the queue's thread (count, mean us, percentiles and calls over 2 ms), the worker round
 * trips, the queue thread's event loop utilisation and the process's CPU ms per wake. The wakes are
 * armed LEAD_MS ahead (default 4000: the arming must not count); CKPT=auto turns SQLite's automatic
 * WAL checkpoint back on on the runtime's state connection (the store checkpoints from a thread of
 * its own, src/store/wal-checkpointer.ts), to see what checkpoints on the queue's thread cost; the
 * line ends with that thread's counters. Findings: bench/README.md, "Wake lateness".
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { BermRuntime, type SqliteStore } from '../src/runtime/index.js';
import { percentile } from './lib/figures.js';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const ELF = new Uint8Array(readFileSync(join(ROOT, 'test/data/queue-guest.elf')));
const CACHE = join(tmpdir(), 'berm-bench-cache');
const rate = Number(process.argv[2] ?? 1000);
const seconds = Number(process.argv[3] ?? 5);
const poolSize = process.argv[4] ? Number(process.argv[4]) : undefined;
const n = Math.round(rate * seconds);
const work = mkdtempSync(join(tmpdir(), 'berm-late-stages-'));

const rt = await BermRuntime.create({
  state: work,
  ...(poolSize !== undefined ? { poolSize } : {}),
  cacheDir: CACHE,
  limits: { harnessRate: 1e9, harnessBurst: 1e9, harnessApiWakes: 1e9 },
});
await rt.deploy('qg', ELF, { capabilities: ['schedule'] });
await Promise.all([rt.invoke('qg', 'echo', '{}'), rt.invoke('qg', 'echo', '{}')]);

/* eslint-disable @typescript-eslint/no-explicit-any */
const inner = rt as any;
const sched = inner.scheduler;
const disp = inner.dispatcher;
const pool = inner.pool;
const hr = () => performance.timeOrigin + performance.now();
// per drain: start (epoch ms, fractional), its duration, what it found
const drains: { at: number; ms: number; cap: number; idle: number; running: number }[] = [];
const origDrain = sched.drainDue.bind(sched);
sched.drainDue = () => {
  const at = hr();
  const cap = disp.capacity();
  const idle = pool.idle();
  const running = disp.running.size;
  origDrain();
  drains.push({ at, ms: hr() - at, cap, idle, running });
};
// per launched wake: launch instant, worker started, done back on main, journaled
const post: number[] = [];
const back: number[] = [];
const workerWait: number[] = [];
const origRun = pool.run.bind(pool);
pool.run = (job: any, grace: number) => {
  const t = hr();
  const run = origRun(job, grace);
  return {
    ...run,
    done: run.done.then((r: any) => {
      post.push(t);
      back.push(hr() - t);
      workerWait.push(r.waitMs);
      return r;
    }),
  };
};
// store calls on the main thread: count and time of each
const store: Record<string, { n: number; ms: number; all: number[] }> = {};
const timeCalls = (obj: any, names: string[], prefix: string) => {
  for (const name of names) {
    const f = obj[name].bind(obj);
    const c = (store[prefix + name] = { n: 0, ms: 0, all: [] as number[] });
    obj[name] = (...args: unknown[]) => {
      const t = performance.now();
      try {
        return f(...args);
      } finally {
        const d = performance.now() - t;
        c.n++;
        c.ms += d;
        c.all.push(d);
      }
    };
  }
};
// CKPT=auto: SQLite's automatic WAL checkpoint on this thread again (each one syncs the WAL and
// the database here), as before the store's checkpoint thread
if (process.env.CKPT === 'auto') (rt.store as any).db.pragma('wal_autocheckpoint = 1000');
timeCalls(rt.store.dues, ['claim', 'release', 'finish'], 'dues.');
timeCalls(rt.store.journal, ['append'], 'journal.');
const late: number[] = [];
const fired: number[] = [];
rt.on('wake', (w: { lateMs: number; scheduledAt: number }) => {
  late.push(w.lateMs);
  fired.push(hr() - w.scheduledAt);
});
const done = new Promise<void>((resolve) => {
  let k = 0;
  rt.on('invocation', () => ++k === n && resolve());
});
const lead = Number(process.env.LEAD_MS ?? 4000);
const t0 = Date.now() + lead;
const a0 = performance.now();
for (let i = 0; i < n; i++) rt.arm({ harness: 'qg', at: t0 + Math.floor((i * 1000) / rate), id: `l${i}` });
const armMs = performance.now() - a0;
const elu0 = performance.eventLoopUtilization();
const cpu0 = process.cpuUsage();
rt.start();
const keepAlive = setInterval(() => {}, 1000);
await done;
clearInterval(keepAlive);
const elu = performance.eventLoopUtilization(elu0);
const cpu = process.cpuUsage(cpu0);
const spills = rt.stats().spills;
const checkpoints = (rt.store as SqliteStore).checkpoints();
await rt.close();
rmSync(work, { recursive: true, force: true });

const p = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return {
    p50: +percentile(s, 50).toFixed(2),
    p99: +percentile(s, 99).toFixed(2),
    max: +s.at(-1)!.toFixed(2),
  };
};
const dms = drains.map((d) => d.ms);
const gaps = drains.slice(1).map((d, i) => d.at - drains[i]!.at);
console.log(
  JSON.stringify({
    rate,
    n,
    pool: pool.size,
    harnessConcurrency: rt.limits.harnessConcurrency,
    armMs: Math.round(armMs),
    lateness: p(late),
    firedFrac: p(fired),
    drains: drains.length,
    drainMs: p(dms),
    drainTotalMs: Math.round(dms.reduce((a, b) => a + b, 0)),
    drainsWithNoCapacity: drains.filter((d) => d.cap <= 0).length,
    drainGapMs: p(gaps),
    workerRoundTripMs: p(back),
    workerWaitMs: p(workerWait),
    mainElu: +elu.utilization.toFixed(3),
    cpuMsPerWake: +((cpu.user + cpu.system) / 1000 / n).toFixed(3),
    spills,
    checkpoints,
    store: Object.fromEntries(
      Object.entries(store).map(([k, v]) => [
        k,
        {
          n: v.n,
          us: +((v.ms * 1000) / Math.max(1, v.n)).toFixed(1),
          ...(v.n > 0 ? p(v.all) : {}),
          over2ms: v.all.filter((d) => d > 2).length,
        },
      ]),
    ),
  }),
);

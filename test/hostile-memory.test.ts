// Instance memory under many deployments, against a real bermd process (bin/bermd.js on
// 127.0.0.1, port 0), bounded in time: the instances its workers keep between calls are bounded by
// --max-instance-memory and given back once calls stop (RSS measured from /proc/PID/status). Many
// deployments and a deploy refused for want of memory: test/hostile-deploys.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { startBermd, stopBermd } from './helpers/cluster.js';
import { runBerm } from './helpers/berm-cli.js';
import { elf, REPO } from './helpers/daemon.js';
import { TEST_CACHE } from './helpers/fixtures.js';
import { call, put, rss } from './helpers/bermd-load.js';

const HOSTILE = elf('test/data/hostile.elf');
const MiB = 1024 * 1024;
const tmp = mkdtempSync(join(tmpdir(), 'berm-hostile-memory-'));
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

t.test('50 deployments of a tool that fills its memory: RSS bounded, then back to idle', async (t) => {
  // the optimised tier in the cache first, as `berm compile` leaves it for a daemon: with only the
  // baseline tier cached (a fresh cache) bermd runs the background optimiser during the
  // measurement, and its memory (Binaryen's heap, ~0.5 GB) is not the instances'
  const compiled = await runBerm(['compile', join(REPO, 'test/data/hostile.elf')], TEST_CACHE);
  t.equal(compiled.code, 0, `berm compile: ${compiled.stderr}`);
  const budget = 512 * MiB;
  const b = await startBermd({
    root: join(tmp, 'fill'),
    cacheDir: TEST_CACHE,
    workers: 2,
    extra: ['--max-instance-memory', String(budget)],
  });
  t.teardown(() => stopBermd(b));
  t.match(b.log(), /max-instance-memory +536870912 +\(flag --max-instance-memory\)/, 'printed at boot');
  const pid = b.proc.pid!;
  const boot = rss(pid);
  const t0 = Date.now();
  for (let i = 0; i < 50; i += 5)
    for (const r of await Promise.all([0, 1, 2, 3, 4].map((k) => put(b, `h${i + k}`, HOSTILE))))
      t.equal(r.status, 200);
  const deployed = Date.now();
  // a first call of each, so that what the calls leave is not code compiled on first use
  await Promise.all(Array.from({ length: 50 }, (_, i) => call(b, `h${i}`, 'big', { n: 1 })));
  await sleep(500);
  const idle = rss(pid);
  // each call touches 12 MiB of its instance's 64 MiB (its result is over the 4 MiB limit: the
  // call fails without copying it); each harness twice, two harnesses at a time: both workers
  // run every harness, so without a bound they would keep 100 x 12 MiB
  let peak = idle;
  const n = 12 * MiB;
  const called = Date.now();
  for (let i = 0; i < 50; i += 2) {
    const four = await Promise.all([i, i, i + 1, i + 1].map((k) => call(b, `h${k}`, 'big', { n })));
    for (const r of four) {
      t.equal(r.status, 200);
      t.match(await r.json(), { failed: /over the limit of 4194304 bytes/ });
    }
    peak = Math.max(peak, rss(pid));
  }
  const kept = rss(pid);
  const stopped = Date.now();
  // kept instances at most the budget; the two running and a few dropped but not yet collected
  // add their 12 MiB each (without the budget: 100 x 12 MiB = 1.2 GB)
  t.ok(
    peak - idle < budget + 8 * n + 1212 * MiB,
    `peak RSS +${((peak - idle) / MiB).toFixed(0)} MiB over idle`,
  );
  // the calls stop: the workers drop their idle instances within two sweeps (5 s apart) and
  // collect them
  const start = Date.now();
  let now = rss(pid);
  while (now > idle * 1.2 && Date.now() - start < 20_000) {
    await sleep(250);
    now = rss(pid);
  }
  t.comment(
    `RSS: boot ${(boot / MiB).toFixed(0)} MiB, idle with 50 deployments ${(idle / MiB).toFixed(0)} MiB, ` +
      `peak ${(peak / MiB).toFixed(0)} MiB, after the calls ${(kept / MiB).toFixed(0)} MiB, ` +
      `${((Date.now() - start) / 1000).toFixed(1)} s later ${(now / MiB).toFixed(0)} MiB; ` +
      `deploys ${((deployed - t0) / 1000).toFixed(1)} s, calls ${((stopped - called) / 1000).toFixed(1)} s`,
  );
  t.ok(
    now <= idle * 1.2,
    `RSS back within 20% of idle (${(now / MiB).toFixed(0)} of ${(idle / MiB).toFixed(0)} MiB)`,
  );
  // and the tools still answer
  const r = await call(b, 'h7', 'big', { n: 3 });
  t.same(await r.json(), { done: 'xxx' });
});

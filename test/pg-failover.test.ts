// Failover on PostgreSQL: a bermd that dies loses its claims at once (its session advisory lock is
// released by PostgreSQL when its connection drops, src/store/pg-liveness.ts), not after its
// lease; one that hangs without dying (SIGSTOP) keeps them until its lease runs out. Three real
// bermd, SIGKILL, real PostgreSQL (BERM_TEST_PG_URL). The lease is 30 s here, so a wake claimed
// again within 10 s of the kill shows the lock at work (by lease it would take 30-40 s).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import t, { type Test } from 'tap';
import { freshDatabase } from './helpers/pg.js';
import { http, startBermd, stopBermd, type Bermd, type BermdOptions } from './helpers/cluster.js';
import { claimOf, failoverRound, ownerPid } from './helpers/failover.js';
import { QG, journal, sleep, until } from './helpers/scale-out.js';
import { TEST_CACHE } from './helpers/fixtures.js';

const LEASE_MS = 30_000;

async function threeDaemons(t: Test, url: string) {
  const roots = [0, 1, 2].map(() => mkdtempSync(join(tmpdir(), 'bermd-failover-')));
  const opts = (i: number): BermdOptions => ({
    root: roots[i]!,
    store: url,
    cacheDir: TEST_CACHE,
    workers: 2,
    leaseMs: LEASE_MS,
    extra: ['--limit', 'timeoutMs=2000'],
  });
  const nodes: Bermd[] = [await startBermd(opts(0))];
  nodes.push(...(await Promise.all([1, 2].map((i) => startBermd(opts(i))))));
  t.teardown(async () => {
    for (const b of nodes) b.proc.kill('SIGCONT');
    await Promise.all(nodes.map((b) => stopBermd(b)));
  });
  t.equal((await http(`${nodes[0]!.url}/harnesses/qg`, 'PUT', QG)).status, 200);
  await until(
    'qg deployed on every daemon',
    async () =>
      (await Promise.all(nodes.map((b) => http(`${b.url}/harnesses/qg`, 'GET')))).every(
        (a) => a.status === 200,
      ),
    30_000,
  );
  return { nodes, opts };
}

t.test('a killed daemon loses its claims at once; a stopped one keeps them', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const { nodes, opts } = await threeDaemons(t, url);
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  t.teardown(() => db.end());

  // a daemon that hangs (SIGSTOP) keeps its session and its lock: its claim is not taken
  const a = await http(`${nodes[0]!.url}/wakes`, 'POST', {
    harness: 'qg',
    id: 'stopped',
    delay_ms: 0,
    payload: 'spin',
  });
  t.equal(a.status, 201);
  let c: { owner: string; attempt: number } | null = null;
  await until('stopped claimed', async () => (c = await claimOf(db, 'stopped')) !== null, 30_000, 5);
  const owner = (c as unknown as { owner: string }).owner;
  const hung = nodes.find((b) => b.proc.pid === ownerPid(owner))!;
  hung.proc.kill('SIGSTOP');
  await sleep(3000);
  t.equal((await claimOf(db, 'stopped'))?.owner, owner, 'still claimed by the stopped daemon 3 s later');
  hung.proc.kill('SIGCONT');
  await until(
    'stopped journaled as attempt 1 (never redelivered)',
    async () => (await journal(url)).some((x) => x.wake === 'stopped' && x.attempt === 1),
    30_000,
  );

  // two rounds, the killed daemons not restarted (a start costs seconds on a loaded machine)
  for (let r = 0; r < 2; r++) {
    const got = await failoverRound(db, nodes, opts, `kill${r}`, 30_000, false);
    t.ok(
      got.refireMs < 10_000,
      `round ${r}: claimed again ${Math.round(got.refireMs)} ms after the kill (lease ${LEASE_MS} ms)`,
    );
    t.not(got.newOwner, got.killedOwner);
    t.equal(got.attempt, 2, 'the redelivery counts attempt 2');
    // its run ends (the 2 s deadline) before the next kill, which might hit the daemon running it
    await until(
      `kill${r} journaled`,
      async () => (await journal(url)).some((x) => x.wake === `kill${r}`),
      30_000,
    );
  }
  const recs = (await journal(url)).filter((x) => x.trigger === 'wake' && x.wake !== 'stopped');
  t.same(
    recs.map((x) => `${String(x.wake)}:${String(x.attempt)}`).sort(),
    ['kill0:2', 'kill1:2'],
    'each killed wake journaled once, as attempt 2 (the killed run left no record)',
  );
});

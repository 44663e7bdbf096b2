// A wake's delivery is journaled once, with its own attempt, when the database connection drops
// around the write that settles it. Real bermd on real PostgreSQL (BERM_TEST_PG_URL):
//  - through a proxy that cuts the daemon's connection at the statement forgetting the finished
//    claim, either before the statement reaches the server or after it committed, its answer lost
//    (as a database restart or a dropped connection does): the daemon writes what it could not
//    confirm again on reconnection, and the journal still holds one record of the delivery;
//  - a daemon whose database session (and with it its owner lock) is cut while it runs a claimed
//    wake has the claim taken back by another daemon, which delivers it again: two deliveries,
//    journaled with attempts 1 and 2 (the documented at-least-once re-delivery), none twice.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import t, { type Test } from 'tap';
import { freshDatabase } from './helpers/pg.js';
import { http, startBermd, stopBermd, viaPort, type Bermd } from './helpers/cluster.js';
import { claimOf } from './helpers/failover.js';
import { cutProxy, type CutMode } from './helpers/pg-cut-proxy.js';
import { QG, journal, sleep, until } from './helpers/scale-out.js';
import { TEST_CACHE } from './helpers/fixtures.js';
import { OWNER_LOCK_CLASS } from '../src/store/pg-liveness.js';

/** The statement that forgets finished claims (src/store/pg-sql.ts), where the proxy cuts. */
const FORGET = 'DELETE FROM berm_claims c USING unnest';

async function daemon(t: Test, store: string, extra: string[] = []): Promise<Bermd> {
  const b = await startBermd({
    root: mkdtempSync(join(tmpdir(), 'bermd-once-')),
    store,
    cacheDir: TEST_CACHE,
    workers: 1,
    leaseMs: 3000,
    extra,
  });
  t.teardown(() => stopBermd(b));
  return b;
}

/** The wake records of `id` in the journal: [attempt, daemon]. */
async function deliveries(url: string, id: string): Promise<[number, string][]> {
  return (await journal(url))
    .filter((r) => r.trigger === 'wake' && r.wake === id)
    .map((r) => [r.attempt as number, r.daemon as string]);
}

t.test('one journal record per delivery across dropped connections and a lost lock', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const proxy = await cutProxy(Number(new URL(url).port));
  t.teardown(() => proxy.close());
  const extra = ['--limit', 'timeoutMs=2500'];
  const [a, b] = await Promise.all([daemon(t, viaPort(url, proxy.port), extra), daemon(t, url, extra)]);
  t.equal((await http(`${a.url}/harnesses/qg`, 'PUT', QG)).status, 200, 'qg deployed');
  await until('qg on b', async () => (await http(`${b.url}/harnesses/qg`, 'GET')).status === 200, 30_000);
  // b is stopped (SIGSTOP: it keeps its session and claims nothing) while a settles the wakes cut
  b.proc.kill('SIGSTOP');
  t.teardown(() => void b.proc.kill('SIGCONT'));

  // a's connection cut at the statement forgetting the wake's finished claim, before it reaches
  // the server and after it committed (its answer lost): a writes the record and the claim again
  // once it reconnects ("PostgreSQL reachable again" follows what waited), and the record is
  // stored once
  const backs = () => a.log().split('PostgreSQL reachable again').length - 1;
  for (const mode of ['before', 'after'] as CutMode[]) {
    const id = `w-${mode}`;
    const back = backs();
    let cutDone = false;
    const cut = proxy.arm(FORGET, mode).then(() => void (cutDone = true));
    // wakes armed on a, due at once, until a settles one
    const armed: string[] = [];
    for (let n = 0; !cutDone; n++) {
      if (n === 40) throw new Error(`a settled none of ${n} wakes`);
      const w = `${id}-${n}`;
      const r = await http(`${a.url}/wakes`, 'POST', { harness: 'qg', id: w, delay_ms: 0 });
      if (r.status !== 201) throw new Error(`arming ${w}: ${r.status} ${JSON.stringify(r.body)}`);
      armed.push(w);
      await Promise.race([cut, sleep(300)]);
    }
    await until(`a reconnected after the cut ${mode}`, async () => backs() > back, 30_000, 100);
    await until(
      'every wake journaled, no claim left',
      async () =>
        (await claimsOf(url)) === 0 &&
        (await Promise.all(armed.map((w) => deliveries(url, w)))).every((d) => d.length > 0),
      30_000,
    );
    const twice: string[] = [];
    for (const w of armed) {
      const d = await deliveries(url, w);
      if (d.length !== 1 || d[0]![0] !== 1) twice.push(`${w}: ${JSON.stringify(d)}`);
    }
    t.same(twice, [], `cut ${mode}: each of ${armed.length} wakes journaled once, attempt 1`);
  }
  b.proc.kill('SIGCONT');

  // a daemon whose lock session ends while it runs a claimed wake: the other takes the claim back
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  t.teardown(() => db.end());

  // the guest spins until its deadline (timeoutMs): the claim is held for about 2.5 s
  t.equal(
    (await http(`${a.url}/wakes`, 'POST', { harness: 'qg', id: 's', delay_ms: 0, payload: 'spin' })).status,
    201,
  );
  let first: { owner: string; attempt: number } | null = null;
  await until('s claimed', async () => (first = await claimOf(db, 's')) !== null, 30_000, 5);
  const owner = (first as unknown as { owner: string }).owner;
  t.equal((first as unknown as { attempt: number }).attempt, 1);
  // end the session holding the claimer's owner lock: PostgreSQL releases the lock, the daemon lives
  const ended = await db.query<{ ok: boolean }>(
    `SELECT pg_terminate_backend(pid) AS ok FROM pg_locks
     WHERE locktype = 'advisory' AND objsubid = 2 AND classid = $1::oid AND objid = hashtext($2)::oid`,
    [OWNER_LOCK_CLASS, owner],
  );
  t.same(
    ended.rows.map((r) => r.ok),
    [true],
    "the claimer's lock session ended",
  );
  await until(
    'both deliveries journaled',
    async () => (await deliveries(url, 's')).length >= 2 && (await claimsOf(url)) === 0,
    60_000,
  );
  const d = await deliveries(url, 's');
  t.same(
    d.map((x) => x[0]).sort(),
    [1, 2],
    `delivered twice, attempts 1 and 2 (records: ${JSON.stringify(d)})`,
  );
  t.equal(d.find((x) => x[0] === 1)?.[1], owner, 'attempt 1 journaled by the daemon that lost its lock');
  t.not(d.find((x) => x[0] === 2)?.[1], owner, 'attempt 2 by the other daemon');
  t.ok(
    [a, b].every((x) => x.proc.exitCode === null),
    'both daemons still run',
  );
});

async function claimsOf(url: string): Promise<number> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return Number((await c.query<{ n: string }>('SELECT count(*) AS n FROM berm_claims')).rows[0]!.n);
  } finally {
    await c.end();
  }
}

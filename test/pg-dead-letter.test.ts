// The dead-letter set on the PostgreSQL store (the real test cluster, BERM_TEST_PG_URL): two
// runtimes share one database; a wake whose worker is lost on every delivery (a real worker exit
// after the guest ran, test/helpers/exit-after-run.ts) is in berm_dead after wakeAttempts
// deliveries, seen by both, retried through the other (runs again from attempt 1), dropped
// (journaled); a claim of a daemon that died during each delivery is dead-lettered, not run; a
// schema 4 database migrates to 5 and keeps its rows.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t, { type Test } from 'tap';
import pg from 'pg';
import { shutdownBridge } from '../src/sync/bridge.js';
import { BermRuntime } from '../src/runtime/index.js';
import { PgStore } from '../src/store/pg-store.js';
import * as sql from '../src/store/pg-sql.js';
import { ROOT, TEST_CACHE } from './helpers/fixtures.js';
import { freshDatabase, testPool } from './helpers/pg.js';
import { attachedRuntimes } from './helpers/runtimes.js';
import { sleep, until } from './helpers/wait.js';

const QG = new Uint8Array(fs.readFileSync(path.join(ROOT, 'test/data/queue-guest.elf')));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-pg-dead-'));
t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));
t.teardown(() => shutdownBridge());

/** Two runtimes on a fresh database whose workers die after the first `exits` runs of `late`. */
async function pair(
  t: Test,
  exits: number,
): Promise<{ a: BermRuntime; b: BermRuntime; pool: pg.Pool } | null> {
  const url = await freshDatabase(t);
  if (url === null) return null;
  process.env.BERM_TEST_LATE_DIR = fs.mkdtempSync(path.join(tmp, 'exits-'));
  process.env.BERM_TEST_LATE_EXITS = String(exits);
  const stores = [
    await PgStore.open(url, { owner: 'A', leaseMs: 1000 }),
    await PgStore.open(url, { owner: 'B', leaseMs: 1000 }),
  ];
  const rts = await attachedRuntimes(t, stores, {
    poolSize: 1,
    cacheDir: TEST_CACHE,
    limits: { wakeAttempts: 3, wakeRetryMs: 200 },
    workerModules: [new URL('./helpers/exit-after-run.ts', import.meta.url)],
  });
  const pool = testPool(t, url);
  for (const rt of rts) await rt.deploy('late', QG, { capabilities: [] }, { persist: false });
  for (const rt of rts) rt.start();
  return { a: rts[0]!, b: rts[1]!, pool };
}

const journal = async (pool: pg.Pool, id: string) =>
  (await sql.readJournal(pool)).filter((r) => r.wake === id);

t.test('lost on every delivery: in berm_dead, seen by both, retried by the other, dropped', async (t) => {
  const p = await pair(t, 3);
  if (!p) return;
  const { a, b, pool } = p;
  a.arm({ harness: 'late', id: 'doomed', payload: 'hello' });
  await until('the dead record', async () =>
    (await journal(pool, 'doomed')).some((r) => r.trigger === 'dead'),
  );
  const recs = await journal(pool, 'doomed');
  t.match(
    recs.map((r) => [r.trigger, r.outcome, r.attempt]),
    [
      ['wake', 'error', 3],
      ['dead', 'error', 3],
    ],
    'the last delivery journaled, then the move; the lost ones before it left no record',
  );
  const rows = (
    await pool.query(
      'SELECT id, harness, payload, attempt, reason, last_error, attempts, dead_at FROM berm_dead',
    )
  ).rows;
  t.equal(rows.length, 1);
  t.match(rows[0], { id: 'doomed', harness: 'late', payload: 'hello', reason: 'worker-lost', attempts: 3 });
  t.match(rows[0].last_error, /exited with code 7/);
  t.equal((await pool.query('SELECT 1 FROM berm_claims')).rowCount, 0, 'no claim left');
  t.equal((await pool.query('SELECT 1 FROM berm_wakes')).rowCount, 0, 'not pending');
  for (const rt of [a, b]) {
    t.match(rt.deadList(), [
      { reason: 'worker-lost', attempts: 3, wake: { id: 'doomed', payload: 'hello' } },
    ]);
    t.same(rt.deadCounts(), { late: 1 });
  }
  t.equal((a.stats().deadLettered ?? 0) + (b.stats().deadLettered ?? 0), 1, 'counted once');

  // retried through B: leaves the set, runs once more (the workers no longer die) from attempt 1
  b.arm({ harness: 'late', id: 'doomed', delayMs: 60_000 });
  t.same(b.retryDead('doomed'), { status: 'conflict' }, 'refused while a pending wake holds the id');
  t.ok(b.cancel('doomed'));
  t.equal(b.retryDead('doomed').status, 'armed');
  t.same(a.deadList(), [], 'left the set for A too');
  await until('the retried run', async () =>
    (await journal(pool, 'doomed')).some((r) => r.trigger === 'wake' && r.outcome === 'ok'),
  );
  await sleep(300);
  t.match(
    (await journal(pool, 'doomed')).filter((r) => r.trigger === 'wake' && r.outcome === 'ok'),
    [{ attempt: 1 }],
    'ran once, attempt 1',
  );
  t.same(b.retryDead('doomed'), { status: 'missing' });
});

t.test('a claim of a daemon that died during each delivery is dead-lettered, not run', async (t) => {
  const p = await pair(t, 0);
  if (!p) return;
  const { a, pool } = p;
  // a wake claimed by a daemon that is gone (no owner lock: the liveness check takes it back at
  // once) after its third delivery started: what three kills during the run leave behind. Armed,
  // claimed and given its attempt in one transaction, so neither running daemon can claim it first
  const db = await pool.connect();
  await db.query('BEGIN');
  const { records } = await sql.arm(db, [
    {
      id: 'killed',
      kind: 'wake',
      harness: 'late',
      entry: 'on_wake',
      when: Date.now(),
      payload: 'boom',
      armedBy: 'api',
      chain: null,
      depth: 0,
      armedAt: Date.now(),
      authority: null,
    },
  ]);
  t.ok(await sql.claim(db, records[0]!.seq, 'ghost', 60_000));
  await db.query("UPDATE berm_claims SET attempt = 3 WHERE id = 'killed'");
  await db.query('COMMIT');
  db.release();
  await until('the dead record', async () =>
    (await journal(pool, 'killed')).some((r) => r.trigger === 'dead'),
  );
  const recs = await journal(pool, 'killed');
  t.equal(recs.filter((r) => r.trigger === 'wake').length, 0, 'not run a fourth time');
  t.match(recs.find((r) => r.trigger === 'dead')!.detail, /^interrupted after 3 deliveries/);
  t.match(a.deadList(), [{ reason: 'interrupted', attempts: 3, wake: { id: 'killed', payload: 'boom' } }]);

  // dropped: gone, journaled at once (no claim to wait for)
  t.match(a.dropDead('killed'), { reason: 'interrupted' });
  t.equal(a.dropDead('killed'), null);
  t.equal((await pool.query('SELECT 1 FROM berm_dead')).rowCount, 0);
  t.match(
    (await journal(pool, 'killed')).filter((r) => r.trigger === 'drop'),
    [{ harness: 'late', attempt: 3 }],
  );
});

t.test('a schema 4 database migrates to the current schema with the dead-letter set', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const pool = testPool(t, url);
  await sql.migrate(pool, 'test', 'test');
  // as berm with schema 4 left it (no dead-letter set, no journal write ids: schema 6)
  await pool.query(
    'DROP TABLE berm_dead; ALTER TABLE berm_journal DROP COLUMN wid; UPDATE berm_schema SET version = 4',
  );
  const store = await PgStore.open(url, { owner: 'M' });
  store.close();
  t.same((await pool.query('SELECT version FROM berm_schema')).rows, [{ version: sql.SCHEMA_VERSION }]);
  t.equal((await pool.query('SELECT count(*)::int AS n FROM berm_dead')).rows[0].n, 0, 'berm_dead exists');
});

// The queue's runtime on the PostgreSQL store: two BermRuntime instances (two "daemons" in one
// process, each with its own worker pool and PgStore) share one database on the real test cluster
// (BERM_TEST_PG_URL). Wakes armed on either run exactly once when nobody dies; a berm.call.after
// chain crosses over at depth + 1; a harness's berm.set through one runtime is read by its next
// invocation through the other; deployments follow; a wake of a harness one runtime lacks is left
// to the runtime that has it. Multi-process kills are in test/scale-out.test.ts.
import t, { type Test } from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { shutdownBridge } from '../src/sync/bridge.js';
import { BermRuntime } from '../src/runtime/index.js';
import { PgStore } from '../src/store/pg-store.js';
import { readJournal } from '../src/store/pg-sql.js';
import { TEST_CACHE } from './helpers/fixtures.js';
import { freshDatabase, testPool } from './helpers/pg.js';
import { attachedRuntimes } from './helpers/runtimes.js';
import { sleep, until } from './helpers/wait.js';

const REPO = join(import.meta.dirname, '..');
const QG = new Uint8Array(readFileSync(join(REPO, 'test/data/queue-guest.elf')));
const NOTES = new Uint8Array(readFileSync(join(REPO, 'test/data/notes.elf')));

t.teardown(() => shutdownBridge());

async function pair(t: Test): Promise<{ url: string; a: BermRuntime; b: BermRuntime; pool: pg.Pool } | null> {
  const url = await freshDatabase(t);
  if (url === null) return null;
  const stores = [
    await PgStore.open(url, { owner: 'A', leaseMs: 1000 }),
    await PgStore.open(url, { owner: 'B', leaseMs: 1000 }),
  ];
  const [a, b] = await attachedRuntimes(t, stores, { poolSize: 1, cacheDir: TEST_CACHE });
  return { url, a: a!, b: b!, pool: testPool(t, url) };
}

t.test('wakes armed on either runtime run once each, spread over both', async (t) => {
  const p = await pair(t);
  if (!p) return;
  const { a, b, pool } = p;
  for (const rt of [a, b]) await rt.deploy('qg', QG, { capabilities: [] }, { persist: false });
  const n = 300;
  for (let i = 0; i < n; i++)
    (i % 2 ? a : b).arm({ harness: 'qg', id: `w${i}`, delayMs: 500, payload: `w${i}` });
  a.start();
  b.start();
  await until(
    'all wakes journaled',
    async () => (await readJournal(pool)).filter((r) => r.trigger === 'wake').length >= n,
  );
  await sleep(500);
  const w = (await readJournal(pool)).filter((r) => r.trigger === 'wake');
  t.equal(w.length, n, 'no wake ran twice');
  t.equal(new Set(w.map((r) => r.wake)).size, n, 'every wake ran');
  t.ok(
    w.every((r) => r.outcome === 'ok' && r.attempt === 1),
    'first attempts, all ok',
  );
  const by = new Set(w.map((r) => r.daemon));
  t.same([...by].sort(), ['A', 'B'], 'both runtimes ran wakes');
});

t.test('berm.call.after armed on one runtime may run on the other, one level deeper', async (t) => {
  const p = await pair(t);
  if (!p) return;
  const { a, b, pool } = p;
  for (const rt of [a, b]) await rt.deploy('qg', QG, { capabilities: ['schedule'] }, { persist: false });
  a.start();
  b.start();
  const o = await a.invoke(
    'qg',
    'after',
    JSON.stringify({ delay: '300', harness: 'qg', tool: 'echo', args: '{"x":"later"}' }),
  );
  t.equal(o.status, 'ok', JSON.stringify(o));
  await until('the delayed call', async () =>
    (await readJournal(pool)).some((r) => r.trigger === 'wake' && r.entry === 'echo'),
  );
  const rec = (await readJournal(pool)).find((r) => r.trigger === 'wake' && r.entry === 'echo')!;
  t.equal(rec.outcome, 'ok');
  t.equal(rec.depth, 1, 'the armed call runs at depth 1');
  t.equal(rec.wake, 'after:qg');
});

t.test('storage keys: berm.set through one runtime is read through the other', async (t) => {
  const p = await pair(t);
  if (!p) return;
  const { a, b } = p;
  for (const rt of [a, b]) await rt.deploy('notes', NOTES, { capabilities: ['storage'] }, { persist: false });
  const put = await a.invoke('notes', 'note_put', '{"text":"kept in PostgreSQL"}');
  t.equal(put.status, 'ok', JSON.stringify(put));
  const got = await b.invoke('notes', 'note_get', '{}');
  t.equal(got.status, 'ok', JSON.stringify(got));
  t.match(got.status === 'ok' ? got.result : '', 'kept in PostgreSQL');
});

t.test('deployments follow; a wake of a harness only one runtime has runs there', async (t) => {
  const p = await pair(t);
  if (!p) return;
  const { a, b, pool } = p;
  await a.deploy('shared', QG, { capabilities: [] });
  await until('the deployment on B', async () => b.harness('shared') !== undefined, 30_000);
  t.equal(b.harness('shared')!.sha256, a.harness('shared')!.sha256);
  a.undeploy('shared');
  await until('the undeploy on B', async () => b.harness('shared') === undefined, 30_000);
  t.pass('undeployed on B');

  await a.deploy('only', QG, { capabilities: [] }, { persist: false });
  for (let i = 0; i < 40; i++) a.arm({ harness: 'only', id: `o${i}`, delayMs: 200, payload: 'x' });
  b.start();
  a.start();
  await until(
    '40 wakes of only',
    async () => (await readJournal(pool)).filter((r) => r.harness === 'only').length >= 40,
  );
  const recs = (await readJournal(pool)).filter((r) => r.harness === 'only');
  t.same(new Set(recs.map((r) => r.daemon)), new Set(['A']), 'all ran on A, which has the harness');
  t.ok(
    recs.every((r) => r.outcome === 'ok'),
    'none dropped as unknown by B',
  );
});

t.test(
  'a due wake no runtime holds (the claim that locked it rolled back) is adopted and runs',
  async (t) => {
    const p = await pair(t);
    if (!p) return;
    const { a, b, pool, url } = p;
    for (const rt of [a, b]) await rt.deploy('qg', QG, { capabilities: [] }, { persist: false });
    a.start();
    b.start();
    // A claim by a process that then dies mid-statement: the row is locked while both runtimes
    // try it (SKIP LOCKED: they drop their heap entry), then the transaction rolls back.
    const locker = new pg.Client({ connectionString: url });
    await locker.connect();
    t.teardown(() => locker.end().catch(() => {}));
    await locker.query('BEGIN');
    const w = a.arm({ harness: 'qg', id: 'orphan', delayMs: 0, payload: 'o' });
    await locker.query('SELECT 1 FROM berm_wakes WHERE seq = $1 FOR UPDATE', [w.seq]);
    await sleep(1500); // both runtimes have met the locked row by now
    await locker.query('ROLLBACK');
    // Still pending, unless an idle runtime already adopted it (its adoption pass can come right
    // after the rollback on a loaded machine): then it is claimed (running) or has run; either way
    // it must run exactly once.
    const pending = (await pool.query('SELECT id FROM berm_wakes')).rows;
    const claimed = (await pool.query('SELECT id FROM berm_claims')).rows;
    const ranAlready = (await readJournal(pool)).some((r) => r.wake === 'orphan');
    t.ok(
      (pending.length === 1 && pending[0].id === 'orphan') ||
        (pending.length === 0 && (ranAlready || (claimed.length === 1 && claimed[0].id === 'orphan'))),
      'the orphan is pending, running or has run',
    );
    await until(
      'the orphan ran',
      async () => (await readJournal(pool)).some((r) => r.wake === 'orphan'),
      30_000,
    );
    const runs = (await readJournal(pool)).filter((r) => r.wake === 'orphan');
    t.same(
      runs.map((r) => [r.outcome, r.attempt]),
      [['ok', 1]],
      'it ran once, first attempt',
    );
  },
);

t.test('due wakes held by a rate limit: the drain sleeps (no zero-delay timer loop)', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const store = await PgStore.open(url, { owner: 'R', leaseMs: 1000 });
  // one token every 10 s: after the first wake, the others wait for the next token (the checks
  // below take the first wake's run and 1.2 s more: 10 s leaves room on a loaded machine)
  const [rt] = await attachedRuntimes(t, [store], {
    poolSize: 1,
    cacheDir: TEST_CACHE,
    limits: { harnessRate: 0.1, harnessBurst: 1 },
  });
  await rt.deploy('qg', QG, { capabilities: [] }, { persist: false });
  rt.start();
  // the worker starts (and may optimise the guest in the background) first: wait until the
  // process is idle, so the CPU figure below is the drain's (as in runtime-queue.test.ts)
  for (let i = 0; i < 40; i++) {
    const cpu0 = process.cpuUsage();
    const wall0 = performance.now();
    await sleep(250);
    const cpu = process.cpuUsage(cpu0);
    if ((cpu.user + cpu.system) / 1000 / (performance.now() - wall0) < 0.1) break;
  }
  const first = new Promise<void>((resolve) => rt.once('invocation', () => resolve()));
  for (let i = 0; i < 3; i++) rt.arm({ harness: 'qg', id: `r${i}`, payload: `r${i}` });
  await first;
  await sleep(200); // the drain after the first wake has held the others back by now
  // count the timers this process sets for 1 s (Node's own setTimeout, wrapped to count), and
  // its CPU time: a drain looping on zero-delay timers sets ~1,000 (the precise check; the CPU
  // bound is loose, as every thread counts, the background optimiser included)
  const real = globalThis.setTimeout;
  let timers = 0;
  globalThis.setTimeout = ((...args: Parameters<typeof setTimeout>) => {
    timers++;
    return real(...args);
  }) as typeof setTimeout;
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  try {
    await new Promise((r) => real(r, 1000));
  } finally {
    globalThis.setTimeout = real;
  }
  const cpu = process.cpuUsage(cpu0);
  const share = (cpu.user + cpu.system) / 1000 / (performance.now() - wall0);
  t.ok(timers < 50, `${timers} timers set in 1 s while two wakes wait`);
  t.ok(share < 0.9, `CPU ${(share * 100).toFixed(1)} % of one core`);
  const pending = await store.dues.list({});
  t.equal(pending.length, 2, 'both still pending');
});

// The PostgreSQL backend against a real cluster (BERM_TEST_PG_URL, started by .ci/run through
// scripts/pg-cluster.sh): schema and its version check, the shared due-set (claims, SKIP LOCKED,
// leases and their expiry, notifications), deployments stored once by digest, the storage
// capability's keys across stores, and the journal. Each test gets its own database.
import t, { type Test } from 'tap';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import pg from 'pg';
import { shutdownBridge } from '../src/sync/bridge.js';
import { PgStore, PgStoreError } from '../src/store/pg-store.js';
import * as sql from '../src/store/pg-sql.js';
import type { WakeSpec } from '../src/store/store.js';
import { dec } from './helpers/cap-util.js';
import { freshDatabase, testPool } from './helpers/pg.js';

t.teardown(() => shutdownBridge());
// The store never keeps a process alive by itself (its listener socket is unref'd): while a test
// waits for a notification, this timer does.
const keepAlive = setInterval(() => {}, 1000);
t.teardown(() => clearInterval(keepAlive));

const spec = (id: string, when: number, extra: Partial<WakeSpec> = {}): WakeSpec => ({
  id,
  kind: 'wake',
  harness: 'h',
  entry: 'on_wake',
  when,
  payload: `p-${id}`,
  armedBy: 'api',
  chain: null,
  depth: 0,
  armedAt: Date.now(),
  ...extra,
});

async function stores(t: Test, n: number, leaseMs = 10_000): Promise<{ url: string; s: PgStore[] } | null> {
  const url = await freshDatabase(t);
  if (url === null) return null;
  const s: PgStore[] = [];
  for (let i = 0; i < n; i++) s.push(await PgStore.open(url, { leaseMs, owner: `d${i}` }));
  t.teardown(() => s.forEach((x) => x.close()));
  return { url, s };
}

async function query<R extends pg.QueryResultRow>(
  url: string,
  text: string,
  values: unknown[] = [],
): Promise<R[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<R>(text, values)).rows;
  } finally {
    await c.end();
  }
}

t.test('schema: created once by concurrent opens; a newer version is refused with the fix', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const opened = await Promise.all([1, 2, 3].map((i) => PgStore.open(url, { owner: `o${i}` })));
  opened.forEach((s) => s.close());
  const v = await query<{ version: number }>(url, 'SELECT version FROM berm_schema');
  t.same(v, [{ version: sql.SCHEMA_VERSION }]);
  await query(url, 'UPDATE berm_schema SET version = $1', [sql.SCHEMA_VERSION + 1]);
  await t.rejects(PgStore.open(url), {
    name: 'SchemaVersionError',
    message: new RegExp(
      `schema version ${sql.SCHEMA_VERSION + 1}, newer than this berm's ${sql.SCHEMA_VERSION}.*Fix: run a berm that knows schema`,
    ),
  });
});

t.test('an unreachable database is refused at open with its URL (no password) and the fix', async (t) => {
  // a port nothing listens on: bind one, close it
  const net = await import('node:net');
  const srv = net.createServer().listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const port = (srv.address() as { port: number }).port;
  srv.close();
  const err = await PgStore.open(`postgres://berm:secret@127.0.0.1:${port}/x`, {
    connectTimeoutMs: 2000,
  }).then(
    () => null,
    (e: unknown) => e as Error,
  );
  t.ok(err instanceof PgStoreError, 'a PgStoreError');
  t.match(err!.message, `postgres://berm:***@127.0.0.1:${port}/x`);
  t.notMatch(err!.message, 'secret');
  t.match(err!.message, /ECONNREFUSED.*fix: start the database or correct --store/);
});

t.test('due-set: arm, replace, list, cancel; index in seq order', async (t) => {
  const r = await stores(t, 1);
  if (!r) return;
  const d = r.s[0]!.dues;
  const now = Date.now();
  const a = d.arm(spec('a', now + 5000));
  t.same(a.replaced, false);
  t.equal(a.record.attempt, 0);
  const b = d.arm(spec('b', now + 1000));
  t.ok(b.record.seq > a.record.seq, 'seqs increase');
  const a2 = d.arm(spec('a', now + 2000, { payload: 'new' }));
  t.same(a2.replaced, true, 're-arming an id replaces it');
  t.ok(a2.record.seq > b.record.seq, 'a replacement gets a new seq');
  t.equal(d.count(), 2);
  t.same(
    d.list().map((w) => [w.id, w.payload]),
    [
      ['b', 'p-b'],
      ['a', 'new'],
    ],
  );
  t.equal(d.get('a')!.when, now + 2000);
  const ix = d.index(0);
  t.same([...ix.seq], [b.record.seq, a2.record.seq]);
  t.same([...d.index(b.record.seq).seq], [a2.record.seq]);
  t.equal(d.cancel('a', 'other'), false, 'cancel checks the harness');
  t.equal(d.cancel('a', 'h'), true);
  t.equal(d.cancel('a'), false);
  t.equal(d.get('a'), undefined);
  const many = d.armMany([spec('m1', now), spec('m2', now), spec('m1', now + 1)]);
  t.equal(many.length, 3);
  t.equal(many[0]!.when, now + 1, 'a duplicate id in one batch: the last wins');
  t.equal(d.count(), 3);
});

t.test(
  'claims: exactly one daemon wins a wake; a row locked by a claimer is skipped, not waited for',
  async (t) => {
    const r = await stores(t, 3);
    if (!r) return;
    const [a, b, c] = r.s as [PgStore, PgStore, PgStore];
    const w = a.dues.arm(spec('x', Date.now())).record;
    const got = [b, c, a].map((s) => s.dues.claim(w.seq));
    t.equal(got.filter((g) => g !== null).length, 1, 'one claim succeeds');
    t.equal(got[0]!.attempt, 1);
    t.equal(got[0]!.payload, 'p-x');
    const claims = await query<{ owner: string; attempt: number }>(
      r.url,
      'SELECT owner, attempt FROM berm_claims',
    );
    t.same(claims, [{ owner: 'd1', attempt: 1 }]);

    const y = a.dues.arm(spec('y', Date.now())).record;
    const locker = new pg.Client({ connectionString: r.url });
    await locker.connect();
    await locker.query('BEGIN');
    await locker.query('SELECT * FROM berm_wakes WHERE seq = $1 FOR UPDATE', [y.seq]);
    const t0 = Date.now();
    t.equal(c.dues.claim(y.seq), null, 'a locked row is skipped');
    t.ok(Date.now() - t0 < 5000, 'without waiting for the lock');
    await locker.query('ROLLBACK');
    await locker.end();
    t.equal(c.dues.claim(y.seq)!.id, 'y', 'claimable once the lock is gone');
  },
);

t.test('leases: a dead daemon’s claim expires and comes back as a redelivery with attempt + 1', async (t) => {
  const r = await stores(t, 1, 600);
  if (!r) return;
  const [b] = r.s as [PgStore];
  const dead = await PgStore.open(r.url, { leaseMs: 600, owner: 'dead' });
  const w = dead.dues.arm(spec('r', Date.now())).record;
  const c = dead.dues.claim(w.seq)!;
  t.equal(c.attempt, 1);
  // the recurring pattern: the next occurrence is armed (same id) before the body runs
  const next = dead.dues.arm(spec('r', Date.now() + 60_000)).record;
  dead.close(); // stops renewing, like a killed process
  const seen = b.dues.index(0);
  t.same([...seen.seq], [next.seq], 'only the next occurrence is pending');
  // within a few lease periods b's lease work puts the expired claim back and notifies
  const deadline = Date.now() + 15_000;
  let redelivered: number[] = [];
  while (Date.now() < deadline) {
    await new Promise((res) => setTimeout(res, 200));
    redelivered = [...b.dues.index(next.seq).seq];
    if (redelivered.length > 0) break;
  }
  t.equal(redelivered.length, 1, 'the expired claim is pending again under a fresh seq');
  const again = b.dues.claim(redelivered[0]!)!;
  t.equal(again.id, 'r');
  t.equal(again.attempt, 2, 'its second delivery counts attempt 2');
  t.equal(b.dues.get('r')!.seq, next.seq, 'the next occurrence is untouched');
  b.dues.finish(again.id, again.seq);
  const left = await query<{ n: string }>(r.url, 'SELECT count(*) AS n FROM berm_claims');
  t.same(left, [{ n: '0' }]);
});

t.test(
  'a live daemon keeps its leases past their length; release puts a claim back under its seq',
  async (t) => {
    const r = await stores(t, 2, 600);
    if (!r) return;
    const [a, b] = r.s as [PgStore, PgStore];
    const w = a.dues.arm(spec('k', Date.now())).record;
    t.ok(a.dues.claim(w.seq));
    await new Promise((res) => setTimeout(res, 2500));
    t.same([...b.dues.index(0).seq], [], 'a renewed claim is not taken back');
    a.dues.release(w.id, w.seq, w.when);
    t.same([...b.dues.index(0).seq], [w.seq], 'released under its own seq');
    t.equal(b.dues.claim(w.seq)!.attempt, 1, 'the attempt that did not start is not counted');
  },
);

t.test(
  'a claim its live owner does not hold in memory (a call that gave up, then committed) expires and is redelivered',
  async (t) => {
    const r = await stores(t, 2, 600);
    if (!r) return;
    const [a, b] = r.s as [PgStore, PgStore];
    const held = a.dues.arm(spec('held', Date.now())).record;
    const lost = a.dues.arm(spec('lost', Date.now())).record;
    t.ok(a.dues.claim(held.seq), 'a claims one wake through the store');
    // the same statement a's timed-out claim would have committed, made behind its back
    const pool = testPool(t, r.url);
    t.equal((await sql.claim(pool, lost.seq, a.owner, 600))!.id, 'lost');
    const deadline = Date.now() + 15_000;
    let back: number[] = [];
    while (Date.now() < deadline && back.length === 0) {
      await new Promise((res) => setTimeout(res, 200));
      back = [...b.dues.index(lost.seq).seq];
    }
    t.equal(back.length, 1, 'the unknown claim came back as a redelivery although its owner lives');
    const again = b.dues.claim(back[0]!)!;
    t.same([again.id, again.attempt], ['lost', 2], 'its next delivery counts attempt 2');
    const left = await query<{ id: string; owner: string }>(
      r.url,
      'SELECT id, owner FROM berm_claims ORDER BY id',
    );
    t.same(
      left,
      [
        { id: 'held', owner: a.owner },
        { id: 'lost', owner: b.owner },
      ],
      'the claim a holds is renewed, not taken back',
    );
  },
);

t.test(
  'claimDue: daemons take different due wakes in batches, earliest first, skipping locked rows',
  async (t) => {
    const r = await stores(t, 2);
    if (!r) return;
    const [a, b] = r.s as [PgStore, PgStore];
    const now = Date.now();
    const armed = a.dues.armMany([
      ...Array.from({ length: 10 }, (_, i) => spec(`d${i}`, now - 1000 + i * 10)),
      spec('other', now - 2000, { harness: 'h2' }),
      spec('later', now + 60_000),
    ]);
    const first = a.dues.claimDue!(now, 4, ['h']);
    t.same(
      first.map((w) => [w.id, w.attempt]),
      [
        ['d0', 1],
        ['d1', 1],
        ['d2', 1],
        ['d3', 1],
      ],
      'the four earliest due wakes of h, attempt 1',
    );
    // another daemon is claiming d4 right now: skipped, not waited for
    const locker = new pg.Client({ connectionString: r.url });
    await locker.connect();
    t.teardown(() => locker.end().catch(() => {}));
    await locker.query('BEGIN');
    await locker.query("SELECT 1 FROM berm_wakes WHERE id = 'd4' FOR UPDATE");
    const rest = b.dues.claimDue!(now, 10, ['h']);
    t.same(
      rest.map((w) => w.id),
      ['d5', 'd6', 'd7', 'd8', 'd9'],
      'the rest, without the locked row, the future one or another harness',
    );
    await locker.query('ROLLBACK');
    t.same(
      b.dues.claimDue!(now, 10, ['h', 'h2']).map((w) => w.id),
      ['other', 'd4'],
      'once unlocked it is claimable; the harness list decides',
    );
    t.same(b.dues.claimDue!(now, 10, ['h', 'h2']), [], 'nothing more is due');
    const claims = await query<{ owner: string; n: string }>(
      r.url,
      'SELECT owner, count(*) AS n FROM berm_claims GROUP BY owner ORDER BY owner',
    );
    t.same(claims, [
      { owner: 'd0', n: '4' },
      { owner: 'd1', n: '7' },
    ]);
    t.equal(b.dues.get('later')!.seq, armed[11]!.seq, 'the future wake is still pending');
  },
);

t.test(
  'notifications: an arming wakes the other daemons; deployments reach them with the author',
  async (t) => {
    const r = await stores(t, 2);
    if (!r) return;
    const [a, b] = r.s as [PgStore, PgStore];
    const woke = once(b, 'wakes');
    a.dues.arm(spec('n', Date.now() + 100_000));
    await woke;
    t.pass('b heard the arming');
    const elf = new Uint8Array([0x7f, 0x45, 0x4c, 0x46, 1, 2, 3]);
    const sha256 = createHash('sha256').update(elf).digest('hex');
    const heard = once(b, 'deployment');
    a.deployments.put({ name: 'one', sha256, elf, capabilities: ['clock'], grant: {}, deployedAt: 1 });
    t.same((await heard)[0], { name: 'one', op: 'put', sha256, by: 'd0' });
    a.deployments.put({ name: 'two', sha256, elf, capabilities: [], grant: { x: 1 }, deployedAt: 2 });
    const images = await query<{ n: string }>(r.url, 'SELECT count(*) AS n FROM berm_images');
    t.same(images, [{ n: '1' }], 'two names, one image');
    const got = b.deployments.get('two')!;
    t.same([...got.elf!], [...elf]);
    t.same(got.grant, { x: 1 });
    t.same(
      b.deployments.list().map((d) => d.name),
      ['one', 'two'],
    );
    const removed = once(b, 'deployment');
    t.equal(a.deployments.remove('one'), true);
    t.same((await removed)[0], { name: 'one', op: 'remove', by: 'd0' });
    t.equal(a.deployments.remove('one'), false);
    a.deployments.remove('two');
    const left = await query<{ n: string }>(r.url, 'SELECT count(*) AS n FROM berm_images');
    t.same(left, [{ n: '0' }], 'an image no name uses is deleted');
  },
);

t.test('keys: one store writes, another reads; the capability is pointed at the same database', async (t) => {
  const r = await stores(t, 2);
  if (!r) return;
  const [a, b] = r.s as [PgStore, PgStore];
  const k = new TextEncoder().encode('k');
  a.keys.set('h', k, new TextEncoder().encode('v1'));
  t.equal(dec(b.keys.get('h', k)!), 'v1');
  t.equal(b.keys.get('other', k), undefined, 'keys are per harness');
  t.equal(a.keys.databaseFile, r.url, 'the capability is pointed at the same database');
  b.keys.delete('h', k);
  t.equal(a.keys.get('h', k), undefined);
});

t.test('journal: call records at once, wake records with their finished claim', async (t) => {
  const r = await stores(t, 1);
  if (!r) return;
  const [a] = r.s as [PgStore];
  const rec = {
    trigger: 'call',
    harness: 'h',
    entry: 'e',
    chain: 'c1',
    depth: 0,
    start: 1,
    ms: 1,
    outcome: 'ok',
    fuel: 0,
  };
  const pool = testPool(t, r.url);
  a.journal.append(rec);
  t.equal((await sql.readJournal(pool)).length, 1);
  const w = a.dues.claim(a.dues.arm(spec('j', Date.now())).record.seq)!;
  a.journal.append({ ...rec, trigger: 'wake', wake: 'j', attempt: 1, chain: 'c2' });
  t.equal((await sql.readJournal(pool)).length, 1, 'held until the claim finishes');
  a.dues.finish(w.id, w.seq);
  const j = await sql.readJournal(pool);
  t.same(
    j.map((x) => [x.trigger, x.daemon, x.wake]),
    [
      ['call', 'd0', undefined],
      ['wake', 'd0', 'j'],
    ],
  );
  t.same(await query(r.url, 'SELECT * FROM berm_claims'), []);
});

// A wake keeps the authority of the call that armed it across daemons on the PostgreSQL store
// (schema 2), as it does across restarts on SQLite (test/protocol-queue.test.ts): "remind me" is
// invoked on runtime A as an agent in a session; A stops; runtime B, another owner on the same
// database, fires the wake and the reminder reaches the agent-daemon double as that agent, into
// that session. Also: a schema-1 database (before the column existed) is migrated in place, its
// pending wakes kept with no authority; a newer schema is still refused with the fix.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t from 'tap';
import { shutdownBridge } from '../src/sync/bridge.js';
import { PgStore } from '../src/store/pg-store.js';
import * as sql from '../src/store/pg-sql.js';
import { attachProtocol } from '../src/protocol/attach.js';
import { DOUBLE_AGENT_IDS } from './helpers/agent-daemon-double.js';
import type { Plain } from '../src/protocol/index.js';
import { BermRuntime, type Outcome } from '../src/runtime/index.js';
import { startDoubleThread } from './helpers/double-thread.js';
import { ROOT, TEST_CACHE } from './helpers/fixtures.js';
import { freshDatabase, testPool } from './helpers/pg.js';
import { untilDefined } from './helpers/wait.js';

const REMIND = new Uint8Array(fs.readFileSync(path.join(ROOT, 'examples/remind.elf')));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-pg-authority-'));
const dbl = await startDoubleThread();
// worker threads copy the environment when they start: set it before any pool exists
process.env.BERM_AGENT_DAEMON = dbl.endpoint;
t.teardown(async () => {
  shutdownBridge();
  await dbl.close();
  delete process.env.BERM_AGENT_DAEMON;
  fs.rmSync(tmp, { recursive: true, force: true });
});

async function daemon(url: string, owner: string) {
  const store = await PgStore.open(url, { owner, leaseMs: 1000 });
  const rt = await BermRuntime.create({
    store,
    poolSize: 1,
    cacheDir: TEST_CACHE,
    workerModules: [new URL('../src/protocol/index.ts', import.meta.url)],
    limits: { timeoutMs: 30_000, graceMs: 5_000 },
  });
  store.attach(rt, { deployments: false });
  await rt.deploy(
    'remind',
    REMIND,
    { capabilities: ['protocol:schedule', 'protocol:send'], grant: {} },
    { persist: false },
  );
  const door = await attachProtocol(rt, { database: path.join(tmp, `${owner}-subs.sqlite`) });
  return {
    rt,
    close: async () => {
      await door.close();
      await rt.close();
    },
  };
}

t.test('a wake armed on one daemon acts for the agent that asked when another daemon fires it', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const authority = { agent: DOUBLE_AGENT_IDS.assistant, session: 'tg:77:main', sender: 'telegram:77' };
  const a = await daemon(url, 'A');
  const o: Outcome = await a.rt.invoke('remind', 'remind', '{"text":"from daemon A","in_ms":1500}', {
    authority,
  });
  t.equal(o.status, 'ok', JSON.stringify(o));
  await a.close(); // never started firing: the wake is left to B
  const pool = testPool(t, url);
  const stored = await pool.query<{ authority: unknown; armed_by: string }>(
    'SELECT authority, armed_by FROM berm_wakes',
  );
  t.same(stored.rows, [{ authority, armed_by: 'remind' }], 'the pending row carries the authority');
  await dbl.clear();
  const b = await daemon(url, 'B');
  t.teardown(() => b.close());
  b.rt.start();
  const sent = await untilDefined('the reminder sent by daemon B', async () =>
    (await dbl.received())
      .filter((m) => m.msg === 'send')
      .map((m) => m.send as Plain)
      .find((s) => s.content === 'Reminder: from daemon A'),
  );
  t.match(sent, { agent: authority.agent, session_handle: authority.session, sender: authority.sender });
  const j = await untilDefined('the wake journaled', async () => {
    const w = (await sql.readJournal(pool)).filter((r) => r.trigger === 'wake');
    return w.length > 0 ? w : undefined;
  });
  t.same(
    j.map((r) => [r.daemon, r.outcome]),
    [['B', 'ok']],
    `fired once, on B: ${JSON.stringify(j)}`,
  );
});

t.test('a schema-1 database is migrated in place; its pending wakes have no authority', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const pool = testPool(t, url);
  // schema 1 as a berm of that version left it: no authority columns, no armed_by index, no
  // dead-letter set (schema 5), no journal write ids (schema 6), no record of upstream imports
  // (schema 7), no protocol-door subscriptions (schema 8), one pending wake, one journal row
  await sql.migrate(pool, 'setup', 'test');
  await pool.query(`ALTER TABLE berm_wakes DROP COLUMN authority; ALTER TABLE berm_claims DROP COLUMN authority;
    DROP INDEX berm_wakes_armed_by; DROP TABLE berm_dead; ALTER TABLE berm_journal DROP COLUMN wid;
    DROP TABLE berm_reference_imports; DROP TABLE berm_subscriptions; UPDATE berm_schema SET version = 1`);
  await pool.query(`INSERT INTO berm_journal (daemon, rec) VALUES ('old', '{"trigger": "call"}')`);
  await pool.query(
    `INSERT INTO berm_wakes (id, kind, harness, entry, when_ms, payload, armed_by, chain, depth, armed_at)
     VALUES ('old', 'wake', 'h', 'on_wake', 1, 'p', 'api', NULL, 0, 1)`,
  );
  const store = await PgStore.open(url, { owner: 'new' });
  t.teardown(() => store.close());
  const v = await pool.query<{ version: number }>('SELECT version FROM berm_schema');
  t.same(v.rows, [{ version: sql.SCHEMA_VERSION }], 'migrated to the current schema');
  t.equal(sql.SCHEMA_VERSION, 8);
  store.journal.append({
    trigger: 'call',
    harness: 'h',
    entry: 'e',
    chain: 'c',
    depth: 0,
    start: 3,
    ms: 0,
    outcome: 'ok',
    fuel: 0,
  });
  t.same(
    (await sql.readJournal(pool)).map((r) => [r.daemon, r.trigger]),
    [
      ['old', 'call'],
      ['new', 'call'],
    ],
    'the old journal row is kept; a new one is written after it',
  );
  const old = store.dues.get('old')!;
  t.same([old.payload, old.authority], ['p', null], 'the old wake is kept, with no authority');
  const fresh = store.dues.arm({
    id: 'new',
    kind: 'wake',
    harness: 'h',
    entry: 'on_wake',
    when: 2,
    payload: 'q',
    armedBy: 'api',
    chain: null,
    depth: 0,
    armedAt: 2,
    authority: { agent: 'x', session: 's' },
  }).record;
  t.same(fresh.authority, { agent: 'x', session: 's' });
  const c = store.dues.claim(fresh.seq)!;
  t.same(c.authority, { agent: 'x', session: 's' }, 'a claim keeps it');
  store.dues.release(c.id, c.seq, c.when);
  t.same(store.dues.get('new')!.authority, { agent: 'x', session: 's' }, 'a released claim keeps it');
  const sub = { source: 'tick', harness: 'h', once: true, authority: { agent: 'x' }, createdAt: 4 };
  const id = store.subscriptions.add(sub);
  t.same(store.subscriptions.list('h'), [{ id, ...sub }], 'the migrated database keeps subscriptions');
  await pool.query('UPDATE berm_schema SET version = $1', [sql.SCHEMA_VERSION + 1]);
  await t.rejects(PgStore.open(url, { owner: 'old-berm' }), {
    name: 'SchemaVersionError',
    message: new RegExp(`newer than this berm's ${sql.SCHEMA_VERSION}.*Fix: `),
  });
});

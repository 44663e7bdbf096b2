// Upgrading a bermd whose protocol door kept its subscriptions in <root>/subscriptions.sqlite (a
// SQLite file of the door's own, before they moved into the runtime's store): the first boot
// imports them into state.sqlite with their ids and renames the file to
// subscriptions.sqlite.imported; a boot that finds the file again (a crash between the import and
// the rename) stores nothing twice; a file that is not a subscriptions database refuses the boot
// with a message naming it and the fix, and is left where it was.
import { copyFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import {
  AgentClient,
  decodeServer,
  encodeClient,
  parseEndpoint,
  type Envelope,
  type Plain,
} from '../src/protocol/index.js';
import { openSqlite } from '../src/store/sqlite-driver.js';
import { STATE_SCHEMA_VERSION } from '../src/store/sqlite-schema.js';
import { SqliteStore } from '../src/store/sqlite-store.js';
import { testDaemon, type TestDaemon } from './helpers/daemon.js';
import { until } from './helpers/wait.js';

const ROWS = [
  // id, source, harness, once, authority, created_at: as the door wrote them (ids 1, 2, 4 and 5 were removed)
  [3, 'agent:assistant:done', 'remind', 0, '{"agent":"A","session":"tg:1:main"}', 1_700_000_000_000],
  [6, 'tick', 'remind', 1, '{}', 1_700_000_000_500],
  [7, 'tock', 'other', 0, '{"sender":"cli"}', 1_700_000_001_000],
] as const;

/** Write `<root>/subscriptions.sqlite` as the door kept it before the store: its own table, WAL. */
function oldSubscriptionFile(root: string): void {
  const db = openSqlite(join(root, 'subscriptions.sqlite'));
  db.pragma('journal_mode = WAL');
  db.exec(`CREATE TABLE IF NOT EXISTS harness_subscriptions (
      id INTEGER PRIMARY KEY AUTOINCREMENT, source TEXT NOT NULL, harness TEXT NOT NULL,
      once INTEGER NOT NULL, authority TEXT NOT NULL, created_at INTEGER NOT NULL);
    CREATE INDEX IF NOT EXISTS harness_subscriptions_source ON harness_subscriptions(source);`);
  const put = db.prepare(
    'INSERT INTO harness_subscriptions (id, source, harness, once, authority, created_at) VALUES (?, ?, ?, ?, ?, ?)',
  );
  for (const r of ROWS) put.run(...r);
  db.close();
}

const boot = (root: string): Promise<TestDaemon> =>
  testDaemon({ protocolEndpoint: `unix:${join(root, 'protocol.sock')}` }, {}, root);

/** The daemon's subscriptions as its endpoint lists them: [id, source, target, once]. */
async function listed(root: string): Promise<[number, string, string, boolean][]> {
  const c = new AgentClient(parseEndpoint(`unix:${join(root, 'protocol.sock')}`));
  try {
    let answer: Envelope | undefined;
    await until('list_subscriptions answered by a ready daemon', async () => {
      answer = decodeServer(
        (await c.call(encodeClient('list_subscriptions', {}), { timeoutMs: 10_000 }))[0]!,
      );
      return (answer.error as Plain | undefined)?.code !== 503;
    });
    return (answer!.subscription_list as { subscriptions: Plain[] }).subscriptions.map((s) => [
      Number(s.id),
      s.source as string,
      s.target_agent as string,
      s.once === true,
    ]);
  } finally {
    c.close();
  }
}

const EXPECTED: [number, string, string, boolean][] = [
  [3, 'agent:assistant:done', 'harness:remind', false],
  [6, 'tick', 'harness:remind', true],
  [7, 'tock', 'harness:other', false],
];

t.test('an old subscriptions.sqlite is imported into the store once, then renamed aside', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'bermd-subs-import-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  oldSubscriptionFile(root);
  const file = join(root, 'subscriptions.sqlite');

  const first = await boot(root);
  t.same(await listed(root), EXPECTED, 'every subscription is there, with its id');
  t.notOk(existsSync(file), 'the old file is gone from its place');
  t.ok(existsSync(`${file}.imported`), 'renamed to subscriptions.sqlite.imported');
  t.ok(
    first.logs.some((l) =>
      /imported 3 protocol subscription\(s\) from .*subscriptions\.sqlite into the store; the file is now .*\.imported$/.test(
        l,
      ),
    ),
    'the boot log says so',
  );
  await first.stop();

  const store = SqliteStore.open(root);
  t.same(
    store.subscriptions.list().map((s) => [s.id, s.authority, s.createdAt]),
    ROWS.map((r) => [r[0], JSON.parse(r[4]), r[5]]),
    'state.sqlite holds them with their authority and creation time',
  );
  t.equal(
    store.subscriptions.add({ source: 's', harness: 'remind', once: false, authority: {}, createdAt: 1 }),
    8,
    'a new subscription gets an id after the imported ones',
  );
  store.close();
  const v = openSqlite(join(root, 'state.sqlite'));
  t.equal(
    (v.pragma('user_version') as { user_version: number }[])[0]!.user_version,
    STATE_SCHEMA_VERSION,
    'state.sqlite is at the current schema',
  );
  v.close();

  // a crash between the import and the rename leaves the file in place: imported again, nothing twice
  copyFileSync(`${file}.imported`, file);
  const again = await boot(root);
  t.same(
    await listed(root),
    [...EXPECTED, [8, 's', 'harness:remind', false]],
    'no subscription is stored twice',
  );
  t.ok(
    again.logs.some((l) => /imported 0 protocol subscription\(s\) .* \(3 already there\)/.test(l)),
    'the boot log says they were there already',
  );
  t.notOk(existsSync(file), 'renamed aside again');
  await again.stop();

  // nothing left to import: the next boot says nothing of it
  const third = await boot(root);
  t.same((await listed(root)).length, 4);
  t.notOk(
    third.logs.some((l) => /protocol subscription/.test(l)),
    'no import without the file',
  );
  await third.stop();
});

t.test(
  'a subscriptions.sqlite that is no subscriptions database refuses the boot, kept as it was',
  async (t) => {
    const root = mkdtempSync(join(tmpdir(), 'bermd-subs-import-'));
    t.teardown(() => rmSync(root, { recursive: true, force: true }));
    const file = join(root, 'subscriptions.sqlite');
    writeFileSync(file, "not a database, but somebody's notes\n");
    await t.rejects(boot(root), {
      message:
        /subscriptions\.sqlite: cannot read the protocol door's subscriptions from it .*fix: restore the file .* or move it aside/,
    });
    t.ok(existsSync(file), 'the file is left in place');
    t.notOk(existsSync(`${file}.imported`), 'not renamed');
  },
);

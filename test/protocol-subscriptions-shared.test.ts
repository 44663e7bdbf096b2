// The protocol door's subscriptions on a shared PostgreSQL store: two real bermd processes on one
// database (BERM_TEST_PG_URL), each with its protocol endpoint on a Unix socket. A subscription
// made through one daemon's endpoint is listed through the other's, an event published through
// the other is delivered there (a notify journaled by that daemon), and removed through the other
// it is gone for the first. Each daemon's root holds a subscriptions.sqlite as a berm before the
// store kept it: each is imported into the shared database once at boot, the second one's id,
// taken by the first one's, renumbered, and a subscription made afterwards gets an id after both.
import { existsSync, mkdtempSync } from 'node:fs';
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
import { TcpProxy, http, startBermd, stopBermd, viaPort, type Bermd } from './helpers/cluster.js';
import { TEST_CACHE } from './helpers/fixtures.js';
import { freshDatabase } from './helpers/pg.js';
import { QG, journal, until } from './helpers/scale-out.js';

/** Write `<root>/subscriptions.sqlite` as the door kept it before the store: its own table, WAL. */
function oldSubscriptionFile(root: string, id: number, source: string, agent: string): void {
  const db = openSqlite(join(root, 'subscriptions.sqlite'));
  db.pragma('journal_mode = WAL');
  db.exec(`CREATE TABLE IF NOT EXISTS harness_subscriptions (
      id INTEGER PRIMARY KEY AUTOINCREMENT, source TEXT NOT NULL, harness TEXT NOT NULL,
      once INTEGER NOT NULL, authority TEXT NOT NULL, created_at INTEGER NOT NULL);
    CREATE INDEX IF NOT EXISTS harness_subscriptions_source ON harness_subscriptions(source);`);
  db.prepare(
    'INSERT INTO harness_subscriptions (id, source, harness, once, authority, created_at) VALUES (?, ?, ?, ?, ?, ?)',
  ).run(id, source, 'qg', 0, JSON.stringify({ agent }), 1_700_000_000_000);
  db.close();
}

/** A client of `b`'s endpoint; `ask` retries while the daemon is restoring (503). */
function endpointOf(root: string) {
  const c = new AgentClient(parseEndpoint(`unix:${join(root, 'protocol.sock')}`));
  const once = async (member: string, body: unknown): Promise<Envelope> =>
    decodeServer((await c.call(encodeClient(member, body), { timeoutMs: 10_000 }))[0]!);
  const ask = async (member: string, body: unknown): Promise<Envelope> => {
    let last: Envelope | undefined;
    await until(`${member} answered by a ready daemon`, async () => {
      last = await once(member, body);
      return (last.error as Plain | undefined)?.code !== 503;
    });
    return last!;
  };
  const list = async (): Promise<[number, string, string][]> =>
    ((await ask('list_subscriptions', {})).subscription_list as { subscriptions: Plain[] }).subscriptions.map(
      (s) => [Number(s.id), s.source as string, s.target_agent as string],
    );
  return { ask, once, list, close: () => c.close() };
}

t.test("two bermd on one database share the protocol door's subscriptions", async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const roots = [0, 1].map(() => mkdtempSync(join(tmpdir(), 'bermd-subs-')));
  oldSubscriptionFile(roots[0]!, 1, 'old:a', 'A');
  oldSubscriptionFile(roots[1]!, 1, 'old:b', 'B');
  const nodes: Bermd[] = [];
  t.teardown(() => Promise.all(nodes.map((b) => stopBermd(b))));
  // one after the other: the first import keeps id 1, the second finds it taken
  for (const root of roots) {
    nodes.push(
      await startBermd({
        root,
        store: url,
        cacheDir: TEST_CACHE,
        extra: ['--protocol-endpoint', `unix:${join(root, 'protocol.sock')}`],
      }),
    );
  }
  const [a, b] = nodes as [Bermd, Bermd];
  for (const root of roots) {
    t.notOk(existsSync(join(root, 'subscriptions.sqlite')), 'the old file is renamed aside');
    t.ok(existsSync(join(root, 'subscriptions.sqlite.imported')), 'as subscriptions.sqlite.imported');
  }
  t.match(a.log(), /imported 1 protocol subscription\(s\) from .*subscriptions\.sqlite into the store/);
  t.match(b.log(), /ids taken by others renumbered: 1 -> 2/);

  t.equal((await http(`${a.url}/harnesses/qg`, 'PUT', QG)).status, 200);
  await until(
    'qg deployed on the second daemon',
    async () => (await http(`${b.url}/harnesses/qg`, 'GET')).status === 200,
  );
  const ea = endpointOf(roots[0]!);
  const eb = endpointOf(roots[1]!);
  t.teardown(() => {
    ea.close();
    eb.close();
  });

  const made = await ea.ask('subscribe_event', {
    source: 'agent:assistant:done',
    target_agent: 'harness:qg',
  });
  const id = Number((made.subscription_info as Plain).id);
  t.equal(id, 3, 'a new subscription gets an id after the imported ones');
  const all: [number, string, string][] = [
    [1, 'old:a', 'harness:qg'],
    [2, 'old:b', 'harness:qg'],
    [3, 'agent:assistant:done', 'harness:qg'],
  ];
  t.same(await eb.list(), all, 'the other daemon lists the one made through the first, and both imports');
  t.same(await ea.list(), all);

  t.equal((await eb.ask('publish_event', { source: 'agent:assistant:done', payload: 'from B' })).msg, 'pong');
  const notified = await (async () => {
    let recs: Record<string, unknown>[] = [];
    await until('the notify of qg journaled', async () => {
      recs = (await journal(url)).filter((r) => r.trigger === 'notify');
      return recs.length > 0;
    });
    return recs;
  })();
  t.equal(notified.length, 1, 'delivered once');
  t.match(notified[0], { harness: 'qg', entry: 'on_notify', outcome: 'ok' });
  t.match(notified[0]!.daemon, new RegExp(`:${b.proc.pid}:`), 'by the daemon the event was published to');

  t.equal((await eb.ask('unsubscribe_event', { id })).msg, 'pong', 'removed through the other daemon');
  t.same(await ea.list(), all.slice(0, 2), 'gone for the first');
  t.match(await ea.ask('unsubscribe_event', { id }), { error: { code: 404 } });
});

t.test('with the shared database away the endpoint answers 503, and nothing is lost', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const u = new URL(url);
  const proxy = new TcpProxy(u.hostname, Number(u.port));
  await proxy.listen();
  t.teardown(() => proxy.cut());
  const root = mkdtempSync(join(tmpdir(), 'bermd-subs-'));
  const b = await startBermd({
    root,
    store: viaPort(url, proxy.port),
    cacheDir: TEST_CACHE,
    extra: ['--protocol-endpoint', `unix:${join(root, 'protocol.sock')}`],
  });
  t.teardown(() => stopBermd(b));
  const e = endpointOf(root);
  t.teardown(() => e.close());
  const made = await e.ask('subscribe_event', { source: 'kept', target_agent: 'harness:qg' });
  const id = Number((made.subscription_info as Plain).id);

  await proxy.cut();
  for (const [member, body] of [
    ['subscribe_event', { source: 'lost?', target_agent: 'harness:qg' }],
    ['list_subscriptions', {}],
    ['unsubscribe_event', { id }],
    ['publish_event', { source: 'kept', payload: 'x' }],
  ] as const) {
    t.match(
      await e.once(member, body),
      { msg: 'error', error: { code: 503, message: /^the shared store is unreachable: / } },
      `${member}: 503, the store's fault, not the request's`,
    );
  }
  await proxy.restore();
  let back: [number, string, string][] = [];
  await until('the endpoint answers again', async () => {
    const r = await e.once('list_subscriptions', {});
    if (r.msg !== 'subscription_list') return false;
    back = (r.subscription_list as { subscriptions: Plain[] }).subscriptions.map((s) => [
      Number(s.id),
      s.source as string,
      s.target_agent as string,
    ]);
    return true;
  });
  t.same(back, [[id, 'kept', 'harness:qg']], 'the subscription made before is there, and only it');
});

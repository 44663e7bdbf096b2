// The per-harness limit of the protocol door's subscriptions on a shared PostgreSQL store
// (BERM_TEST_PG_URL): many adds for one harness at once, on ten connections, as the doors of
// several daemons would make them, store exactly the limit and refuse the rest with the count the
// harness holds; another harness's add does not wait for them.
import t from 'tap';
import { PgStore } from '../src/store/pg-store.js';
import { runSubscriptions } from '../src/store/pg-subscriptions.js';
import { shutdownBridge } from '../src/sync/bridge.js';
import { freshDatabase, testPool } from './helpers/pg.js';

t.teardown(() => shutdownBridge());

const spec = (harness: string, i: number) => ({
  source: `tick:${i}`,
  harness,
  once: false,
  authority: { agent: `a${i}` },
  createdAt: 1_700_000_000_000 + i,
});

t.test('adds racing for one harness never pass its limit', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  // opening the store creates the schema
  const store = await PgStore.open(url, { owner: 'subs-limit' });
  t.teardown(() => store.close());
  const pool = testPool(t, url, 10);
  const LIMIT = 5;
  const results = await Promise.all(
    Array.from({ length: 24 }, (_, i) => runSubscriptions(pool, 'add', [spec('h', i), LIMIT])),
  );
  const ids = results.filter((r): r is number => typeof r === 'number');
  const refused = results.filter((r) => typeof r !== 'number');
  t.equal(ids.length, LIMIT, 'exactly the limit was stored');
  t.equal(new Set(ids).size, LIMIT, 'each under its own id');
  t.same(
    refused,
    Array.from({ length: 24 - LIMIT }, () => ({ held: LIMIT })),
    'every other add was refused, naming the count held',
  );
  const n = await pool.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM berm_subscriptions WHERE harness = 'h'",
  );
  t.equal(n.rows[0]!.n, LIMIT, 'the table holds the limit');

  // the store's own (synchronous) method: full for h, open for another harness
  t.same(store.subscriptions.add(spec('h', 99), LIMIT), { held: LIMIT });
  const other = store.subscriptions.add(spec('other', 0), LIMIT);
  t.type(other, 'number', 'another harness adds');
  t.same(
    store.subscriptions.list('other').map((s) => s.id),
    [other],
  );
});

// A listing of pending wakes reads a bounded number of payload bytes whatever the due-set holds
// (DueStore.list's maxBytes, LIST_WAKES_MAX_BYTES = 4 MiB): in SQLite, in PostgreSQL, and on the
// protocol door's page (listPage), which reports the wakes it left out.
import t, { type Test } from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { shutdownBridge } from '../src/sync/bridge.js';
import { PgStore } from '../src/store/pg-store.js';
import { listPage } from '../src/protocol/attach.js';
import { SqliteStore } from '../src/store/sqlite-store.js';
import { LIST_WAKES_MAX_BYTES, type DueStore, type WakeSpec } from '../src/store/store.js';
import { freshDatabase } from './helpers/pg.js';

t.teardown(() => shutdownBridge());
const tmp = mkdtempSync(join(tmpdir(), 'berm-wake-list-'));
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));

// 60,000 UTF-8 bytes in 30,000 characters: a budget counted in characters would list twice as many
const PAYLOAD = 'é'.repeat(30_000);
const spec = (i: number, harness = 'h'): WakeSpec => ({
  id: `w${String(i).padStart(3, '0')}`,
  kind: 'wake',
  harness,
  entry: 'on_wake',
  when: 1_000_000 + i,
  payload: PAYLOAD,
  armedBy: 'api',
  chain: null,
  depth: 0,
  armedAt: 1,
});
const ids = (n: number, from = 0): string[] =>
  Array.from({ length: n }, (_, i) => `w${String(from + i).padStart(3, '0')}`);

// 4,194,304 / 60,000: the 70th wake is the first to bring the listed payloads to 4 MiB
const AT_BUDGET = Math.ceil(LIST_WAKES_MAX_BYTES / 60_000);

async function checkStore(t: Test, dues: DueStore): Promise<void> {
  dues.armMany(Array.from({ length: 100 }, (_, i) => spec(i)));
  dues.armMany([spec(200, 'other')]);
  t.equal(AT_BUDGET, 70);
  t.same(
    dues.list({ maxBytes: LIST_WAKES_MAX_BYTES }).map((w) => w.id),
    ids(AT_BUDGET),
    'the earliest wakes, up to the one that reaches the budget',
  );
  t.same(
    dues.list({ harness: 'h', maxBytes: 120_000 }).map((w) => w.id),
    ids(2),
    'exactly at the budget',
  );
  t.same(
    dues.list({ harness: 'h', maxBytes: 120_001 }).map((w) => w.id),
    ids(3),
    'one byte past it',
  );
  t.same(
    dues.list({ limit: 5, maxBytes: LIST_WAKES_MAX_BYTES }).map((w) => w.id),
    ids(5),
    'the limit first',
  );
  t.same(
    dues.list({ harness: 'other', maxBytes: 1 }).map((w) => w.id),
    ['w200'],
    'one wake at least',
  );
  t.equal(dues.list({ harness: 'h' }).length, 100, 'no budget: all of them');
  t.equal(dues.list({ harness: 'h' })[0]!.payload, PAYLOAD, 'payloads whole');

  const page = listPage(dues, 'h');
  // 69 payloads are 4,140,000 bytes; a 70th would be 4,200,000, past 4 MiB
  t.same(
    page.wakes.map((w) => w.id),
    ids(AT_BUDGET - 1),
    'a door page: the wakes within the budget',
  );
  t.equal(page.truncated, true, 'and says some were left out');
  for (let i = 0; i < 40; i++) dues.cancel(ids(1, i)[0]!);
  const rest = listPage(dues, 'h');
  t.same(
    rest.wakes.map((w) => w.id),
    ids(60, 40),
    'all 60 left fit a page',
  );
  t.equal(rest.truncated, false);
}

t.test('SQLite: list stops at the payload budget', async (t) => {
  const store = SqliteStore.open(join(tmp, 'sqlite'));
  t.teardown(() => store.close());
  await checkStore(t, store.dues);
});

t.test('PostgreSQL: list stops at the payload budget', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const store = await PgStore.open(url, { owner: 'd0' });
  t.teardown(() => store.close());
  await checkStore(t, store.dues);
});

t.test('a door page of many small wakes stops at the count limit and says so', async (t) => {
  const store = SqliteStore.open(join(tmp, 'count'));
  t.teardown(() => store.close());
  store.dues.armMany(Array.from({ length: 1001 }, (_, i) => ({ ...spec(i), id: `c${i}`, payload: 'p' })));
  const page = listPage(store.dues);
  t.equal(page.wakes.length, 1000);
  t.equal(page.truncated, true, '1,001 pending, 1,000 listed');
  store.dues.cancel('c1000');
  t.equal(listPage(store.dues).truncated, false, 'exactly 1,000 pending: the page is whole');
});

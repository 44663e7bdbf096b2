// The due-set held as a window (src/runtime/wake-scheduler.ts): a start reads one window of the
// store's (when, seq) index (RuntimeOptions.dueWindow entries; DUE_WINDOW by default), not every
// pending wake, and reads further as the horizon comes due. Across those reads, arms and re-arms
// on both sides of the horizon, cancels, a rescan and a restart, every pending wake fires exactly
// once, in due order ((when, seq) ascending). On PostgreSQL two daemons, each with its own window
// of the shared due-set, run every wake once.
//
// Most SQLite wakes are of a harness that is not deployed: each fires as one journaled error
// record and nothing runs. The window here is 400 entries (the default's 16,384 would make the
// same test arm and fire 41,000 wakes). Two wakes of a deployed harness (the queue test guest)
// are armed through the runtime, one before the horizon and one past it.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t from 'tap';
import { BermRuntime, readJournal, SqliteStore, type JournalRecord } from '../src/runtime/index.js';
import { PgStore } from '../src/store/pg-store.js';
import * as pgSql from '../src/store/pg-sql.js';
import type { DueStore, WakeSpec } from '../src/store/store.js';
import { shutdownBridge } from '../src/sync/bridge.js';
import { ROOT, TEST_CACHE } from './helpers/fixtures.js';
import { freshDatabase, testPool } from './helpers/pg.js';
import { attachedRuntimes } from './helpers/runtimes.js';
import { until } from './helpers/wait.js';

const W = 400;
const QG = new Uint8Array(fs.readFileSync(path.join(ROOT, 'test/data/queue-guest.elf')));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-reload-window-'));
t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));
t.teardown(() => shutdownBridge());

type Reads = [readonly [number, number] | null, number][];

/** Record the window reads of `dues`: [after, rows returned] each. */
function spy(dues: DueStore): Reads {
  const reads: Reads = [];
  const read = dues.window.bind(dues);
  dues.window = (after, limit) => {
    const r = read(after, limit);
    reads.push([after, r.seq.length]);
    return r;
  };
  return reads;
}

/** A SQLite store whose window reads are recorded. */
function spied(state: string): { store: SqliteStore; reads: Reads } {
  const store = SqliteStore.open(state);
  return { store, reads: spy(store.dues) };
}

const wake = (id: string, when: number): WakeSpec => ({
  id,
  kind: 'wake',
  harness: 'ghost',
  entry: 'on_wake',
  when,
  payload: '',
  armedBy: 'api',
  chain: null,
  depth: 0,
  armedAt: Date.now(),
});

t.test('a due-set of 2.5 windows fires once each, in due order, across a restart', async (t) => {
  const state = path.join(tmp, 's');
  const N = Math.ceil(2.5 * W);
  const SPAN = 4000; // ms the ghost wakes are spread over: ~10 per ms, so many share an instant
  // id -> (due instant, arming order): the expected order is (when, order), as (when, seq)
  const expected = new Map<string, { when: number; ord: number }>();
  let ord = 0;
  {
    const store = SqliteStore.open(state);
    const base = Date.now() + 3000;
    for (let i = 0; i < N; i += 5000) {
      const batch: WakeSpec[] = [];
      for (let k = i; k < Math.min(N, i + 5000); k++) {
        // a permutation of 0..N-1 (7919 is prime to N): seq order is not due order
        const when = base + Math.floor((((k * 7919) % N) * SPAN) / N);
        batch.push(wake(`g${k}`, when));
        expected.set(`g${k}`, { when, ord: ord++ });
      }
      store.dues.armMany(batch);
    }
    store.close();
  }
  const due = [...expected].sort((a, b) => a[1].when - b[1].when || a[1].ord - b[1].ord);
  const first = due[0]![1].when;
  const last = due.at(-1)![1].when;

  const fired: JournalRecord[] = [];
  const collect = (rt: BermRuntime) =>
    rt.on('invocation', (r: JournalRecord) => {
      if (r.trigger === 'wake') fired.push(r);
    });

  // the first process: a start reads one window, not the due-set
  const one = spied(state);
  const rt1 = await BermRuntime.create({ store: one.store, poolSize: 1, cacheDir: TEST_CACHE, dueWindow: W });
  t.same(one.reads, [[null, W]], 'the start read one window of the (when, seq) index');
  t.equal(rt1.stats().wakesPending, N, 'every pending wake is counted');
  const horizon = due[W - 1]![1].when;
  t.ok(horizon < last, 'the window ends before the last wake');
  await rt1.deploy('qg', QG, { capabilities: ['schedule'] });

  // cancels on both sides of the horizon
  for (const [id] of [due[3]!, due[W + 7]!]) {
    t.ok(rt1.cancel(id), `cancelled ${id}`);
    expected.delete(id);
  }
  // re-arms by another process (rescanned): one from the window to past the horizon, one from past
  // it into the window
  {
    const other = SqliteStore.open(state);
    for (const [[id], when] of [
      [due[5]!, last - 1],
      [due[W + 11]!, first + 1],
    ] as const) {
      other.dues.arm(wake(id, when));
      expected.set(id, { when, ord: ord++ });
    }
    other.close();
  }
  t.equal(rt1.rescan(), 2, 'the rescan takes both re-arms in');
  // arms through this runtime: one before the horizon, one past it
  rt1.arm({ harness: 'qg', at: first + 2, id: 'q-early' });
  rt1.arm({ harness: 'qg', at: last - 2, id: 'q-late' });
  t.equal(rt1.stats().wakesPending, N - 2 + 2, 'cancels and arms counted, re-arms not');

  collect(rt1);
  rt1.start();
  const ghosts = () => fired.filter((r) => r.harness === 'ghost').length;
  await until(
    'a third of the due-set and q-early to fire',
    () => Promise.resolve(ghosts() >= N / 3 && fired.some((r) => r.wake === 'q-early')),
    120_000,
    20,
  );
  await rt1.close();
  const firstRun = fired.length;
  t.ok(firstRun < N, `the first process fired ${firstRun}, not all`);

  // the second process: loads what is left, reads further windows as they come due
  const two = spied(state);
  const rt2 = await BermRuntime.create({ store: two.store, poolSize: 1, cacheDir: TEST_CACHE, dueWindow: W });
  t.equal(rt2.stats().wakesPending, N - firstRun, 'the rest is pending');
  await rt2.deploy('qg', QG, { capabilities: ['schedule'] });
  collect(rt2);
  rt2.start();
  await until(
    'the rest of the due-set to fire',
    () => Promise.resolve(rt2.stats().wakesPending === 0),
    120_000,
    50,
  );
  await until('q-late to end', () => Promise.resolve(fired.some((r) => r.wake === 'q-late')), 60_000, 20);
  await rt2.close();
  t.ok(
    one.reads.length + two.reads.length >= 4,
    `the windows were read again as they came due (${one.reads.length} + ${two.reads.length} reads)`,
  );

  const ghostFired = fired.filter((r) => r.harness === 'ghost');
  const want = [...expected].sort((a, b) => a[1].when - b[1].when || a[1].ord - b[1].ord).map(([id]) => id);
  t.equal(ghostFired.length, want.length, 'as many fired as were pending');
  t.same(
    ghostFired.map((r) => r.wake),
    want,
    'each fired once, in (when, seq) order, across both processes',
  );
  t.ok(
    ghostFired.every((r) => r.scheduledAt === expected.get(r.wake!)!.when && r.attempt === 1),
    'each at its own (re-armed) instant, on its first attempt',
  );
  t.match(ghostFired[0], { outcome: 'error', detail: /no harness named ghost/ });
  const qg = fired.filter((r) => r.harness === 'qg');
  t.same(
    qg.map((r) => [r.wake, r.scheduledAt, r.outcome]),
    [
      ['q-early', first + 2, 'ok'],
      ['q-late', last - 2, 'ok'],
    ],
    'the wakes armed before and past the horizon ran once each',
  );
  // the journal on disk says the same
  const journaled = readJournal(path.join(state, 'journal.jsonl')).filter((r) => r.trigger === 'wake');
  t.equal(journaled.length, want.length + 2, 'one journal record per wake');
  t.equal(new Set(journaled.map((r) => r.wake)).size, want.length + 2, 'no wake journaled twice');
});

t.test('PostgreSQL: two daemons with windows of a shared due-set run each wake once', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const N = Math.ceil(2.5 * W);
  const base = Date.now() + 2000;
  const stores: PgStore[] = [];
  const reads: Reads[] = [];
  for (const owner of ['A', 'B']) {
    const store = await PgStore.open(url, { owner, leaseMs: 1000 });
    stores.push(store);
    reads.push(spy(store.dues));
  }
  const ids = new Set<string>();
  const batch: WakeSpec[] = [];
  for (let k = 0; k < N; k++) {
    const id = `p${k}`;
    batch.push({ ...wake(id, base + Math.floor((((k * 7919) % N) * 3000) / N)), harness: 'qg' });
    ids.add(id);
  }
  stores[0]!.dues.armMany(batch);
  const rts = await attachedRuntimes(t, stores, { poolSize: 1, cacheDir: TEST_CACHE, dueWindow: W });
  const pool = testPool(t, url);
  t.same(
    reads.map((r) => r.slice()),
    [[[null, W]], [[null, W]]],
    'each daemon read one window at its start',
  );
  for (const rt of rts) await rt.deploy('qg', QG, { capabilities: [] }, { persist: false });
  // armed on A while both run, before and past B's horizon: B takes them from the notification
  // (before its horizon) or from a later window (past it)
  for (const [id, at] of [
    ['x-early', base + 10],
    ['x-late', base + 2990],
  ] as const) {
    rts[0]!.arm({ harness: 'qg', at, id });
    ids.add(id);
  }
  for (const rt of rts) rt.start();
  const wakes = async () => (await pgSql.readJournal(pool)).filter((r) => r.trigger === 'wake');
  await until('every wake journaled', async () => (await wakes()).length >= ids.size, 120_000);
  const w = await wakes();
  t.equal(w.length, ids.size, 'no wake ran twice');
  t.same(w.map((r) => r.wake).sort(), [...ids].sort(), 'every wake ran');
  t.ok(
    w.every((r) => r.outcome === 'ok' && r.attempt === 1),
    'first attempts, all ok',
  );
  t.ok(
    reads.every((r) => r.length >= 3),
    `both read further windows (${reads.map((r) => r.length).join(', ')} reads)`,
  );
});

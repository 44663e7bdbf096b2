// The dead-letter set on the SQLite store: a wake whose worker is lost on every delivery (a real
// worker exit after the guest ran, test/helpers/exit-after-run.ts) lands in the set after
// wakeAttempts deliveries, with its reason, attempts, last error, times and payload; retried it
// runs again from attempt 1 and leaves the set; dropped it is gone and journaled; the set survives
// a reopen; a claim already past its attempts (its process died during each delivery) is not run
// again but dead-lettered; a recurring schedule waits for a retry in its backoff.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t, { type Test } from 'tap';
import { BermRuntime, SqliteStore, readJournal, type JournalRecord } from '../src/runtime/index.js';
import { ROOT, TEST_CACHE } from './helpers/fixtures.js';

const QG = new Uint8Array(fs.readFileSync(path.join(ROOT, 'test/data/queue-guest.elf')));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-dead-letter-'));
t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));
let n = 0;

/** A runtime on `state` whose workers die after the first `exits` runs of harness `late`. */
async function runtime(
  t: Test,
  exits: number,
  state = path.join(tmp, `s${n++}`),
  retryMs = 200,
  poolSize = 1,
): Promise<{ rt: BermRuntime; records: JournalRecord[]; state: string }> {
  const dir = fs.mkdtempSync(path.join(tmp, 'exits-'));
  process.env.BERM_TEST_LATE_DIR = dir;
  process.env.BERM_TEST_LATE_EXITS = String(exits);
  const rt = await BermRuntime.create({
    state,
    poolSize,
    cacheDir: TEST_CACHE,
    limits: { wakeAttempts: 3, wakeRetryMs: retryMs },
    workerModules: [new URL('./helpers/exit-after-run.ts', import.meta.url)],
  });
  t.teardown(() => rt.close());
  await rt.deploy('late', QG, { capabilities: ['schedule'] });
  const records: JournalRecord[] = [];
  rt.on('invocation', (r: JournalRecord) => records.push(r));
  rt.start();
  return { rt, records, state };
}

async function until<T>(what: string, f: () => T | undefined): Promise<T> {
  for (let i = 0; i < 1200; i++) {
    const v = f();
    if (v !== undefined) return v;
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error(`${what}: not within 120 s`);
}

t.test('lost on every delivery: in the set after 3, retried runs, dropped is gone', async (t) => {
  const { rt, records, state } = await runtime(t, 3);
  const armedAt = Date.now();
  rt.arm({ harness: 'late', id: 'doomed', payload: 'hello' });
  const dead = await until('dead record', () => records.find((r) => r.trigger === 'dead'));
  // the last delivery's run is journaled first, then the move
  const runs = records.filter((r) => r.wake === 'doomed' && r.trigger === 'wake');
  t.equal(runs.length, 1, 'the lost deliveries before the last left no record');
  t.match(runs[0], { outcome: 'error', attempt: 3 });
  t.match(runs[0]!.detail, /exited with code 7/);
  t.ok(records.indexOf(runs[0]!) < records.indexOf(dead), 'the run before the move');
  t.match(dead, { wake: 'doomed', harness: 'late', attempt: 3, outcome: 'error' });
  t.match(dead.detail, /^worker-lost after 3 deliveries: .*exited with code 7/);
  // the backoff: 200 ms then 400 ms between the three deliveries
  t.ok(dead.start - armedAt >= 600, `three deliveries took the backoff (${dead.start - armedAt} ms)`);

  const list = rt.deadList();
  t.equal(list.length, 1);
  const e = list[0]!;
  t.match(e, { reason: 'worker-lost', attempts: 3 });
  t.match(e.lastError, /exited with code 7/);
  t.match(e.wake, {
    id: 'doomed',
    harness: 'late',
    kind: 'wake',
    payload: 'hello',
    armedBy: 'api',
    attempt: 3,
  });
  t.ok(e.deadAt >= e.wake.armedAt && e.wake.when >= armedAt - 1, 'times kept');
  t.same(rt.deadCounts(), { late: 1 });
  t.equal(rt.stats().deadLettered, 1);
  t.equal(rt.stats().wakesPending, 0, 'not pending');
  t.equal(rt.stats().wakesClaimed, 0, 'not claimed');

  // a retry with a pending wake of the same id is refused and changes nothing
  rt.arm({ harness: 'late', id: 'doomed', delayMs: 60_000, payload: 'other' });
  t.same(rt.retryDead('doomed'), { status: 'conflict' });
  t.equal(rt.deadList().length, 1);
  t.ok(rt.cancel('doomed'));
  t.same(rt.retryDead('nope'), { status: 'missing' });

  // retried: leaves the set, runs (the workers no longer die) from attempt 1
  const before = records.length;
  const r = rt.retryDead('doomed');
  t.equal(r.status, 'armed');
  t.same(rt.deadList(), [], 'left the set');
  const ran = await until('retried run', () =>
    records.slice(before).find((x) => x.wake === 'doomed' && x.trigger === 'wake'),
  );
  t.match(ran, { outcome: 'ok', attempt: 1 });
  t.same(rt.deadCounts(), {});

  // dropped: gone, journaled
  await rt.close();
  const again = await runtime(t, 3, state);
  again.rt.arm({ harness: 'late', id: 'doomed2', payload: 'x' });
  await until('second dead', () => again.records.find((x) => x.trigger === 'dead'));
  t.same(
    again.rt.deadList().map((d) => d.wake.id),
    ['doomed2'],
  );
  const dropped = again.rt.dropDead('doomed2');
  t.match(dropped, { reason: 'worker-lost', attempts: 3 });
  t.equal(again.rt.dropDead('doomed2'), null, 'a second drop finds nothing');
  t.same(again.rt.deadList(), []);
  await again.rt.close();
  const journal = readJournal(path.join(state, 'journal.jsonl'));
  const drop = journal.find((x) => x.trigger === 'drop');
  t.match(drop, { wake: 'doomed2', harness: 'late', attempt: 3 }, 'the drop is journaled');
  t.equal(journal.filter((x) => x.trigger === 'dead').length, 2, 'both moves journaled');
});

t.test('the set survives a reopen of the state', async (t) => {
  const { rt, records, state } = await runtime(t, 3);
  rt.arm({ harness: 'late', id: 'kept', payload: 'p' });
  await until('dead', () => records.find((r) => r.trigger === 'dead'));
  await rt.close();
  const store = SqliteStore.open(state);
  t.teardown(() => store.close());
  const list = store.dues.deadList();
  t.equal(list.length, 1);
  t.match(list[0], { reason: 'worker-lost', attempts: 3, wake: { id: 'kept', payload: 'p' } });
  t.same(store.dues.deadCounts(), { late: 1 });
  t.same(store.dues.claimed(), [], 'no claim left behind');
  t.equal(store.dues.count(), 0);
});

t.test('a claim past its attempts (its process died each time) is dead-lettered, not run', async (t) => {
  const state = path.join(tmp, `s${n++}`);
  const store = SqliteStore.open(state);
  const { record } = store.dues.arm({
    id: 'killed',
    kind: 'wake',
    harness: 'late',
    entry: 'on_wake',
    when: Date.now(),
    payload: 'boom',
    armedBy: 'cli',
    chain: null,
    depth: 0,
    armedAt: Date.now(),
  });
  // three deliveries claimed, none ended: what three kills during the run leave behind
  store.dues.claim(record.seq);
  store.dues.reclaim('killed', record.seq);
  t.match(store.dues.reclaim('killed', record.seq), { attempt: 3 });
  store.close();
  const { rt, records } = await runtime(t, 0, state);
  const dead = await until('dead', () => records.find((r) => r.trigger === 'dead'));
  t.match(dead, { wake: 'killed', attempt: 3 });
  t.match(dead.detail, /^interrupted after 3 deliveries/);
  t.equal(records.filter((r) => r.trigger === 'wake').length, 0, 'not run a fourth time');
  t.match(rt.deadList(), [{ reason: 'interrupted', attempts: 3, wake: { id: 'killed', payload: 'boom' } }]);
});

t.test("a guest's own failure is not dead-lettered", async (t) => {
  const { rt, records } = await runtime(t, 0);
  rt.arm({ harness: 'late', id: 'fails', payload: 'fail' });
  await until('failed', () => records.find((r) => r.wake === 'fails'));
  await new Promise((res) => setTimeout(res, 500));
  t.match(
    records.filter((r) => r.wake === 'fails'),
    [{ outcome: 'failed', attempt: 1 }],
  );
  t.same(rt.deadList(), []);
});

t.test('a recurring schedule waits for the retry of its lost occurrence', async (t) => {
  // occurrence 1 re-arms (100 ms on) and then its worker is lost: the retry waits 600 ms, and
  // the next occurrence, due after 100 ms, waits behind it although a second worker is idle
  const { rt, records } = await runtime(t, 1, undefined, 600, 2);
  rt.arm({ harness: 'late', id: 'every', payload: 'tick:100' });
  const retry = await until('retry', () => records.find((r) => r.wake === 'every' && r.attempt === 2));
  const first = records.find((r) => r.wake === 'every')!;
  t.equal(first, retry, 'the first record of the schedule is the retry of occurrence 1');
  await until('a later occurrence', () =>
    records.find((r) => r.wake === 'every' && r.scheduledAt! > retry.scheduledAt!),
  );
  await new Promise((res) => setTimeout(res, 500));
  const later = records.filter((r) => r.wake === 'every' && r.scheduledAt! > retry.scheduledAt!);
  // the occurrence that fell due during the backoff either ran after the retry (deferred) or was
  // replaced by the retry's own re-arm (it had not been claimed yet): never before the retry
  for (const r of later)
    t.ok(
      r.start >= retry.start + retry.ms,
      `occurrence due ${r.scheduledAt! - retry.scheduledAt!} ms after the first started ${r.start - retry.start} ms after the retry`,
    );
  rt.cancel('every');
});

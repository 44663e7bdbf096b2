// The harnessPendingWakes limit: a harness (the real queue guest, through berm.wake.arm and
// berm.call.after) cannot keep more than that many wakes it armed pending, so one harness cannot
// fill the due-set; its arm fails with a message naming the limit. Re-arming its own ids, other
// harnesses, and wakes the operator arms are not affected, and a wake that fires or is cancelled
// frees its place.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t, { type Test } from 'tap';
import { shutdownBridge } from '../src/sync/bridge.js';
import { PgStore } from '../src/store/pg-store.js';
import { BermRuntime, SqliteStore, type Outcome } from '../src/runtime/index.js';
import { ROOT, TEST_CACHE } from './helpers/fixtures.js';
import { testDaemon } from './helpers/daemon.js';
import { freshDatabase } from './helpers/pg.js';
import { attachedRuntimes } from './helpers/runtimes.js';

const QG = new Uint8Array(fs.readFileSync(path.join(ROOT, 'test/data/queue-guest.elf')));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-wake-quota-'));
t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));
t.teardown(() => shutdownBridge());

function text(o: Outcome): string {
  if (o.status === 'ok') return o.result;
  throw new Error(`expected ok, got ${JSON.stringify(o)}`);
}

const QUOTA_REFUSAL =
  /^refused: berm\.(wake\.arm|call\.after): refused by limit harnessPendingWakes = 3: harness greedy has 3 wakes pending that it armed/;

async function scenario(t: Test, rt: BermRuntime): Promise<void> {
  await rt.deploy('greedy', QG, { capabilities: ['schedule', 'call'], grant: { callees: ['other'] } });
  await rt.deploy('other', QG, { capabilities: ['schedule'] });
  rt.start();
  const arm = (h: string, id: string, delay = '600000') =>
    rt.invoke(h, 'arm', JSON.stringify({ delay, payload: 'p', id })).then(text);

  for (const id of ['a', 'b', 'c']) t.equal(await arm('greedy', id), `ok: ${id}`);
  t.match(await arm('greedy', 'd'), QUOTA_REFUSAL, 'the fourth is refused');
  t.match(
    text(
      await rt.invoke(
        'greedy',
        'after',
        JSON.stringify({ delay: '600000', harness: 'other', tool: 'echo', args: '{}' }),
      ),
    ),
    QUOTA_REFUSAL,
    'so is a berm.call.after',
  );
  t.equal(await arm('greedy', 'b', '500000'), 'ok: b', 'a re-arm of its own id replaces, at the limit too');
  t.equal(await arm('other', 'x'), 'ok: x', 'another harness arms');
  t.equal(rt.arm({ harness: 'greedy', id: 'ops', delayMs: 600_000 }).id, 'ops', 'the operator arms for it');
  t.same(
    rt
      .list({ harness: 'greedy' })
      .map((w) => w.id)
      .sort(),
    ['a', 'b', 'c', 'ops'],
  );

  // a cancelled wake frees its place at once
  t.equal(text(await rt.invoke('greedy', 'cancel', '{"id":"a"}')), 'ok: 1');
  t.equal(await arm('greedy', 'd'), 'ok: d');
  t.match(await arm('greedy', 'e'), QUOTA_REFUSAL);

  // so does one that fired (its on_wake ran): due at once, then the arm goes through
  t.equal(text(await rt.invoke('greedy', 'cancel', '{"id":"d"}')), 'ok: 1');
  t.equal(await arm('greedy', 'soon', '0'), 'ok: soon');
  for (let i = 0; i < 200 && rt.list({ harness: 'greedy' }).some((w) => w.id === 'soon'); i++)
    await new Promise((r) => setTimeout(r, 25));
  t.notOk(
    rt.list({ harness: 'greedy' }).some((w) => w.id === 'soon'),
    'the wake due at once fired',
  );
  t.equal(await arm('greedy', 'f'), 'ok: f');
  t.match(await arm('greedy', 'g'), QUOTA_REFUSAL);
}

const LIMITS = { harnessPendingWakes: 3, timeoutMs: 10_000 };

t.test('a harness keeps at most harnessPendingWakes wakes it armed pending (SQLite)', async (t) => {
  const rt = await BermRuntime.create({
    state: path.join(tmp, 'rt'),
    poolSize: 1,
    cacheDir: TEST_CACHE,
    limits: LIMITS,
  });
  t.teardown(() => rt.close());
  await scenario(t, rt);
});

t.test('the same on the PostgreSQL store', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const store = await PgStore.open(url, { owner: 'A', leaseMs: 1000 });
  const [rt] = await attachedRuntimes(t, [store], { poolSize: 1, cacheDir: TEST_CACHE, limits: LIMITS });
  await scenario(t, rt!);
});

t.test('a refused arm does not count the store: a guest at its limit cannot tie up the queue', async (t) => {
  // every refused arm counted up to harnessPendingWakes index entries (~1.3 ms at 10,000, against
  // ~2 µs for a get) on the queue's thread; a guest spinning on berm.wake.arm at its limit made
  // each of its calls cost that in front of every other harness's work
  const store = SqliteStore.open(path.join(tmp, 'counted'));
  let counts = 0;
  const countArmedBy = store.dues.countArmedBy.bind(store.dues);
  store.dues.countArmedBy = (by: string, upTo: number): number => {
    counts++;
    return countArmedBy(by, upTo);
  };
  const rt = await BermRuntime.create({ store, poolSize: 1, cacheDir: TEST_CACHE, limits: LIMITS });
  t.teardown(() => rt.close());
  await rt.deploy('greedy', QG, { capabilities: ['schedule'] });
  const arm = (id: string) =>
    rt.arm({ harness: 'greedy', id, delayMs: 600_000, armedBy: 'greedy', guest: true });
  for (const id of ['a', 'b', 'c']) arm(id);
  const before = counts;
  const t0 = Date.now();
  let refused = 0;
  for (let i = 0; i < 200; i++) {
    try {
      arm(`x${i}`);
    } catch (e) {
      if (/harnessPendingWakes = 3/.test((e as Error).message)) refused++;
    }
  }
  const took = Date.now() - t0;
  t.equal(refused, 200, 'all refused');
  // the kept count is at most a second old: one recount per second elapsed at most
  t.ok(
    counts - before <= 1 + Math.floor(took / 1000),
    `${counts - before} counts for 200 refusals in ${took} ms`,
  );
  // its own cancel frees a place at once (counted again, once)
  t.ok(rt.cancel('a', 'greedy'));
  t.equal(arm('d').id, 'd');
  t.throws(() => arm('e'), /harnessPendingWakes = 3/);
});

t.test('bermd: the limit is a setting, its default in the boot log', async (t) => {
  const d = await testDaemon({ limit: ['harnessPendingWakes=7'] });
  t.teardown(() => d.stop());
  t.ok(
    d.logs.some((l) => /harnessPendingWakes +7 +\(flag --limit\)/.test(l)),
    d.logs.join('\n'),
  );
  const d2 = await testDaemon();
  t.teardown(() => d2.stop());
  t.ok(d2.logs.some((l) => /harnessPendingWakes +10000 +\(default\)/.test(l)));
});

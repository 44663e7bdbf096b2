// What a due wake costs the store while its harness is at its concurrency limit: a lone harness
// holds its share of the pool (one fewer than the pool, docs/runtime-queue.md), wakes fall due
// meanwhile, and each is claimed once, when it starts: none is claimed and released again to wait
// (two transactions on the queue's thread for nothing, in front of the runs that would free room).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t from 'tap';
import { BermRuntime, SqliteStore, type JournalRecord } from '../src/runtime/index.js';
import { ROOT, TEST_CACHE } from './helpers/fixtures.js';
import { until } from './helpers/wait.js';

const QG = new Uint8Array(fs.readFileSync(path.join(ROOT, 'test/data/queue-guest.elf')));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-wake-claims-'));
t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));

t.test('wakes due while their lone harness is at its concurrency are claimed once each', async (t) => {
  const store = SqliteStore.open(tmp);
  const counts = { claim: 0, release: 0 };
  const claim = store.dues.claim.bind(store.dues);
  const release = store.dues.release.bind(store.dues);
  store.dues.claim = (seq) => {
    counts.claim++;
    return claim(seq);
  };
  store.dues.release = (id, seq, when) => {
    counts.release++;
    release(id, seq, when);
  };
  // two workers: the harness may run one invocation at a time
  const rt = await BermRuntime.create({
    store,
    poolSize: 2,
    cacheDir: TEST_CACHE,
    limits: { timeoutMs: 3000 },
  });
  t.teardown(() => rt.close());
  t.equal(rt.limits.harnessConcurrency, 1);
  await rt.deploy('qg', QG, { capabilities: ['schedule'] });
  rt.start();
  t.equal((await rt.invoke('qg', 'echo', '{}')).status, 'ok'); // a worker is up
  const recs: JournalRecord[] = [];
  rt.on('invocation', (r: JournalRecord) => {
    if (r.trigger === 'wake') recs.push(r);
  });
  // the harness's one slot, held until the call's deadline (3 s)
  const spinning = rt.invoke('qg', 'spin', '{}');
  const wakes = 20;
  for (let i = 0; i < wakes; i++) rt.arm({ harness: 'qg', id: `w${i}`, payload: `w${i}` });
  t.match(await spinning, { status: 'trapped', trap: { name: 'Interrupted' } });
  const alive = setInterval(() => {}, 100); // the wake timer is unref'd: keep the test process up
  await until('every wake journaled', async () => recs.length >= wakes, 60_000);
  clearInterval(alive);
  t.ok(
    recs.every((r) => r.outcome === 'ok' && r.attempt === 1),
    'every wake ran once, at its first attempt',
  );
  t.equal(new Set(recs.map((r) => r.wake)).size, wakes, 'each wake once');
  t.equal(counts.release, 0, 'no wake was claimed only to be released again');
  t.equal(counts.claim, wakes, 'one claim per wake');
});

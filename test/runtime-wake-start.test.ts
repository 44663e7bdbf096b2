// A wake delivery is not lost for a cause of the host's (docs/wakes.md, "A delivery's budget
// counts from its guest's start", "Which deliveries are retried"). Before, the chain's deadline
// (and the watchdog) counted from the moment the run was posted to a worker, so a run that waited
// behind the worker's earlier work (a translation, deployments) longer than timeoutMs was
// journaled `trapped Interrupted` with fuel 0, and a recurring harness never re-armed; a wake
// whose worker died before starting it was journaled worker-lost and dropped.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t from 'tap';
import { BermRuntime, type JournalRecord } from '../src/runtime/index.js';
import { ROOT, TEST_CACHE } from './helpers/fixtures.js';
import { BLOCK_MS } from './helpers/block-on-undeploy.js';
import { until } from './helpers/wait.js';

const TICKER = new Uint8Array(fs.readFileSync(path.join(ROOT, 'examples/ticker.elf')));
// 2.3 MB of unoptimised Rust: a cold translation of a second or more (the test checks its length)
const BIG = new Uint8Array(fs.readFileSync(path.join(ROOT, 'fixtures/rust/build/rs_json-O0.elf')));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-wake-start-'));
t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));
let n = 0;

const TIMEOUT_MS = 400;

/** The first journal record of the ticker's wake, and how long it waited (queue and worker). */
function firstTick(rt: BermRuntime): Promise<{ r: JournalRecord; waitMs: number }> {
  return new Promise((resolve) => {
    const on = (r: JournalRecord, o: { info: { waitMs: number } | null } | null) => {
      if (r.trigger !== 'wake' || r.wake !== 'ticker') return;
      rt.off('invocation', on);
      resolve({ r, waitMs: o?.info?.waitMs ?? NaN });
    };
    rt.on('invocation', on);
  });
}

for (const graceMs of [60_000, 200]) {
  t.test(
    `a wake posted to a worker busy with earlier work runs and re-arms (graceMs ${graceMs})`,
    async (t) => {
      const rt = await BermRuntime.create({
        state: path.join(tmp, `s${n++}`),
        poolSize: 1,
        cacheDir: TEST_CACHE,
        limits: { timeoutMs: TIMEOUT_MS, graceMs },
        workerModules: [new URL('./helpers/block-on-undeploy.ts', import.meta.url)],
      });
      t.teardown(() => rt.close());
      await rt.deploy('ticker', TICKER, { capabilities: ['schedule', 'storage'] });
      rt.start();
      // the worker has imported the module that blocks (a compile may run before that)
      await until('the worker to be ready', async () => rt.stats().idleWorkers === 1, 60_000, 20);
      const tick = firstTick(rt);
      // its undeployment keeps the only worker busy for BLOCK_MS while the pool counts it free
      await rt.deploy('slow', TICKER, { capabilities: [] });
      rt.undeploy('slow');
      const PERIOD = 3_600_000;
      rt.arm({ harness: 'ticker', id: 'ticker', payload: JSON.stringify({ period_ms: PERIOD }) });
      const { r, waitMs } = await tick;
      t.ok(waitMs >= BLOCK_MS - 100, `the run waited for the worker (${waitMs} ms)`);
      t.equal(r.outcome, 'ok', `the occurrence ran: ${r.detail ?? ''}`);
      t.equal(r.attempt, 1);
      t.ok(r.fuel > 0, 'the guest ran');
      t.ok(r.ms < BLOCK_MS, `the journal's ms is the guest's run (${r.ms} ms)`);
      const next = rt.list().find((w) => w.id === 'ticker');
      t.ok(next, 'the schedule is still armed');
      t.equal(next?.when, r.scheduledAt! + PERIOD, 'one period after the occurrence');
    },
  );
}

t.test('a wake does not wait behind a translation while another worker is idle', async (t) => {
  // the translation goes to an idle worker; the wake due meanwhile goes to the other one, not
  // into the translating worker's queue (where it waited for the whole translation)
  const rt = await BermRuntime.create({
    state: path.join(tmp, `s${n++}`),
    poolSize: 2,
    cacheDir: null,
    limits: { timeoutMs: 30_000 },
  });
  t.teardown(() => rt.close());
  await rt.deploy('ticker', TICKER, { capabilities: ['schedule', 'storage'] });
  rt.start();
  const ran = new Promise<{ rec: JournalRecord; waitMs: number }>((resolve) => {
    const on = (rec: JournalRecord, o: { info: { waitMs: number } | null } | null) => {
      if (rec.trigger !== 'wake' || rec.wake !== 'ticker') return;
      rt.off('invocation', on);
      resolve({ rec, waitMs: o?.info?.waitMs ?? NaN });
    };
    rt.on('invocation', on);
  });
  const t0 = Date.now();
  const big = rt.deploy('big', BIG, { capabilities: [] }).then(
    () => Date.now(),
    () => Date.now(),
  );
  rt.arm({ harness: 'ticker', id: 'ticker', payload: JSON.stringify({ period_ms: 3_600_000 }) });
  const { rec, waitMs } = await ran;
  const compileMs = (await big) - t0;
  t.ok(compileMs > 200, `the translation took ${compileMs} ms`);
  t.equal(rec.outcome, 'ok');
  t.ok(waitMs < compileMs / 2, `the wake waited ${waitMs} ms, not the translation's ${compileMs} ms`);
});

t.test('a wake whose worker dies before its guest starts is re-delivered, attempt 2', async (t) => {
  // nothing of the delivery ran, so nothing is owed to the guest's budget: the claim stays and the
  // occurrence is delivered again, as after a crash of the process (docs/wakes.md)
  const marker = path.join(tmp, 'exited');
  process.env.BERM_TEST_EXIT_MARKER = marker;
  const rt = await BermRuntime.create({
    state: path.join(tmp, `s${n++}`),
    poolSize: 1,
    cacheDir: TEST_CACHE,
    limits: { timeoutMs: 30_000 },
    workerModules: [new URL('./helpers/exit-on-run.ts', import.meta.url)],
  });
  t.teardown(() => rt.close());
  await rt.deploy('doomed', TICKER, { capabilities: ['schedule', 'storage'] });
  rt.start();
  // the first journal record of the wake: before, the dropped delivery (error worker-lost)
  const ran = new Promise<JournalRecord>((resolve) =>
    rt.on('invocation', (r: JournalRecord) => r.wake === 'doomed-tick' && resolve(r)),
  );
  const PERIOD = 3_600_000;
  rt.arm({ harness: 'doomed', id: 'doomed-tick', payload: JSON.stringify({ period_ms: PERIOD }) });
  const r = await ran;
  t.ok(fs.existsSync(marker), 'the first worker died on the run');
  t.equal(rt.stats().workersReplaced, 1);
  t.match(
    r,
    { trigger: 'wake', outcome: 'ok', attempt: 2 },
    `the delivery ran, the second time: ${r.detail ?? ''}`,
  );
  t.ok(r.fuel > 0, 'the guest ran');
  t.equal(rt.stats().redeliveries, 1);
  const next = rt.list().find((w) => w.id === 'doomed-tick');
  t.equal(next?.when, r.scheduledAt! + PERIOD, 'the schedule is still armed, one period on');
});

// A wake whose worker is lost after its guest started (a host fault) is delivered again with
// backoff, up to the wakeAttempts limit; the last lost delivery is journaled worker-lost. A guest's
// own failure is not retried. The worker is made to die right after the guest ran, before its
// outcome reaches the queue (test/helpers/exit-after-run.ts).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t, { type Test } from 'tap';
import { BermRuntime, type JournalRecord } from '../src/runtime/index.js';
import { ROOT, TEST_CACHE } from './helpers/fixtures.js';

const QG = new Uint8Array(fs.readFileSync(path.join(ROOT, 'test/data/queue-guest.elf')));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-wake-retry-'));
t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));
let n = 0;

/** A runtime whose workers die after the first `exits` runs of harness `late`. */
async function runtime(t: Test, exits: number): Promise<{ rt: BermRuntime; records: JournalRecord[] }> {
  const dir = fs.mkdtempSync(path.join(tmp, 'exits-'));
  process.env.BERM_TEST_LATE_DIR = dir;
  process.env.BERM_TEST_LATE_EXITS = String(exits);
  const rt = await BermRuntime.create({
    state: path.join(tmp, `s${n++}`),
    poolSize: 1,
    cacheDir: TEST_CACHE,
    limits: { wakeAttempts: 3, wakeRetryMs: 200 },
    workerModules: [new URL('./helpers/exit-after-run.ts', import.meta.url)],
  });
  t.teardown(() => rt.close());
  await rt.deploy('late', QG, { capabilities: [] });
  const records: JournalRecord[] = [];
  rt.on('invocation', (r: JournalRecord) => records.push(r));
  rt.start();
  return { rt, records };
}

async function journaled(records: JournalRecord[], id: string): Promise<JournalRecord> {
  for (let i = 0; i < 600; i++) {
    const r = records.find((x) => x.wake === id);
    if (r) return r;
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error(`${id} was not journaled within 60 s`);
}

t.test('lost once after the guest started: delivered again, attempt 2, after the backoff', async (t) => {
  const { rt, records } = await runtime(t, 1);
  const armedAt = Date.now();
  rt.arm({ harness: 'late', id: 'once', payload: 'hello' });
  const r = await journaled(records, 'once');
  t.match(r, { trigger: 'wake', outcome: 'ok', attempt: 2 }, `ran again: ${r.detail ?? ''}`);
  t.ok(r.fuel > 0, 'the second run counted its fuel');
  t.ok(r.start - armedAt >= 200, `the second delivery waited the backoff (${r.start - armedAt} ms)`);
  t.equal(records.filter((x) => x.wake === 'once').length, 1, 'the lost delivery left no record');
  t.equal(rt.stats().workersReplaced, 1);
});

t.test('lost on every delivery: journaled worker-lost at the last attempt, with its fuel', async (t) => {
  // the workers die after the first three runs only: the same wake armed again then runs whole
  const { rt, records } = await runtime(t, 3);
  rt.arm({ harness: 'late', id: 'always', payload: 'hello' });
  const r = await journaled(records, 'always');
  t.match(r, { trigger: 'wake', outcome: 'error', attempt: 3 }, 'three deliveries, the last journaled');
  t.match(r.detail, /exited with code 7/);
  t.equal(rt.stats().workersReplaced, 3);
  // the last lost delivery also moved the wake to the dead-letter set (test/runtime-dead-letter)
  const lostRec = records.length;
  const runOf = () => records.slice(lostRec).find((x) => x.trigger === 'wake');
  rt.arm({ harness: 'late', id: 'always', payload: 'hello' });
  for (let i = 0; i < 600 && !runOf(); i++) await new Promise((res) => setTimeout(res, 100));
  const whole = runOf()!;
  t.match(whole, { wake: 'always', outcome: 'ok', attempt: 1 });
  // the lost guest ran the same code on the same record (one digit of attempt apart): the fuel
  // journaled for it is what it took, as the whole run's, not 0
  t.ok(
    r.fuel > 0 && Math.abs(r.fuel - whole.fuel) <= whole.fuel * 0.02,
    `fuel ${r.fuel} against ${whole.fuel}`,
  );
});

t.test("a guest's own failure is not retried", async (t) => {
  const { rt, records } = await runtime(t, 0);
  rt.arm({ harness: 'late', id: 'fails', payload: 'fail' });
  const r = await journaled(records, 'fails');
  t.match(r, { trigger: 'wake', outcome: 'failed', attempt: 1 });
  await new Promise((res) => setTimeout(res, 1000));
  t.equal(records.filter((x) => x.wake === 'fails').length, 1, 'delivered once');
});

// bermd on the queue: wakes through the HTTP API on the queue's due-set (arm, list, cancel,
// refusals, a wake that fires), and guests off the serving thread (a spinning guest does not stop
// the daemon from answering).
import t from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AgentClient, decodeServer, encodeClient, parseEndpoint } from '../src/protocol/index.js';
import { elf, testDaemon } from './helpers/daemon.js';

const QG = elf('test/data/queue-guest.elf');
const ECHO = elf('fixtures/build/echo-gcc-O2.elf');

async function until<T>(f: () => Promise<T | undefined>, what: string, ms = 20_000): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

t.test('wakes: arm, list, cancel, fire, refusals', async (t) => {
  const d = await testDaemon();
  t.teardown(() => d.stop());
  t.equal((await d.req('/harnesses/qg', { method: 'PUT', body: QG })).status, 200);
  t.equal((await d.req('/harnesses/echo', { method: 'PUT', body: ECHO })).status, 200);

  const before = Date.now();
  const arm = await d.req('/wakes', {
    method: 'POST',
    body: JSON.stringify({ harness: 'qg', delay_ms: 600_000, payload: 'later', id: 'w-later' }),
  });
  t.equal(arm.status, 201);
  const w = (await arm.json()) as { id: string; harness: string; due_at: number; payload: string };
  t.equal(w.id, 'w-later');
  t.equal(w.harness, 'qg');
  t.equal(w.payload, 'later');
  t.ok(w.due_at >= before + 600_000 && w.due_at <= Date.now() + 600_000, 'due in 10 minutes');

  const list = (await (await d.req('/wakes')).json()) as { wakes: { id: string }[] };
  t.same(
    list.wakes.map((x) => x.id),
    ['w-later'],
  );
  t.equal((await d.req('/wakes/w-later', { method: 'DELETE' })).status, 204);
  t.same(((await (await d.req('/wakes')).json()) as { wakes: unknown[] }).wakes, []);

  // `at` is the due instant itself, to the millisecond (not re-derived from a delay)
  const at = Date.now() + 3_600_123;
  const armAt = await d.req('/wakes', {
    method: 'POST',
    body: JSON.stringify({ harness: 'qg', at, id: 'w-at' }),
  });
  t.equal(armAt.status, 201);
  t.equal(((await armAt.json()) as { due_at: number }).due_at, at, 'due_at is at exactly');
  const listAt = (await (await d.req('/wakes')).json()) as { wakes: { id: string; due_at: number }[] };
  t.same(
    listAt.wakes.map((x) => [x.id, x.due_at]),
    [['w-at', at]],
  );
  t.equal((await d.req('/wakes/w-at', { method: 'DELETE' })).status, 204);
  // a JSON null counts as absent: {"delay_ms": null, "at": N} is `at` alone
  const atNull = await d.req('/wakes', {
    method: 'POST',
    body: JSON.stringify({ harness: 'qg', at, delay_ms: null, id: 'w-null' }),
  });
  t.equal(atNull.status, 201);
  t.equal(((await atNull.json()) as { due_at: number }).due_at, at, 'null delay_ms: due at `at`');
  t.equal((await d.req('/wakes/w-null', { method: 'DELETE' })).status, 204);
  const again = await d.req('/wakes/w-later', { method: 'DELETE' });
  t.equal(again.status, 404);
  t.match(((await again.json()) as { error: string }).error, /no wake with id w-later/);

  const noWake = await d.req('/wakes', {
    method: 'POST',
    body: JSON.stringify({ harness: 'echo', delay_ms: 10 }),
  });
  t.equal(noWake.status, 400);
  t.match(((await noWake.json()) as { error: string }).error, /on_wake/);
  const unknown = await d.req('/wakes', {
    method: 'POST',
    body: JSON.stringify({ harness: 'nope', delay_ms: 10 }),
  });
  t.equal(unknown.status, 404);
  for (const [body, msg] of [
    [{ harness: 'qg', delay_ms: -1 }, /^delay_ms must be a whole number of ms >= 0 \(got -1\)$/],
    [{ harness: 'qg', delay_ms: 1.5 }, /^delay_ms must be a whole number of ms >= 0 \(got 1\.5\)$/],
    [{ harness: 'qg', delay_ms: 'soon' }, /^delay_ms must be a whole number of ms >= 0 \(got "soon"\)$/],
    [{ harness: 'qg' }, /^give delay_ms \(ms from now\) or at/],
    [{ harness: 'qg', delay_ms: null }, /^give delay_ms \(ms from now\) or at/],
    [
      { harness: 'qg', at: 'tomorrow' },
      /^at must be a whole number of ms since the Unix epoch, >= 0 \(got "tomorrow"\)$/,
    ],
    [{ harness: 'qg', at: -5 }, /^at must be a whole number of ms since the Unix epoch, >= 0 \(got -5\)$/],
    [
      { harness: 'qg', at: Date.now() + 0.5 },
      /^at must be a whole number of ms since the Unix epoch, >= 0 \(got \d+\.5\)$/,
    ],
    [{ harness: 'qg', at: Date.now() + 60_000, delay_ms: 60_000 }, /^give either delay_ms or at, not both$/],
    [{ harness: 'q.g', delay_ms: 1 }, /harness/],
  ] as const) {
    const r = await d.req('/wakes', { method: 'POST', body: JSON.stringify(body) });
    t.equal(r.status, 400, `refused: ${JSON.stringify(body)}`);
    t.match(((await r.json()) as { error: string }).error, msg, `message for ${JSON.stringify(body)}`);
  }
  t.equal((await d.req('/wakes', { method: 'POST', body: '{"harness":' })).status, 400);
  t.same(((await (await d.req('/wakes')).json()) as { wakes: unknown[] }).wakes, [], 'nothing armed');

  // a wake due now fires through the queue
  t.equal(
    (
      await d.req('/wakes', {
        method: 'POST',
        body: JSON.stringify({ harness: 'qg', delay_ms: 0, payload: 'now' }),
      })
    ).status,
    201,
  );
  const line = await until(async () => {
    const text = await (await d.req('/metrics')).text();
    return /^berm_invocations_total\{trigger="wake",outcome="ok"\} 1$/m.exec(text)?.[0];
  }, 'the wake to fire');
  t.ok(line, 'a wake-triggered invocation finished ok');
  t.same(
    ((await (await d.req('/wakes')).json()) as { wakes: unknown[] }).wakes,
    [],
    'fired wake left the due-set',
  );

  // an instant already past keeps its value and is due at once
  const past = Date.now() - 60_000;
  const armPast = await d.req('/wakes', {
    method: 'POST',
    body: JSON.stringify({ harness: 'qg', at: past, payload: 'overdue' }),
  });
  t.equal(armPast.status, 201);
  t.equal(((await armPast.json()) as { due_at: number }).due_at, past, 'due_at is the past instant');
  t.ok(
    await until(async () => {
      const text = await (await d.req('/metrics')).text();
      return /^berm_invocations_total\{trigger="wake",outcome="ok"\} 2$/m.exec(text)?.[0];
    }, 'the overdue wake to fire'),
  );
});

t.test('a spinning guest runs on a worker: the daemon keeps answering', async (t) => {
  // The spin runs until its deadline (timeoutMs from admission). Everything below must happen
  // before that deadline; 8 s leaves a loaded machine room for the health check, the echo call on
  // the second worker and a metrics read (a few hundred ms when quiet).
  // the echo call is the spinning harness's own: it may use both workers (by default one harness
  // gets one fewer than the pool; test/hostile-fair covers that)
  const d = await testDaemon({ limit: ['timeoutMs=8000', 'harnessConcurrency=2'], workers: '2' });
  t.teardown(() => d.stop());
  t.equal((await d.req('/harnesses/qg', { method: 'PUT', body: QG })).status, 200);
  const inFlight = async (): Promise<string | undefined> =>
    /^berm_in_flight (\d+)$/m.exec(await (await d.req('/metrics')).text())?.[1];
  const spinning = d.req('/harnesses/qg/tools/spin', { method: 'POST', body: '{}' });
  let spinEnded = false;
  void spinning.then(
    () => (spinEnded = true),
    () => (spinEnded = true),
  );
  await until(async () => ((await inFlight()) === '1' ? true : undefined), 'the spin call to run');
  const t0 = Date.now();
  const health = await d.req('/health');
  t.equal(health.status, 200);
  const echo = await d.req('/harnesses/qg/tools/echo', { method: 'POST', body: '{"during":"spin"}' });
  t.same(await echo.json(), { done: '{"during":"spin"}' }, 'another call ran meanwhile (2 workers)');
  // a deploy waits for the worker that makes its instance, not for the one running the spin
  const put = await d.req('/harnesses/echo2', { method: 'PUT', body: ECHO });
  t.equal(put.status, 200, 'a deploy during the spin is acknowledged');
  const echo2 = await d.req('/harnesses/echo2/tools/echo', { method: 'POST', body: '{"x":2}' });
  t.same(await echo2.json(), { done: '{"x":2}' }, 'and answers its call');
  const answered = Date.now() - t0;
  // Were the guest on the serving thread, nothing would be answered until the spin's deadline
  // ended it: the spin would be over (not in flight, its answer sent first) by now.
  t.equal(await inFlight(), '1', `the spin still runs on its worker after ${answered} ms of answers`);
  t.notOk(spinEnded, 'the spin call was still unanswered when the echo came back');
  const r = await spinning;
  t.equal(r.status, 500);
  t.match(await r.json(), { trap: 'Interrupted' }, 'the spin ended at its deadline');
  t.ok(
    d.logs.some((l) => /timeoutMs +8000 +\(flag --limit\)/.test(l)),
    'boot log names the limit and its source',
  );
});

t.test(
  'queue limits: [limits] of the declaration file, BERMD_LIMITS, --limit; each with its source',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'bermd-limits-'));
    const file = join(dir, 'decl.toml');
    writeFileSync(file, '[limits]\ntimeoutMs = 4000\nchainDepth = 2\n');
    const d = await testDaemon(
      { config: file, limit: ['queueDepth=50'] },
      { BERMD_LIMITS: 'chainDepth=3,harnessRate=77' },
    );
    t.teardown(() => d.stop());
    const line = (k: string): string | undefined => d.logs.find((l) => new RegExp(`^  ${k} `).test(l));
    t.match(line('timeoutMs'), /timeoutMs +4000 +\(file \[limits\]\)/);
    t.match(line('chainDepth'), /chainDepth +3 +\(env BERMD_LIMITS\)/, 'env beats file');
    t.match(line('harnessRate'), /harnessRate +77 +\(env BERMD_LIMITS\)/);
    t.match(line('queueDepth'), /queueDepth +50 +\(flag --limit\)/);
    t.match(line('concurrency'), /concurrency +1 +\(default\)/);
    await t.rejects(testDaemon({ limit: ['nonsense=1'] }), /unknown limit "nonsense"/);
  },
);

t.test('the protocol endpoint arms wakes in the same due-set as POST /wakes', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bermd-proto-'));
  const sock = join(dir, 'berm.sock');
  const d = await testDaemon({ protocolEndpoint: `unix:${sock}` });
  t.teardown(() => d.stop());
  t.ok(d.logs.some((l) => l === `protocol endpoint on unix:${sock}`));
  t.equal((await d.req('/harnesses/qg', { method: 'PUT', body: QG })).status, 200);
  const c = new AgentClient(parseEndpoint(`unix:${sock}`));
  t.teardown(() => c.close());
  const at = Date.now() + 3_600_000;
  const reply = decodeServer(
    (
      await c.call(
        encodeClient('berm', { schedule_wake: { at_ms: at, harness: 'qg', payload: 'p', id: 'via-proto' } }),
        { timeoutMs: 10_000 },
      )
    )[0]!,
  );
  t.match(reply.berm, { wake: { id: 'via-proto', harness: 'qg', entry: 'on_wake', payload: 'p' } });
  const list = (await (await d.req('/wakes')).json()) as {
    wakes: { id: string; due_at: number; armed_by: string }[];
  };
  t.same(
    list.wakes.map((w) => [w.id, w.due_at, w.armed_by]),
    [['via-proto', at, 'protocol']],
  );
  t.equal((await d.req('/wakes/via-proto', { method: 'DELETE' })).status, 204);
});

// A hostile guest against the schedule capability: wake ids are one namespace across the
// harnesses of a due-set, so a guest must not reach another harness's wakes through them (replace
// or cancel them, or squat the id a berm.call.after uses), and its own berm.call.after stays its
// own to cancel; berm.call.after reaches no harness its declaration's callees do not name. The
// guest is test/data/queue-guest.elf deployed under several names.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t from 'tap';
import { BermRuntime, type Outcome } from '../src/runtime/index.js';
import { ROOT, TEST_CACHE } from './helpers/fixtures.js';

const QG = new Uint8Array(fs.readFileSync(path.join(ROOT, 'test/data/queue-guest.elf')));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-hostile-sched-'));
t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** A string's code points in hex, for test names (the ids below would drive a terminal). */
const codes = (s: string): string => [...s].map((c) => c.codePointAt(0)!.toString(16)).join(' ');

function text(o: Outcome): string {
  if (o.status === 'ok') return o.result;
  throw new Error(`expected ok, got ${JSON.stringify(o)}`);
}

t.test("a guest cannot replace, cancel or squat another harness's wakes through their ids", async (t) => {
  const rt = await BermRuntime.create({
    state: path.join(tmp, 'ids'),
    poolSize: 1,
    cacheDir: TEST_CACHE,
    limits: { timeoutMs: 10_000, graceMs: 1000 },
  });
  t.teardown(() => rt.close());
  await rt.deploy('victim', QG, { capabilities: ['schedule', 'call'], grant: { callees: ['evil'] } });
  await rt.deploy('evil', QG, { capabilities: ['schedule'] });
  rt.start();
  const pending = () => rt.list().map((w) => `${w.id} ${w.kind} ${w.harness} by ${w.armedBy} ${w.payload}`);

  // the victim's recurring schedule and its pending delayed call (to the evil harness's tool)
  t.equal(
    text(await rt.invoke('victim', 'arm', '{"delay":"600000","payload":"mine","id":"daily"}')),
    'ok: daily',
  );
  t.equal(
    text(await rt.invoke('victim', 'after', '{"delay":"600000","harness":"evil","tool":"echo","args":"{}"}')),
    'ok: after:victim',
  );
  const before = pending();

  // evil re-arms the victim's id: refused, the victim's wake untouched
  t.match(
    text(await rt.invoke('evil', 'arm', '{"delay":"0","payload":"hijacked","id":"daily"}')),
    /^refused: berm\.wake\.arm: wake id "daily" is taken by a wake this harness does not own/,
  );
  // the ids berm.call.after uses are its own: an arm of one is refused whoever it names
  for (const id of ['after:victim', 'after:evil']) {
    t.match(
      text(await rt.invoke('evil', 'arm', JSON.stringify({ delay: '0', payload: 'x', id }))),
      /^refused: berm\.wake\.arm: wake id "after:[a-z]+" is reserved for berm\.call\.after/,
      `arm ${id} refused`,
    );
  }
  t.throws(() => rt.arm({ harness: 'evil', id: 'after:victim', delayMs: 1000 }), {
    name: 'ArmError',
    message: /reserved for berm\.call\.after/,
  });
  // evil cancels them: nothing cancelled (the delayed call is stored under its target, evil)
  t.equal(text(await rt.invoke('evil', 'cancel', '{"id":"daily"}')), 'ok: 0');
  t.equal(text(await rt.invoke('evil', 'cancel', '{"id":"after:victim"}')), 'ok: 0');
  t.same(pending(), before, "the victim's wakes are as it armed them");

  // the victim's own calls still reach them: its delayed call too, whatever its target
  t.equal(
    text(await rt.invoke('victim', 'arm', '{"delay":"500000","payload":"moved","id":"daily"}')),
    'ok: daily',
  );
  t.equal(text(await rt.invoke('victim', 'cancel', '{"id":"after:victim"}')), 'ok: 1');
  t.equal(text(await rt.invoke('victim', 'cancel', '{"id":"daily"}')), 'ok: 1');
  t.same(pending(), [], 'both cancelled by their owner');

  // a wake the operator armed for a harness is that harness's to re-arm (a recurring schedule
  // started from outside)
  rt.arm({ harness: 'victim', id: 'op', delayMs: 600_000, payload: 'p' });
  t.equal(text(await rt.invoke('victim', 'arm', '{"delay":"1000","payload":"p","id":"op"}')), 'ok: op');
  t.equal(text(await rt.invoke('evil', 'cancel', '{"id":"op"}')), 'ok: 0');
  t.equal(rt.cancel('op'), true, 'the operator cancels any wake');
});

t.test(
  'berm.call.after reaches only the callees the declaration names (or the harness itself)',
  async (t) => {
    // a harness granted schedule but no callees must not run another harness's tool later: the
    // callee runs with its own grants (an exec root, hosts), so that would borrow them
    const rt = await BermRuntime.create({
      state: path.join(tmp, 'callees'),
      poolSize: 1,
      cacheDir: TEST_CACHE,
      limits: { timeoutMs: 10_000, graceMs: 1000 },
    });
    t.teardown(() => rt.close());
    await rt.deploy('mighty', QG, { capabilities: ['schedule'] });
    await rt.deploy('evil', QG, { capabilities: ['schedule'] });
    await rt.deploy('friend', QG, { capabilities: ['schedule', 'call'], grant: { callees: ['mighty'] } });
    rt.start();
    const after = (by: string, target: string) =>
      rt.invoke(by, 'after', JSON.stringify({ delay: '600000', harness: target, tool: 'echo', args: '{}' }));
    t.match(
      text(await after('evil', 'mighty')),
      /^refused: berm\.call\.after: evil may not call "mighty"; declare callees = \["mighty"\]/,
    );
    t.same(rt.list(), [], 'nothing armed');
    t.equal(text(await after('friend', 'mighty')), 'ok: after:friend', 'a declared callee');
    t.match(text(await after('friend', 'evil')), /^refused: berm\.call\.after: friend may not call "evil"/);
    t.equal(text(await after('evil', 'evil')), 'ok: after:evil', 'its own tool');
    t.same(
      rt
        .list()
        .map((w) => `${w.id} -> ${w.harness}`)
        .sort(),
      ['after:evil -> evil', 'after:friend -> mighty'],
    );
  },
);

t.test("a host call's late reply is never taken as a later call's answer", async (t) => {
  // a guest waits hostReplyTimeoutMs for the queue's thread to answer its host call, then gets an
  // error; the reply still comes when the thread is free again. It must not answer the worker's
  // next host call (of whatever harness it then runs): the replies would stay one behind for good
  const rt = await BermRuntime.create({
    state: path.join(tmp, 'late'),
    poolSize: 1,
    cacheDir: TEST_CACHE,
    hostReplyTimeoutMs: 300,
    limits: { timeoutMs: 10_000, graceMs: 1000 },
  });
  t.teardown(() => rt.close());
  await rt.deploy('a', QG, { capabilities: ['schedule'] });
  await rt.deploy('b', QG, { capabilities: ['schedule'] });
  rt.start();
  let stalls = 1;
  rt.on('armed', () => {
    // the queue's thread blocked (a long synchronous task) while it answers this arm
    if (stalls-- <= 0) return;
    const until = Date.now() + 1200;
    while (Date.now() < until);
  });
  t.match(
    text(await rt.invoke('a', 'arm', '{"delay":"600000","id":"slow"}')),
    /^error: the queue did not answer arm within 300 ms/,
  );
  t.equal(text(await rt.invoke('b', 'cancel', '{"id":"nothing"}')), 'ok: 0', "b's own answer");
  t.equal(text(await rt.invoke('a', 'arm', '{"delay":"600000","id":"next"}')), 'ok: next');
  t.same(
    rt
      .list()
      .map((w) => w.id)
      .sort(),
    ['next', 'slow'],
    'the late arm was done all the same',
  );
});

t.test("a guest waiting for the queue's answer stops waiting at its call's deadline", async (t) => {
  // the host-reply timeout (30 s by default) is longer than this call's 500 ms deadline: the wait
  // must end at the deadline, not at the timeout, nor at the pool's watchdog (deadline + grace),
  // which would terminate and replace the worker
  const rt = await BermRuntime.create({
    state: path.join(tmp, 'deadline'),
    poolSize: 1,
    cacheDir: TEST_CACHE,
    limits: { timeoutMs: 500, graceMs: 20_000 },
  });
  t.teardown(() => rt.close());
  await rt.deploy('a', QG, { capabilities: ['schedule'] });
  rt.start();
  let stalls = 1;
  rt.on('armed', () => {
    // the queue's thread blocked (a long synchronous task) while it answers this arm
    if (stalls-- <= 0) return;
    const until = Date.now() + 3000;
    while (Date.now() < until);
  });
  const t0 = Date.now();
  const o = await rt.invoke('a', 'arm', '{"delay":"600000","id":"slow"}');
  const took = Date.now() - t0;
  // the run ends once the queue's thread is free again (3 s), far before the watchdog's 20.5 s
  t.ok(took < 15_000, `ended after ${took} ms`);
  const seen = o.status === 'ok' ? o.result : JSON.stringify(o);
  t.match(seen, /deadline/, `the outcome names the deadline: ${seen}`);
  t.notMatch(seen, /terminated and replaced/, 'the worker was not replaced');
  t.equal(
    text(await rt.invoke('a', 'cancel', '{"id":"nothing"}')),
    'ok: 0',
    'the worker answers the next call',
  );
});

t.test('a wake id carries no control character of any kind (it is printed by berm wake ls)', async (t) => {
  // C0 was refused; DEL and the C1 controls (U+0080..U+009F, e.g. U+009B, a terminal's CSI) are
  // control characters too, and an id is printed as it is on the operator's terminal
  const rt = await BermRuntime.create({ state: path.join(tmp, 'ctl'), poolSize: 1, cacheDir: TEST_CACHE });
  t.teardown(() => rt.close());
  await rt.deploy('qg', QG, { capabilities: ['schedule'] });
  rt.start();
  for (const id of ['a\u0007b', 'a\u007fb', 'a\u009b31mb', 'a\u0085b']) {
    t.throws(
      () => rt.arm({ harness: 'qg', id, delayMs: 60_000 }),
      { name: 'ArmError', message: /must be 1\.\.256 bytes without control characters/ },
      codes(id),
    );
    t.match(
      text(await rt.invoke('qg', 'arm', JSON.stringify({ delay: '60000', id }))),
      /^refused: berm\.wake\.arm: wake id .* without control characters/,
      `${codes(id)} from a guest`,
    );
  }
  t.same(rt.list(), [], 'nothing armed');
  t.equal(rt.arm({ harness: 'qg', id: 'é ü 日本 \u00a0 ok', delayMs: 60_000 }).id, 'é ü 日本 \u00a0 ok');
});

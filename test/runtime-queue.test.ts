// The runtime's queue in process: triggers, limits, chains, stuck workers, the due-set and its
// refusals, at-least-once re-delivery. The guest is test/data/queue-guest.elf (source beside it);
// the plain echo fixture stands for a harness without on_wake.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t from 'tap';
import {
  ArmError,
  BermRuntime,
  DueHeap,
  JsonlJournal,
  LimitError,
  readJournal,
  SqliteStore,
  type JournalRecord,
  type Outcome,
  type RuntimeOptions,
} from '../src/runtime/index.js';
import { ROOT, TEST_CACHE } from './helpers/fixtures.js';
import { startServer } from './helpers/cap-util.js';
import { until } from './helpers/wait.js';
import { BRIDGE_GRACE_MS, BRIDGE_STARTUP_MS } from '../src/sync/bridge.js';

const QG = new Uint8Array(fs.readFileSync(path.join(ROOT, 'test/data/queue-guest.elf')));
const ECHO = new Uint8Array(fs.readFileSync(path.join(ROOT, 'fixtures/build/echo-gcc-O2.elf')));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-queue-'));
t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));
let n = 0;

async function runtime(
  opts: Partial<RuntimeOptions> = {},
  grant = ['schedule', 'call'],
): Promise<BermRuntime> {
  const rt = await BermRuntime.create({
    state: path.join(tmp, `s${n++}`),
    poolSize: 2,
    cacheDir: TEST_CACHE,
    ...opts,
    limits: { timeoutMs: 5000, graceMs: 1000, ...opts.limits },
  });
  await rt.deploy('qg', QG, { capabilities: grant, grant: { callees: ['qg'] } });
  await rt.deploy('plain', ECHO, { capabilities: ['schedule'] });
  rt.start();
  return rt;
}

function text(o: Outcome): string {
  if (o.status === 'ok') return o.result;
  throw new Error(`expected ok, got ${JSON.stringify(o)}`);
}

/** The next `count` journal records emitted by rt. */
function records(
  rt: BermRuntime,
  count: number,
  filter: (r: JournalRecord) => boolean = () => true,
  withinMs = 120_000,
): Promise<JournalRecord[]> {
  const out: JournalRecord[] = [];
  return new Promise((resolve, reject) => {
    // a record that never comes fails the test with what did come, instead of hanging until
    // tap's file timeout (or, with nothing else keeping the loop alive, ending the test unfinished)
    const timer = setTimeout(() => {
      rt.off('invocation', on);
      reject(new Error(`only ${out.length} of ${count} journal records within ${withinMs} ms`));
    }, withinMs);
    const on = (r: JournalRecord) => {
      if (!filter(r)) return;
      out.push(r);
      if (out.length === count) {
        clearTimeout(timer);
        rt.off('invocation', on);
        resolve(out);
      }
    };
    rt.on('invocation', on);
  });
}

t.test('DueHeap pops in (when, seq) order, like a sort', async (t) => {
  let seed = 12345;
  const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
  const pairs: [number, number][] = [];
  for (let i = 0; i < 5000; i++) pairs.push([rnd() % 1000, i + 1]);
  const h = DueHeap.from(
    new Float64Array(pairs.slice(0, 2500).map((p) => p[0])),
    new Float64Array(pairs.slice(0, 2500).map((p) => p[1])),
  );
  for (const p of pairs.slice(2500)) h.push(p[0], p[1]);
  t.equal(h.countDue(499), pairs.filter((p) => p[0] <= 499).length, 'countDue counts entries due');
  const sorted = [...pairs].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const got: [number, number][] = [];
  while (h.size > 0) {
    got.push([h.peekWhen(), h.peekSeq()]);
    h.pop();
  }
  t.same(got, sorted);
  t.equal(h.peekWhen(), Infinity);
});

t.test('journal rotates by size and reads back in order', async (t) => {
  const file = path.join(tmp, 'j', 'journal.jsonl');
  const j = new JsonlJournal(file, 400, 2);
  const rec = (i: number): JournalRecord => ({
    trigger: 'call',
    harness: 'h',
    entry: 'e',
    chain: `c${i}`,
    depth: 0,
    start: i,
    ms: 1,
    outcome: 'ok',
    fuel: 0,
  });
  for (let i = 0; i < 20; i++) j.append(rec(i));
  j.close();
  t.ok(fs.existsSync(file.replace('.jsonl', '.1.jsonl')), 'rotated once');
  t.ok(fs.existsSync(file.replace('.jsonl', '.2.jsonl')), 'rotated twice');
  t.notOk(fs.existsSync(file.replace('.jsonl', '.3.jsonl')), 'keeps two');
  for (const f of [file, file.replace('.jsonl', '.1.jsonl')])
    t.ok(fs.statSync(f).size <= 400, `${path.basename(f)} under the size`);
  const back = readJournal(file);
  t.same(
    back.map((r) => r.start),
    [...back.map((r) => r.start)].sort((a, b) => a - b),
    'oldest first',
  );
  t.equal(back.at(-1)!.start, 19, 'the newest record is last');
});

t.test('calls: ok, failed tool, unknown harness and tool, bad arguments, notify', async (t) => {
  const rt = await runtime();
  t.teardown(() => rt.close());
  t.equal(text(await rt.invoke('qg', 'echo', '{"a":"b"}')), '{"a":"b"}');
  const unknown = await rt.invoke('ghost', 'echo', '{}');
  t.match(unknown, {
    status: 'error',
    code: 'unknown-harness',
    message: 'no harness named ghost is deployed',
  });
  t.notMatch(unknown, { message: /qg|plain/ }, 'an unknown harness names no other harness');
  t.match(await rt.invoke('qg', 'nope', '{}'), {
    status: 'error',
    code: 'unknown-tool',
    message: /no tool named nope/,
  });
  t.match(await rt.invoke('qg', 'echo', 'not json'), {
    status: 'error',
    code: 'bad-args',
    message: /not valid JSON/,
  });
  const trap = await rt.invoke('qg', 'trap', '{}');
  t.match(trap, { status: 'trapped', trap: { name: 'MemoryFault', symbol: /trap/ } });
  const notified = await rt.notify('qg', { id: 'sub-1', source: 'test', payload: 'hello' });
  const rec = JSON.parse(text(notified)) as Record<string, unknown>;
  t.match(rec, { id: 'sub-1', source: 'test', payload: 'hello', attempt: 1 });
  t.ok(Math.abs((rec.now as number) - Date.now()) < 60_000, 'now is the current time');
  t.match(await rt.notify('plain', { id: 's', source: 'x', payload: '' }), {
    status: 'error',
    message: /does not export on_notify/,
  });
  const st = rt.stats();
  t.equal(st.invocations['call:ok'], 1);
  t.equal(st.invocations['notify:ok'], 1);
  t.equal(st.invocations['call:trapped'], 1);
});

t.test(
  'arming: a wake fires on_wake with its record; bad input is refused and nothing is armed',
  async (t) => {
    const rt = await runtime();
    t.teardown(() => rt.close());
    const fired = records(rt, 1, (r) => r.trigger === 'wake');
    const before = Date.now();
    t.match(text(await rt.invoke('qg', 'arm', '{"delay":"50","payload":"p-1","id":"w1"}')), 'ok: w1');
    const [rec] = await fired;
    t.match(rec, { trigger: 'wake', harness: 'qg', entry: 'on_wake', wake: 'w1', attempt: 1, outcome: 'ok' });
    t.ok(rec!.scheduledAt! >= before + 50, 'scheduled_at is the arming time + delay');
    t.ok(rec!.start >= rec!.scheduledAt!, 'not fired early');

    const refusals: [string, string, RegExp][] = [
      ['non-finite delay', '{"delay":"inf"}', /refused: berm.wake.arm: delay_ms must be decimal ASCII/],
      ['NaN delay', '{"delay":"NaN"}', /refused: berm.wake.arm: delay_ms must be decimal ASCII/],
      ['negative delay', '{"delay":"-5"}', /refused: berm.wake.arm: delay_ms must be decimal ASCII/],
      [
        'payload over the limit',
        JSON.stringify({ delay: '10', payload: 'x'.repeat(70_000) }),
        /refused: berm.wake.arm: refused by limit maxPayloadBytes = 65536/,
      ],
      [
        'delay over the limit',
        '{"delay":"999999999999999"}',
        /refused: berm.wake.arm: refused by limit maxDelayMs/,
      ],
    ];
    for (const [what, args, re] of refusals) t.match(text(await rt.invoke('qg', 'arm', args)), re, what);
    t.match(
      text(await rt.invoke('qg', 'after', '{"delay":"10","harness":"ghost","tool":"echo","args":"{}"}')),
      /refused: berm.call.after: qg may not call "ghost"; declare callees = \["ghost"\]/,
    );
    t.match(
      text(await rt.invoke('qg', 'after', '{"delay":"10","harness":"qg","tool":"echo","args":"nope"}')),
      /refused: berm.call.after: args is not JSON/,
    );

    t.throws(
      () => rt.arm({ harness: 'plain', delayMs: 10 }),
      new ArmError('harness plain does not export on_wake; it cannot be woken'),
    );
    t.throws(() => rt.arm({ harness: 'ghost', delayMs: 10 }), {
      name: 'ArmError',
      message: /no harness named ghost is deployed/,
    });
    t.throws(() => rt.arm({ harness: 'qg', at: NaN }), { name: 'ArmError', message: /not a finite number/ });
    t.throws(() => rt.arm({ harness: 'qg', delayMs: Infinity }), { name: 'ArmError', message: /not finite/ });
    t.throws(() => rt.arm({ harness: 'qg', delayMs: 1, payload: 'y'.repeat(65_537) }), LimitError);
    t.equal(rt.list().length, 0, 'nothing was armed');
    t.equal(rt.stats().wakesPending, 0);

    // without the schedule grant berm.wake.arm is not linked: the guest traps naming it
    const bare = await runtime({}, []);
    t.teardown(() => bare.close());
    const o = await bare.invoke('qg', 'arm', '{"delay":"10"}');
    t.match(o, { status: 'trapped', trap: { name: 'UnknownHostCall', message: /berm.wake.arm/ } });
    t.equal(bare.list().length, 0, 'nothing was armed');

    // cancel and re-arm
    t.match(text(await rt.invoke('qg', 'arm', '{"delay":"60000","id":"later"}')), 'ok: later');
    t.match(text(await rt.invoke('qg', 'arm', '{"delay":"50000","id":"later","payload":"v2"}')), 'ok: later');
    t.same(
      rt.list().map((w) => [w.id, w.payload]),
      [['later', 'v2']],
      're-arming an id replaces it',
    );
    t.equal(text(await rt.invoke('qg', 'cancel', '{"id":"later"}')), 'ok: 1');
    t.equal(text(await rt.invoke('qg', 'cancel', '{"id":"later"}')), 'ok: 0');
    t.equal(rt.list().length, 0);
  },
);

t.test("delays count from the invocation's now: a berm_every schedule keeps its phase exactly", async (t) => {
  // docs/wakes.md: a wake armed by an invocation is due at that invocation's now + delay_ms (the
  // record's now for on_wake, the start for a tool call), not at the arm call's arrival. So the
  // SDK's berm_every (delay = period - ((now - scheduled_at) mod period)) lands every occurrence
  // on first + k * period. Before, each occurrence slipped by the time the guest took to reach
  // its arm call (gaps of 401-459 ms for a 400 ms period).
  const PERIOD = 300;
  const rt = await runtime();
  t.teardown(() => rt.close());
  const TICKER = new Uint8Array(fs.readFileSync(path.join(ROOT, 'examples/ticker.elf')));
  await rt.deploy('ticker', TICKER, { capabilities: ['schedule', 'storage'] });
  const calls = records(rt, 3, (r) => r.trigger === 'call');
  const ticks = records(rt, 6, (r) => r.trigger === 'wake' && r.harness === 'ticker');
  t.equal(text(await rt.invoke('ticker', 'start', JSON.stringify({ period_ms: PERIOD }))), 'ticker');

  // a tool call's delays count from its start (the journal's start)
  t.match(text(await rt.invoke('qg', 'arm', '{"delay":"60000","id":"from-start"}')), 'ok: from-start');
  t.match(
    text(await rt.invoke('qg', 'after', '{"delay":"70000","harness":"qg","tool":"echo","args":"{}"}')),
    /^ok: after:qg$/,
  );
  const [start, arm, after] = await calls;
  const pending = new Map(rt.list().map((w) => [w.id, w.when]));
  t.equal(pending.get('from-start'), arm!.start + 60_000, 'berm.wake.arm: due at the call start + delay');
  t.equal(pending.get('after:qg'), after!.start + 70_000, 'berm.call.after: due at the call start + delay');

  const got = await ticks;
  t.equal(text(await rt.invoke('ticker', 'stop', '{}')), '1', 'the schedule was still armed');
  t.equal(got[0]!.scheduledAt, start!.start + PERIOD, 'the first tick: the start call + one period');
  for (let i = 0; i < got.length; i++) {
    const r = got[i]!;
    t.equal(r.outcome, 'ok');
    // a wake's journal start is the now its record carried
    t.ok(r.start >= r.scheduledAt!, `occurrence ${i + 1} not early`);
    if (i === 0) continue;
    const gap = r.scheduledAt! - got[i - 1]!.scheduledAt!;
    // exactly one period, or k periods when an occurrence started more than a period late
    // (a loaded machine): never a drift
    t.ok(gap > 0 && gap % PERIOD === 0, `occurrence ${i + 1} due ${gap} ms after the previous`);
    const late = got[i - 1]!.start - got[i - 1]!.scheduledAt!;
    t.equal(gap, PERIOD * (Math.floor(late / PERIOD) + 1), 'the first phase instant after the previous now');
  }
});

t.test('maxDelayMs bounds the delay a guest asks for, not what is left of it when it arrives', async (t) => {
  // a guest's delay counts from its invocation's instant (docs/wakes.md), so the due instant
  // reaches the runtime as that instant + delay_ms: the limit still applies to delay_ms itself
  // (docs/runtime-queue.md: a delay over maxDelayMs is refused), however long the guest ran first
  const rt = await runtime({ limits: { maxDelayMs: 1000 } });
  t.teardown(() => rt.close());
  const ranFor = 400; // an invocation that started 400 ms before its arm call
  t.throws(() => rt.arm({ harness: 'qg', delayMs: 1001, at: Date.now() - ranFor + 1001 }), {
    name: 'LimitError',
    message: /maxDelayMs = 1000.*the delay is 1001 ms/,
  });
  t.throws(
    () =>
      rt.callAfter({
        by: 'qg',
        delayMs: 1300,
        at: Date.now() - ranFor + 1300,
        harness: 'qg',
        tool: 'echo',
        args: '{}',
      }),
    { name: 'LimitError', message: /maxDelayMs = 1000.*the delay is 1300 ms/ },
  );
  t.throws(() => rt.arm({ harness: 'qg', delayMs: -1, at: Date.now() }), {
    name: 'ArmError',
    message: /negative/,
  });
  t.equal(rt.list().length, 0, 'nothing was armed');
  // through the capability: delay_ms at the limit is armed, one more is refused
  t.match(text(await rt.invoke('qg', 'arm', '{"delay":"1000","id":"edge"}')), 'ok: edge');
  t.match(
    text(await rt.invoke('qg', 'arm', '{"delay":"1001","id":"over"}')),
    /refused: berm.wake.arm: refused by limit maxDelayMs = 1000/,
  );
  t.match(
    text(await rt.invoke('qg', 'after', '{"delay":"1001","harness":"qg","tool":"echo","args":"{}"}')),
    /refused: berm.call.after: refused by limit maxDelayMs = 1000/,
  );
  t.same(
    rt.list().map((w) => w.id),
    ['edge'],
  );
  // an absolute instant alone (the API, the protocol's door) is still bounded from now
  t.throws(() => rt.arm({ harness: 'qg', at: Date.now() + 5000 }), { name: 'LimitError' });
});

t.test(
  'overrun skip never drops the occurrence a running one armed for itself: the schedule goes on',
  async (t) => {
    // on_wake payload "tick:0" re-arms its own id due at once (its record's now + 0: already past
    // when the arm arrives), so the next occurrence is due while this one still runs. Dropping it
    // (overrun = skip) would end the schedule for good: nothing else re-arms it. It runs when the
    // running one ends instead; an occurrence armed from outside during a run is still skipped.
    const rt = await runtime();
    t.teardown(() => rt.close());
    t.equal(rt.limits.overrun, 'skip');
    const seen: JournalRecord[] = [];
    const five = records(rt, 5, (r) => r.wake === 'self' && r.trigger === 'wake', 30_000);
    rt.on('invocation', (r: JournalRecord) => {
      if (r.wake === 'self') seen.push(r);
    });
    rt.arm({ harness: 'qg', delayMs: 0, payload: 'tick:0', id: 'self' });
    const got = await five.then(
      () => 'ran',
      (e: Error) => e.message,
    );
    rt.cancel('self', 'qg');
    t.equal(got, 'ran', `five occurrences ran (saw ${seen.map((r) => r.trigger).join(', ')})`);
    t.same(
      seen.filter((r) => r.trigger !== 'wake'),
      [],
      'none skipped',
    );
  },
);

t.test('berm.call.after runs the tool later, one level deeper in the chain', async (t) => {
  const rt = await runtime();
  t.teardown(() => rt.close());
  const done = records(rt, 1, (r) => r.trigger === 'wake');
  const first = await rt.invoke(
    'qg',
    'after',
    '{"delay":"60000","harness":"qg","tool":"echo","args":"{\\"n\\":1}"}',
  );
  t.equal(text(first), 'ok: after:qg');
  t.same(
    rt.list().map((w) => [w.id, w.payload]),
    [['after:qg', '{"n":1}']],
  );
  t.equal(
    text(await rt.invoke('qg', 'after', '{"delay":"20","harness":"qg","tool":"echo","args":"{\\"n\\":2}"}')),
    'ok: after:qg',
  );
  const [r] = await done;
  t.same(rt.list(), [], 'one pending per arming harness: the later arming replaced the first');
  t.match(r, { trigger: 'wake', harness: 'qg', entry: 'echo', outcome: 'ok', depth: 1 });
  t.equal(first.info!.chain, first.info!.chain);
});

t.test('chains: an Interrupted or out-of-gas callee ends its caller; other traps are replies', async (t) => {
  const rt = await runtime({ limits: { timeoutMs: 1500, chainInvocations: 2 } });
  t.teardown(() => rt.close());
  const spin = await rt.invoke('qg', 'call', '{"harness":"qg","tool":"spin"}');
  t.match(
    spin,
    { status: 'trapped', trap: { name: 'Interrupted', symbol: /spin/ } },
    'the caller did not get a reply',
  );
  t.ok(spin.info!.ms < 1500 * 5, 'within the chain deadline (with headroom)');
  const trap = await rt.invoke('qg', 'call', '{"harness":"qg","tool":"trap"}');
  t.match(text(trap), /^error: qg.trap trapped: MemoryFault/, "a MemoryFault is the callee's own");
  const inner = JSON.stringify({ harness: 'qg', tool: 'echo' });
  const gas = await rt.invoke('qg', 'call', JSON.stringify({ harness: 'qg', tool: 'call', args: inner }));
  t.match(
    gas,
    { status: 'trapped', trap: { name: 'OutOfGas' } },
    'the third invocation of a chain of 2 ends it',
  );
  t.match(
    text(await rt.invoke('qg', 'call', '{"harness":"qg","tool":"echo","args":"{\\"x\\":1}"}')),
    'ok: {"x":1}',
  );

  const fuel = await runtime({ limits: { fuel: 2_000_000 } });
  t.teardown(() => fuel.close());
  const f = await fuel.invoke('qg', 'call', '{"harness":"qg","tool":"spin"}');
  t.match(f, { status: 'trapped', trap: { name: 'OutOfFuel', message: /2000000/ } });
  t.ok(
    f.info!.fuel >= 2_000_000 && f.info!.fuel < 2_000_000 + 2 * 16384,
    `the chain drew its budget (${f.info!.fuel})`,
  );
});

t.test('a spinning harness never delays others beyond its own timeout', async (t) => {
  // a deadline far above what 20 echo calls take even on a loaded 2-core machine; the echo calls
  // are the spinning harness's own, so it may use both workers (the default keeps one back)
  const rt = await runtime({ limits: { timeoutMs: 10_000, harnessConcurrency: 2 } });
  t.teardown(() => rt.close());
  await rt.invoke('qg', 'echo', '{}'); // warm both workers' first instance
  await rt.invoke('qg', 'echo', '{}');
  const t0 = Date.now();
  const spinning = rt.invoke('qg', 'spin', '{}');
  const ends: number[] = [];
  for (let i = 0; i < 20; i++) {
    const o = await rt.invoke('qg', 'echo', `{"i":${i}}`);
    t.equal(o.status, 'ok');
    ends.push(Date.now());
  }
  const s = await spinning;
  const spinEnd = Date.now();
  t.match(s, { status: 'trapped', trap: { name: 'Interrupted' } });
  t.ok(ends.at(-1)! < spinEnd, 'every other call finished while the spinner still held its worker');
  t.ok(spinEnd - t0 >= 10_000 - 50, 'the spinner ran to its own deadline');
});

t.test('a host call that never returns costs one worker, which is replaced', async (t) => {
  // the capability must be in this thread's registry (deploy checks the name) and in each worker's
  const blocker = new URL('./helpers/blocking-capability.ts', import.meta.url);
  await import(blocker.href);
  const rt = await BermRuntime.create({
    state: path.join(tmp, `s${n++}`),
    poolSize: 2,
    cacheDir: TEST_CACHE,
    limits: { timeoutMs: 800, graceMs: 500 },
    workerModules: [blocker],
  });
  t.teardown(() => rt.close());
  await rt.deploy('qg', QG, { capabilities: ['blocker'] });
  const replaced = new Promise<string>((resolve) => rt.once('log', resolve));
  const o = await rt.invoke('qg', 'hostcall', '{"name":"test.block"}');
  t.match(o, {
    status: 'error',
    code: 'worker-lost',
    message: /still running 500 ms after its deadline.*terminated and replaced/,
  });
  t.match(await replaced, /worker replaced/);
  t.equal(rt.stats().workersReplaced, 1);
  t.equal(rt.stats().workers, 2, 'the pool keeps its size');
  for (let i = 0; i < 4; i++)
    t.match(await rt.invoke('qg', 'echo', '{"after":1}'), { status: 'ok' }, 'later calls run');
});

t.test('host calls are bounded by the chain deadline', async (t) => {
  const server = await startServer();
  t.teardown(server.stop);
  // The bridge that runs the fetch (src/sync/bridge.ts) is bounded by the chain's
  // deadline, its worker's start-up included (that start-up took 20 s at a load average of 28 on
  // 2 cores, and BRIDGE_STARTUP_MS is 30 s): the fetch ends by the deadline, or BRIDGE_GRACE_MS
  // after it for a job that had started. The queue's grace covers BRIDGE_STARTUP_MS all the same:
  // a worker terminated here would be the bridge failing to bound the call. The bound leaves 10 s
  // for the rest of the invocation (an instance, the guest) on a loaded machine.
  const bound = 800 + BRIDGE_GRACE_MS + 10_000;
  const rt = await runtime(
    {
      limits: { timeoutMs: 800, graceMs: 800 + BRIDGE_STARTUP_MS + BRIDGE_GRACE_MS + 10_000 },
      capabilityLimits: { httpTimeoutMs: 600_000 },
    },
    ['http'],
  );
  t.teardown(() => rt.close());
  await rt.deploy('web', QG, { capabilities: ['http'], grant: { hosts: ['127.0.0.1'] } });
  const o = await rt.invoke('web', 'fetch', JSON.stringify({ url: `http://127.0.0.1:${server.port}/hang` }));
  // the fetch gives up at the deadline: the guest gets an error reply, or (if it then polls) the
  // chain's Interrupted; either way the worker is not stuck
  if (o.status === 'ok') t.match(o.result, /^error: /, 'an error reply');
  else t.match(o, { status: 'trapped', trap: { name: 'Interrupted' } });
  t.ok(o.info!.ms < bound, `long before the 600 s of its own timeout (${o.info!.ms} ms; bound ${bound})`);
  t.equal(rt.stats().workersReplaced, 0);
});

t.test('limits refuse with a typed error naming the limit and its value', async (t) => {
  const rt = await runtime({ limits: { concurrency: 1, queueDepth: 1, timeoutMs: 1500 } });
  t.teardown(() => rt.close());
  const spinning = rt.invoke('qg', 'spin', '{}');
  const queued = rt.invoke('qg', 'echo', '{"q":1}');
  const r = await rt.invoke('qg', 'echo', '{"q":2}');
  t.equal(r.status, 'refused');
  if (r.status === 'refused') {
    t.ok(r.error instanceof LimitError);
    t.equal(r.error.limit, 'queueDepth');
    t.equal(r.error.value, 1);
    t.match(r.error.message, /refused by limit queueDepth = 1/);
  }
  t.equal((await spinning).status, 'trapped');
  t.equal(text(await queued), '{"q":1}', 'the queued call ran once the worker was free');

  const rate = await runtime({ limits: { harnessRate: 1, harnessBurst: 2 } });
  t.teardown(() => rate.close());
  const a = await Promise.all([
    rate.invoke('qg', 'echo', '{}'),
    rate.invoke('qg', 'echo', '{}'),
    rate.invoke('qg', 'echo', '{}'),
  ]);
  t.same(
    a.map((o) => o.status),
    ['ok', 'ok', 'refused'],
  );
  t.match(a[2], { error: { limit: 'harnessRate', value: 1 } });
});

t.test('overrun skip: an occurrence due while the previous one runs is journaled as skipped', async (t) => {
  // two occurrences of one harness at once: with one (the default on 2 workers) the second waits
  // for the harness's concurrency and runs after the first instead of overrunning it
  const rt = await runtime({ limits: { timeoutMs: 1500, harnessConcurrency: 2 } });
  t.teardown(() => rt.close());
  const started = new Promise((resolve) => rt.once('wake', resolve));
  const recs = records(rt, 2, (r) => r.wake === 'x');
  rt.arm({ harness: 'qg', id: 'x', payload: 'spin' });
  await started;
  rt.arm({ harness: 'qg', id: 'x', payload: 'second' });
  const [skip, spun] = await recs;
  t.match(skip, { trigger: 'skip', wake: 'x', outcome: 'refused', detail: /overrun = skip/ });
  t.match(spun, { trigger: 'wake', wake: 'x', outcome: 'trapped' });
  t.equal(rt.stats().overrunSkips, 1);
});

/** A wake of `harness` due at `when` (ms), armed at `armedAt`, its payload its id: what store.dues.armMany takes. */
function wakeSpec(id: string, harness: string, when: number, armedAt: number) {
  return {
    id,
    kind: 'wake' as const,
    harness,
    entry: 'on_wake',
    when,
    payload: id,
    armedBy: 'test',
    chain: null,
    depth: 0,
    armedAt,
  };
}

t.test(
  'at-least-once: a claimed wake whose outcome was never journaled re-fires with attempt 2; overdue wakes fire once',
  async (t) => {
    const state = path.join(tmp, `s${n++}`);
    const store = SqliteStore.open(state);
    const now = Date.now();
    store.dues.armMany([
      wakeSpec('claimed', 'qg', now - 10_000, now),
      wakeSpec('overdue', 'qg', now - 5_000, now),
      wakeSpec('future', 'qg', now + 60_000, now),
    ]);
    const c = store.dues.claim(store.dues.get('claimed')!.seq);
    t.equal(c!.attempt, 1, 'first delivery claimed (as by a process killed before journaling)');
    store.close();
    const rt = await BermRuntime.create({ state, poolSize: 2, cacheDir: TEST_CACHE });
    t.teardown(() => rt.close());
    t.equal(rt.stats().wakesPending, 2, 'reloaded without running a guest');
    const recs = records(rt, 2, (r) => r.trigger === 'wake');
    await rt.deploy('qg', QG, { capabilities: ['schedule'] });
    rt.start();
    const got = (await recs).sort((a, b) => a.wake!.localeCompare(b.wake!));
    t.match(got[0], { wake: 'claimed', attempt: 2, outcome: 'ok', scheduledAt: now - 10_000 });
    t.match(got[1], { wake: 'overdue', attempt: 1, outcome: 'ok', scheduledAt: now - 5_000 });
    t.ok(got[1]!.start - got[1]!.scheduledAt! >= 5_000, 'carries scheduled_at and the later now');
    t.equal(rt.stats().redeliveries, 1);
    t.same(
      rt.list().map((w) => w.id),
      ['future'],
    );
  },
);

t.test('due wakes held back by a rate limit: the drain sleeps until a token frees', async (t) => {
  // one token every 5 s: after the first wake, every due wake waits for the next token (the checks
  // below take the first wake's run and 1 s more: 5 s leaves room on a loaded machine)
  // the real SQLite store, its claims counted: each drain that looks at the held wakes claims
  // and releases them
  const store = SqliteStore.open(path.join(tmp, `s${n++}`));
  const claim = store.dues.claim.bind(store.dues);
  let claims = 0;
  store.dues.claim = (seq) => {
    claims++;
    return claim(seq);
  };
  const rt = await runtime({ store, poolSize: 1, limits: { harnessRate: 0.2, harnessBurst: 1 } });
  t.teardown(() => rt.close());
  /** CPU time of this process (every thread) over `ms`, as a share of one core */
  const cpuShare = async (ms: number): Promise<number> => {
    const cpu0 = process.cpuUsage();
    const wall0 = performance.now();
    await new Promise((r) => setTimeout(r, ms));
    const cpu = process.cpuUsage(cpu0);
    return (cpu.user + cpu.system) / 1000 / (performance.now() - wall0);
  };
  // the worker starts (and may optimise the guest in the background) first: wait until idle
  for (let i = 0; i < 40 && (await cpuShare(250)) > 0.1; i++);
  const first = records(rt, 1, (r) => r.trigger === 'wake');
  for (let i = 0; i < 5; i++) rt.arm({ harness: 'qg', id: `r${i}`, payload: `r${i}` });
  const [one] = await first;
  t.equal(one!.outcome, 'ok');
  const second = records(rt, 1, (r) => r.trigger === 'wake');
  // this process's CPU time over ~1 s while four wakes are due and none may start. The claim
  // count is the precise check (a drain re-armed on zero-delay timers claims the held wakes
  // hundreds of times a second, yet measured only ~21 % of a core here); the CPU bound is loose
  // because every thread counts, the worker's background optimiser included, on a shared machine
  const claimsBefore = claims;
  const share = await cpuShare(1000);
  t.ok(claims - claimsBefore <= 8, `${claims - claimsBefore} claims of held wakes in 1 s`);
  t.ok(share < 0.9, `CPU ${(share * 100).toFixed(1)} % of one core while every due wake waits`);
  t.equal(rt.stats().wakesPending, 4, 'the held wakes are still pending');
  // ...and the sleep ends when the token frees (5 s after the first, within a loaded machine's slack)
  const alive = setInterval(() => {}, 100); // the wake timer is unref'd: keep the test process up
  const [two] = await second;
  clearInterval(alive);
  t.equal(two!.outcome, 'ok');
  t.ok(two!.start - one!.start >= 4500, `the second ran ${two!.start - one!.start} ms after the first`);
});

t.test('a wake held by its harness limit does not delay a later wake of another harness', async (t) => {
  // qg gets one token every 5 s; qg2 (the same image) has its own bucket
  const rt = await runtime({ poolSize: 1, limits: { harnessRate: 0.2, harnessBurst: 1 } });
  t.teardown(() => rt.close());
  await rt.deploy('qg2', QG, { capabilities: ['schedule'] });
  const later = rt.arm({ harness: 'qg2', id: 'later', delayMs: 800, payload: 'later' });
  const fired = records(rt, 1, (r) => r.wake === 'later');
  // armed last, so the drain that holds h1 back already knows of the later wake
  rt.arm({ harness: 'qg', id: 'h0', payload: 'h0' });
  rt.arm({ harness: 'qg', id: 'h1', payload: 'h1' });
  const alive = setInterval(() => {}, 100); // the wake timer is unref'd: keep the test process up
  const [rec] = await fired;
  clearInterval(alive);
  t.equal(rec!.outcome, 'ok');
  const late = rec!.start - later.when;
  t.ok(late < 3000, `the later wake ran ${late} ms after its due instant (qg's next token: 5 s)`);
  t.equal(
    rt
      .list()
      .map((w) => w.id)
      .join(','),
    'h1',
    'h1 still waits for its token',
  );
});

t.test('50 due wakes of a rate-limited harness do not hold back a later due wake of another', async (t) => {
  // the SQLite store: qg's 50 wakes are due first, qg2's one after them. qg gets 20 tokens a
  // second (burst 1), so its wakes run one by one over ~2.5 s; qg2's wake must not wait for them.
  const state = path.join(tmp, `s${n++}`);
  const store = SqliteStore.open(state);
  const now = Date.now();
  const held = Array.from({ length: 50 }, (_, i) => wakeSpec(`a${i}`, 'qg', now - 10_000 + i, now));
  store.dues.armMany([...held, wakeSpec('other', 'qg2', now - 5_000, now)]);
  store.close();
  const rt = await BermRuntime.create({
    state,
    poolSize: 2,
    cacheDir: TEST_CACHE,
    limits: { timeoutMs: 5000, graceMs: 1000, harnessRate: 20, harnessBurst: 1 },
  });
  t.teardown(() => rt.close());
  await rt.deploy('qg', QG, { capabilities: ['schedule'] });
  await rt.deploy('qg2', QG, { capabilities: ['schedule'] });
  // both workers up and idle first: a worker still starting is not a free one, and while only one
  // is free each drain that finds a qg token rightly starts qg's earlier wake (under load qg2's
  // started 4th when the second worker came up late)
  await until('both workers idle', async () => rt.stats().idleWorkers === 2, 120_000, 50);
  const all = records(rt, 51, (r) => r.trigger === 'wake');
  const t0 = Date.now();
  rt.start();
  const alive = setInterval(() => {}, 100); // the wake timer is unref'd: keep the test process up
  const got = await all;
  clearInterval(alive);
  // the records come as invocations finish: in start order (a tie keeps finishing order), since a
  // quick qg wake started after qg2's first one (which makes qg2's instance) can finish before it
  const order = [...got].sort((a, b) => a.start - b.start).map((r) => r.wake);
  const pos = order.indexOf('other');
  // once qg is out of tokens, the drain sets its wakes aside and reaches qg2's: among the first
  // few to start (it ran after ~35 of qg's before: each drain put the same 16 back first)
  t.ok(pos >= 0 && pos < 5, `qg2's wake started as number ${pos + 1} of 51`);
  const other = got.find((r) => r.wake === 'other')!;
  t.ok(other.start - t0 < 10_000, `qg2's wake started ${other.start - t0} ms after start (bound 10 s)`);
  t.equal(other.outcome, 'ok');
  // every held wake ran once, none lost or run twice (the journal on disk, in finishing order)
  const journal = readJournal(path.join(state, 'journal.jsonl')).filter((r) => r.trigger === 'wake');
  const ids = journal.map((r) => r.wake!).filter((w) => w !== 'other');
  t.same(ids.sort(), held.map((w) => w.id).sort(), 'the 50 held wakes, each once');
  t.ok(
    journal.every((r) => r.outcome === 'ok' && r.attempt === 1),
    'all ok at their first attempt',
  );
  t.equal(rt.stats().wakesPending, 0);
  t.same(rt.list(), []);
});

t.test('the spill log line names the rate limit that held due wakes, not a full pool', async (t) => {
  // 1500 wakes of one harness falling due at one instant, one token per 10 s: the pool has room,
  // the rate limit holds them (a drain sets at most 512 aside, the rest are left due: a spill)
  const lines: string[] = [];
  // (both workers open to the harness: its concurrency limit, by default one below the pool, would
  // hold the due wakes before the rate does)
  const rt = await runtime({
    poolSize: 2,
    limits: { harnessRate: 0.1, harnessBurst: 1, harnessConcurrency: 2 },
    log: (l) => lines.push(l),
  });
  t.teardown(() => rt.close());
  // the workers are up once a call has run on each
  await Promise.all([rt.invoke('qg', 'echo', '{}'), rt.invoke('qg', 'echo', '{}')]);
  const spills: number[] = [];
  rt.on('spill', (s: { count: number }) => spills.push(s.count));
  const at = Date.now() + 1500;
  for (let i = 0; i < 1500; i++) rt.arm({ harness: 'qg', id: `r${i}`, payload: `r${i}`, at });
  const alive = setInterval(() => {}, 100); // the wake timer is unref'd: keep the test process up
  const t0 = Date.now();
  while (!lines.some((l) => l.includes('spilled')) && Date.now() - t0 < 15_000) {
    await new Promise((r) => setTimeout(r, 50));
  }
  clearInterval(alive);
  const spill = lines.find((l) => l.includes('spilled'));
  t.ok(spill, `a spill line was logged: ${JSON.stringify(lines)}`);
  t.match(
    spill,
    /spilled \d+ due wakes to the next drain \(held by per-harness limits: qg \(harnessRate\)\)/,
  );
  t.notMatch(spill, /pool full/);
  // the first drain that finds the 1500 due counts what it leaves behind: at most 512 set aside and
  // one started (the burst's token), so at least 987, however late that drain runs (a drain a
  // millisecond early, that found none due, once kept it from counting them: only the 476 still
  // left at the next token, 10 s later, were counted)
  t.ok(spills[0]! >= 1500 - 512 - 1, `the first drain that left wakes behind counted ${spills[0]}`);
});

// berm's protocol endpoint (the agent-daemon side of the door) and the harness event bus, over
// real sockets with the door's own client speaking as the agent daemon would: schedule, cancel and
// list wakes, subscribe harnesses, publish, refusals; subscriptions persist across a reopen of
// their SQLite file; the endpoint refuses non-loopback addresses and creates its socket 0600.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import t from 'tap';
import {
  AgentClient,
  decodeServer,
  encodeClient,
  encodeServer,
  frame,
  parseEndpoint,
  type Envelope,
  type Plain,
  type WakeView,
} from '../src/protocol/index.js';
import { HarnessEventBus, targetHarness } from '../src/protocol/events.js';
import { MAX_ENDPOINT_CONNECTIONS, ProtocolServer, type ServerWakes } from '../src/protocol/server.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-endpoint-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A due-set stand-in recording what the endpoint asks (the queue's own is tested with the queue). */
class Wakes implements ServerWakes {
  readonly pending = new Map<string, WakeView>();
  private n = 0;
  arm(w: { harness: string; entry: string; atMs: number; payload: string; id?: string }) {
    if (w.harness === 'ghost') return { refused: 'no harness named ghost is deployed' };
    const v = {
      id: w.id ?? `w${++this.n}`,
      harness: w.harness,
      entry: w.entry,
      at_ms: w.atMs,
      payload: w.payload,
    };
    this.pending.set(v.id, v);
    return v;
  }
  cancel(id: string) {
    return this.pending.delete(id);
  }
  list(harness?: string) {
    const wakes = [...this.pending.values()].filter((w) => harness === undefined || w.harness === harness);
    return { wakes, truncated: false };
  }
}

t.test('the event bus: persisted harness subscriptions, exact-source delivery, once, refusals', async (t) => {
  const db = path.join(dir, 'subs.sqlite');
  const delivered: { harness: string; record: Plain; chain?: unknown }[] = [];
  const refusals: string[] = [];
  const bus = new HarnessEventBus({
    database: db,
    deliver: async (harness, record, ctx) => {
      delivered.push({ harness, record, ...(ctx.chain !== undefined ? { chain: ctx.chain } : {}) });
      return harness === 'deep' ? { refused: 'chain depth 5 exceeds the limit of 4' } : {};
    },
    onRefused: (h, s, why) => refusals.push(`${h} ${s} ${why}`),
    maxPerHarness: 3,
  });
  const a = bus.subscribe('remind', 'agent:assistant:done', false, { agent: 'A' });
  bus.subscribe('remind', 'tick', true);
  bus.subscribe('deep', 'agent:assistant:done', false);
  t.same(HarnessEventBus.view(a), {
    id: a.id,
    source: 'agent:assistant:done',
    target_agent: 'harness:remind',
    once: false,
  });
  t.equal(bus.publish('agent:assistant:done', 'p1', { chain: 'C1' }), 2);
  t.equal(bus.publish('agent:assistant', 'no prefix match'), 0, 'sources match exactly');
  t.equal(bus.publish('tick', 'once'), 1);
  t.equal(bus.publish('tick', 'again'), 0, 'a once subscription is gone after its delivery');
  await new Promise((r) => setImmediate(r));
  t.same(
    delivered.map((d) => [d.harness, d.record.source, d.record.payload, d.chain ?? null]),
    [
      ['remind', 'agent:assistant:done', 'p1', 'C1'],
      ['deep', 'agent:assistant:done', 'p1', 'C1'],
      ['remind', 'tick', 'once', null],
    ],
  );
  t.same(refusals, ['deep agent:assistant:done chain depth 5 exceeds the limit of 4']);
  t.same(bus.counts, { delivered: 3, refused: 1 });
  bus.subscribe('remind', 'x', false);
  bus.subscribe('remind', 'y', false);
  t.throws(() => bus.subscribe('remind', 'z', false), /harness remind holds 3 subscriptions; the limit is 3/);
  t.throws(() => bus.subscribe('other', '', false), /source must be 1..1024 characters/);
  t.notOk(bus.unsubscribe(a.id, 'deep'), 'a harness removes only its own');
  t.ok(bus.unsubscribe(a.id, 'remind'));
  bus.close();
  const again = new HarnessEventBus({ database: db, deliver: async () => ({}) });
  t.same(
    again.list().map((s) => [s.harness, s.source, s.once]),
    [
      ['deep', 'agent:assistant:done', false],
      ['remind', 'x', false],
      ['remind', 'y', false],
    ],
    'subscriptions survive a reopen',
  );
  again.close();
  t.equal(targetHarness('harness:remind'), 'remind');
  t.equal(targetHarness('01JD3R7WQ4K8N5V2X9T6B1C0MZ'), null);
  t.equal(targetHarness('harness:../x'), null);
});

t.test('the endpoint over a Unix socket: schedule, cancel, list, events, refusals', async (t) => {
  const wakes = new Wakes();
  const delivered: string[] = [];
  const bus = new HarnessEventBus({
    database: ':memory:',
    deliver: async (h, r) => {
      delivered.push(`${h}:${r.source}:${r.payload}`);
      return {};
    },
  });
  const lines: string[] = [];
  const sock = path.join(dir, 'bermd-protocol.sock');
  const server = await ProtocolServer.listen({
    endpoint: `unix:${sock}`,
    wakes,
    events: bus,
    log: (l) => lines.push(l),
    now: () => 1_000_000,
  });
  t.teardown(async () => {
    await server.close();
    bus.close();
  });
  t.equal(fs.statSync(sock).mode & 0o777, 0o600, 'the socket is private to its owner');
  const c = new AgentClient(parseEndpoint(server.endpoint));
  t.teardown(() => c.close());
  const ask = async (member: string, body: unknown): Promise<Envelope> =>
    decodeServer((await c.call(encodeClient(member, body), { timeoutMs: 5_000 }))[0]!);

  // "foo tomorrow at 08:00": the client resolves the instant and names the harness and entry
  const tomorrow8 = Date.UTC(2026, 11, 2, 8, 0, 0);
  const w = await ask('berm', { schedule_wake: { at_ms: tomorrow8, harness: 'remind', payload: 'foo' } });
  t.same(w.berm, {
    msg: 'wake',
    wake: { id: 'w1', harness: 'remind', entry: 'on_wake', at_ms: String(tomorrow8), payload: 'foo' },
  });
  const rel = await ask('berm', {
    schedule_wake: {
      delay_ms: 5000,
      harness: 'remind',
      entry: 'remind',
      payload: '{"text":"x"}',
      id: 'mine',
    },
  });
  t.match(
    rel.berm,
    { wake: { id: 'mine', entry: 'remind', at_ms: '1005000' } },
    'relative, and a tool as the entry',
  );
  t.match(await ask('berm', { schedule_wake: { harness: 'ghost' } }), {
    msg: 'error',
    error: { code: 422, message: /no harness named ghost/ },
  });
  t.match(await ask('berm', { schedule_wake: { payload: 'x' } }), {
    error: { code: 400, message: /harness is required/ },
  });
  const list = await ask('berm', { list_wakes: {} });
  t.same(
    ((list.berm as Plain).wake_list as { wakes: Plain[] }).wakes.map((x) => x.id),
    ['w1', 'mine'],
  );
  t.same((await ask('berm', { cancel_wake: { id: 'w1' } })).berm, {
    msg: 'cancelled',
    cancelled: { id: 'w1', cancelled: true },
  });
  const again = (await ask('berm', { cancel_wake: { id: 'w1' } })).berm as { cancelled: Plain };
  t.equal(again.cancelled.id, 'w1');
  t.notOk(again.cancelled.cancelled, 'nothing left to cancel');

  const sub = await ask('subscribe_event', {
    source: 'agent:assistant:done',
    target_agent: 'harness:remind',
  });
  t.match(sub.subscription_info, { source: 'agent:assistant:done', target_agent: 'harness:remind' });
  t.match(await ask('subscribe_event', { source: 's', target_agent: '01JD3R7WQ4K8N5V2X9T6B1C0MZ' }), {
    error: { code: 400, message: /subscribes harnesses \(target_agent "harness:<name>"\)/ },
  });
  t.equal((await ask('publish_event', { source: 'agent:assistant:done', payload: 'done!' })).msg, 'pong');
  await new Promise((r) => setImmediate(r));
  t.same(delivered, ['remind:agent:assistant:done:done!']);
  const subs = await ask('list_subscriptions', {});
  t.equal((subs.subscription_list as { subscriptions: Plain[] }).subscriptions.length, 1);
  t.equal((await ask('unsubscribe_event', { id: (sub.subscription_info as Plain).id })).msg, 'pong');
  t.match(await ask('unsubscribe_event', { id: 99 }), { error: { code: 404 } });
  t.match(await ask('send', { content: 'x' }), {
    error: { code: 501, message: /send is the agent daemon's/ },
  });
  t.equal((await ask('ping', {})).msg, 'pong');
  const raw = await c.call(new Uint8Array(0), { timeoutMs: 5_000 });
  t.match(decodeServer(raw[0]!), { error: { code: 400, message: 'empty client message' } });
  t.ok(lines.some((l) => l === 'protocol endpoint: schedule_wake ok'));
});

t.test('the endpoint listens on loopback or a Unix socket only', async (t) => {
  const wakes = new Wakes();
  await t.rejects(ProtocolServer.listen({ endpoint: '0.0.0.0:0', wakes }), /Unix socket or loopback only/);
  const s = await ProtocolServer.listen({ endpoint: '127.0.0.1:0', wakes });
  t.match(s.endpoint, /^127\.0\.0\.1:\d+$/);
  const c = new AgentClient(parseEndpoint(s.endpoint));
  t.equal(decodeServer((await c.call(encodeClient('ping', {}), { timeoutMs: 5_000 }))[0]!).msg, 'pong');
  c.close();
  await s.close();
});

t.test('a once subscription outlives a refused delivery and is taken by the accepted one', async (t) => {
  // the queue refuses the first delivery (full), accepts the second; a third stays pending
  const db = path.join(dir, 'once.sqlite');
  const answers: ((r: { refused?: string }) => void)[] = [];
  const refusals: string[] = [];
  const bus = new HarnessEventBus({
    database: db,
    deliver: () => new Promise((resolve) => answers.push(resolve)),
    onRefused: (h, s, why) => refusals.push(`${h} ${s} ${why}`),
  });
  const sub = bus.subscribe('remind', 'tick', true);
  t.equal(bus.publish('tick', 'first'), 1);
  t.equal(bus.publish('tick', 'while pending'), 0, 'a pending once delivery takes no other');
  answers.shift()!({ refused: 'the queue holds 10000 invocations' });
  await new Promise((r) => setImmediate(r));
  t.same(refusals, ['remind tick the queue holds 10000 invocations']);
  t.same(
    bus.list().map((s) => s.id),
    [sub.id],
    'the refused delivery did not take the subscription with it (it was removed before the enqueue)',
  );
  t.equal(bus.publish('tick', 'second'), 1);
  answers.shift()!({});
  await new Promise((r) => setImmediate(r));
  t.same(bus.list(), [], 'gone once a delivery was accepted');
  t.equal(bus.publish('tick', 'third'), 0);
  // a crash while a delivery is pending keeps the subscription (its enqueue was never written)
  const other = bus.subscribe('remind', 'tock', true);
  t.equal(bus.publish('tock', 'x'), 1);
  bus.close();
  const reopened = new HarnessEventBus({ database: db, deliver: async () => ({}) });
  t.same(
    reopened.list().map((s) => s.id),
    [other.id],
    'still subscribed after the restart',
  );
  answers.shift()!({}); // the old bus's delivery answers after its close: no throw
  await new Promise((r) => setImmediate(r));
  reopened.close();
});

t.test('a peer dripping a 16 MiB frame in 4 KiB writes is read in linear time', async (t) => {
  // A ping padded with an unknown field (number 900, length-delimited) up to just under the 16 MiB
  // frame cap: protobuf decoders skip unknown fields, so the answer is a pong. The reader once
  // joined every chunk received so far on each chunk: 4,096 pieces of 4 KiB copied ~32 GiB and
  // took half a minute of the endpoint's thread before the pong.
  const wakes = new Wakes();
  const s = await ProtocolServer.listen({ endpoint: '127.0.0.1:0', wakes });
  t.teardown(() => s.close());
  const ep = parseEndpoint(s.endpoint) as { host: string; port: number };
  const ping = encodeClient('ping', {});
  const padLen = 16 * 1024 * 1024 - 64;
  const varint = (v: number): number[] => (v < 0x80 ? [v] : [(v & 0x7f) | 0x80, ...varint(v >>> 7)]);
  const tag = Buffer.from(varint((900 << 3) | 2)); // field 900, length-delimited
  const len = varint(padLen);
  const payload = Buffer.concat([Buffer.from(ping), tag, Buffer.from(len), Buffer.alloc(padLen, 0x61)]);
  const head = Buffer.alloc(4);
  head.writeUInt32BE(payload.length);
  const wire = Buffer.concat([head, payload]);
  const sock = net.connect(ep);
  await new Promise((r) => sock.once('connect', r));
  sock.setNoDelay(true);
  const answer = new Promise<Buffer>((resolve) => {
    let got = Buffer.alloc(0);
    sock.on('data', (d: Buffer) => {
      got = Buffer.concat([got, d]);
      if (got.length >= 4 && got.length >= 4 + got.readUInt32BE(0)) resolve(got.subarray(4));
    });
  });
  const t0 = Date.now();
  for (let off = 0; off < wire.length; off += 4096) {
    // one write per turn of the event loop, so the endpoint reads the frame in small pieces
    if (!sock.write(wire.subarray(off, off + 4096))) await new Promise((r) => sock.once('drain', r));
    await new Promise((r) => setImmediate(r));
  }
  const reply = await Promise.race([
    answer,
    new Promise<null>((r) => setTimeout(() => r(null), 15_000).unref()),
  ]);
  const took = Date.now() - t0;
  sock.destroy();
  t.ok(reply, `the endpoint answered the dripped frame (${took} ms)`);
  if (reply) t.equal(decodeServer(reply).msg, 'pong', 'the padded ping is answered with a pong');
  t.ok(took < 10_000, `read in ${took} ms (linear: a few seconds at most on a loaded machine)`);
});

t.test(
  'list_wakes larger than a frame lists the earliest that fit, truncated, and the endpoint lives',
  async (t) => {
    // 300 wakes of 60,000-byte payloads (the due-set allows 64 KiB each and lists up to 1,000) are
    // ~18 MB: framing the list threw inside the reply chain, an unhandled rejection that ended bermd
    const wakes = new Wakes();
    const payload = 'p'.repeat(60_000);
    for (let i = 0; i < 300; i++) {
      wakes.arm({ harness: 'big', entry: 'on_wake', atMs: 1_000_000 + i, payload, id: `w${i}` });
    }
    const s = await ProtocolServer.listen({ endpoint: '127.0.0.1:0', wakes });
    t.teardown(() => s.close());
    const c = new AgentClient(parseEndpoint(s.endpoint));
    t.teardown(() => c.close());
    const [raw] = await c.call(encodeClient('berm', { list_wakes: {} }), { timeoutMs: 10_000 });
    t.ok(raw!.length <= 16 * 1024 * 1024, `the answer fits a frame (${raw!.length} bytes)`);
    const list = (decodeServer(raw!).berm as Plain).wake_list as { wakes: WakeView[]; truncated?: boolean };
    // each WakeInfo is ~60,030 bytes: 279 of them fit in 16,777,216 bytes
    const fit = Math.floor((16 * 1024 * 1024 - 64) / (60_000 + 3 + 6 + 2 + 9 + 2 + 3 + 4 + 3));
    t.ok(list.wakes.length >= fit - 2 && list.wakes.length < 300, `${list.wakes.length} wakes listed`);
    t.same(
      list.wakes.map((w) => w.id),
      Array.from({ length: list.wakes.length }, (_, i) => `w${i}`),
      'the earliest ones, in order',
    );
    t.equal(list.truncated, true, 'marked truncated');
    const small = decodeServer(
      (await c.call(encodeClient('berm', { list_wakes: { harness: 'none' } }), { timeoutMs: 5_000 }))[0]!,
    );
    t.same((small.berm as Plain).wake_list, {}, 'a list that fits is whole (truncated unset)');
    t.equal(decodeServer((await c.call(encodeClient('ping', {}), { timeoutMs: 5_000 }))[0]!).msg, 'pong');
  },
);

t.test('a peer that pipelines requests and reads no answer is not read either', async (t) => {
  const wakes = new Wakes();
  const payload = 'p'.repeat(60_000);
  wakes.arm({ harness: 'big', entry: 'on_wake', atMs: 1_000_000, payload, id: 'big' });
  const lines: string[] = [];
  const s = await ProtocolServer.listen({ endpoint: '127.0.0.1:0', wakes, log: (l) => lines.push(l) });
  t.teardown(() => s.close());
  const port = Number(s.endpoint.split(':').pop());
  const ping = Buffer.from(frame(encodeClient('ping', {})));
  const pong = Buffer.from(frame(encodeServer('pong', {})));

  // pipelined requests are all answered, in order, once the peer reads
  const c = net.connect({ host: '127.0.0.1', port });
  await new Promise((r) => c.once('connect', r));
  let got = Buffer.alloc(0);
  const all = new Promise<void>((resolve) =>
    c.on('data', (d: Buffer) => {
      got = Buffer.concat([got, d]);
      if (got.length >= 1000 * pong.length) resolve();
    }),
  );
  c.write(Buffer.concat(Array.from({ length: 1000 }, () => ping)));
  await all;
  t.ok(got.equals(Buffer.concat(Array.from({ length: 1000 }, () => pong))), '1,000 pongs for 1,000 pings');
  c.destroy();

  // 5,000 list_wakes in one 45 KB write, and no answer read: each answer is ~60 KB, so answering
  // them all queued ~300 MB in the endpoint; now it stops once the socket's buffers are full
  lines.length = 0;
  const greedy = net.connect({ host: '127.0.0.1', port });
  await new Promise((r) => greedy.once('connect', r));
  greedy.pause();
  const list = Buffer.from(frame(encodeClient('berm', { list_wakes: {} })));
  greedy.write(Buffer.concat(Array.from({ length: 5000 }, () => list)));
  await new Promise((r) => setTimeout(r, 3_000));
  const answered = lines.filter((l) => l === 'protocol endpoint: list_wakes ok').length;
  t.ok(answered < 1000, `${answered} of 5,000 answered while the peer reads none`);
  // another connection is served meanwhile
  const other = new AgentClient(parseEndpoint(s.endpoint));
  t.equal(decodeServer((await other.call(encodeClient('ping', {}), { timeoutMs: 5_000 }))[0]!).msg, 'pong');
  const one = (await other.call(encodeClient('berm', { list_wakes: {} }), { timeoutMs: 5_000 }))[0]!;
  other.close();
  // once the peer reads, the rest is answered (5,000 frames of the same answer)
  const expected = 5000 * (4 + one.length);
  let bytes = 0;
  const done = new Promise<void>((resolve) =>
    greedy.on('data', (d: Buffer) => {
      bytes += d.length;
      if (bytes >= expected) resolve();
    }),
  );
  greedy.resume();
  await done;
  t.equal(bytes, expected, 'all 5,000 answers arrive once the peer reads');
  greedy.destroy();
});

t.test('the endpoint removes a stale socket only: a file or a live socket at its path is kept', async (t) => {
  const wakes = new Wakes();
  // a mistyped path naming a file: once deleted without a word
  const file = path.join(dir, 'harnesses.toml');
  fs.writeFileSync(file, '[[harnesses]]\n');
  await t.rejects(
    ProtocolServer.listen({ endpoint: `unix:${file}`, wakes }),
    /harnesses\.toml exists and is not a socket \(refused, not deleted\)/,
  );
  t.equal(fs.readFileSync(file, 'utf8'), '[[harnesses]]\n', 'the file is intact');
  // a socket another process accepts on
  const sock = path.join(dir, 'live.sock');
  const first = await ProtocolServer.listen({ endpoint: `unix:${sock}`, wakes });
  await t.rejects(ProtocolServer.listen({ endpoint: `unix:${sock}`, wakes }), /live\.sock is in use/);
  const c = new AgentClient(parseEndpoint(`unix:${sock}`));
  t.equal(decodeServer((await c.call(encodeClient('ping', {}), { timeoutMs: 5_000 }))[0]!).msg, 'pong');
  c.close();
  await first.close();
  // a socket left by a process that died (SIGKILL: nothing unlinked it) is taken over
  const stale = path.join(dir, 'stale.sock');
  const dead = spawn(
    process.execPath,
    ['-e', `require('net').createServer().listen(process.argv[1], () => console.log('up'))`, stale],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  );
  await new Promise((r) => dead.stdout.once('data', r));
  dead.kill('SIGKILL');
  await new Promise((r) => dead.once('exit', r));
  t.ok(fs.lstatSync(stale).isSocket(), 'the dead process left its socket');
  const again = await ProtocolServer.listen({ endpoint: `unix:${stale}`, wakes });
  const c2 = new AgentClient(parseEndpoint(`unix:${stale}`));
  t.equal(decodeServer((await c2.call(encodeClient('ping', {}), { timeoutMs: 5_000 }))[0]!).msg, 'pong');
  c2.close();
  await again.close();
});

t.test('the Unix socket is never at its path with the umask’s permissions', async (t) => {
  // it was bound at the path with the process umask's mode and chmod-ed to 0600 only in the listen
  // callback: under umask 0 a local user who connected in between kept a connection that may
  // schedule any harness. The path is watched at every turn of the microtask queue (the bind and
  // the callback run in different turns) and by polling until the listen settles.
  const wakes = new Wakes();
  const sock = path.join(dir, 'private.sock');
  const old = process.umask(0);
  t.teardown(() => void process.umask(old));
  const seen = new Set<number>();
  let settled = false;
  const look = (): void => {
    try {
      seen.add(fs.lstatSync(sock).mode & 0o777);
    } catch {
      // not there yet
    }
  };
  let turns = 0;
  const micro = (): void => {
    look();
    if (!settled && ++turns < 10_000) queueMicrotask(micro);
  };
  const listening = ProtocolServer.listen({ endpoint: `unix:${sock}`, wakes }).finally(() => {
    settled = true;
  });
  queueMicrotask(micro);
  const poll = setInterval(look, 0);
  const s = await listening;
  clearInterval(poll);
  process.umask(old);
  look();
  t.same([...seen], [0o600], 'only ever 0600 at the path');
  const c = new AgentClient(parseEndpoint(s.endpoint));
  t.equal(decodeServer((await c.call(encodeClient('ping', {}), { timeoutMs: 5_000 }))[0]!).msg, 'pong');
  c.close();
  t.equal(s.endpoint, `unix:${sock}`);
  t.same(
    fs.readdirSync(dir).filter((n) => n.startsWith('.berm')),
    [],
    'no private directory is left beside it',
  );
  await s.close();
  t.throws(() => fs.lstatSync(sock), { code: 'ENOENT' }, 'closing removes the socket');
  // a path longer than a socket address holds (108 bytes with its NUL) was bound cut short, at
  // another name, and the chmod of the path given then threw from the listen callback
  const deep = path.join(dir, 'd'.repeat(120 - dir.length));
  fs.mkdirSync(deep);
  const long = path.join(deep, 'a.sock');
  await t.rejects(
    ProtocolServer.listen({ endpoint: `unix:${long}`, wakes }),
    new RegExp(`a Unix socket path has at most 107 bytes, this one ${Buffer.byteLength(long)}`),
  );
  t.same(fs.readdirSync(deep), [], 'nothing bound under another name');
  // 107 bytes exactly: bound beside it within the limit
  const fits = path.join(dir, 'f'.repeat(107 - dir.length - 'a.sock'.length - 2));
  fs.mkdirSync(fits);
  const edge = path.join(fits, 'a.sock');
  t.equal(Buffer.byteLength(edge), 107);
  const e = await ProtocolServer.listen({ endpoint: `unix:${edge}`, wakes });
  t.equal(fs.lstatSync(edge).mode & 0o777, 0o600);
  await e.close();
  t.same(fs.readdirSync(fits), [], 'nothing left beside it');
});

t.test('connections beyond the bound are closed as they arrive; the held ones are served', async (t) => {
  // a peer that opens connections and keeps them once held one descriptor each, without bound
  const wakes = new Wakes();
  const s = await ProtocolServer.listen({ endpoint: '127.0.0.1:0', wakes });
  t.teardown(() => s.close());
  const port = Number(s.endpoint.split(':').pop());
  const held: net.Socket[] = [];
  t.teardown(() => held.forEach((c) => c.destroy()));
  const closedEarly: number[] = [];
  for (let i = 0; i < 100; i++) {
    const c = net.connect({ host: '127.0.0.1', port });
    c.on('error', () => undefined);
    c.once('close', () => closedEarly.push(i));
    held.push(c);
  }
  await new Promise((r) => setTimeout(r, 1_000));
  t.equal(
    closedEarly.length,
    100 - MAX_ENDPOINT_CONNECTIONS,
    `${closedEarly.length} of 100 closed by the endpoint`,
  );
  const open = held.filter((c) => !c.destroyed && c.readyState === 'open');
  t.equal(open.length, MAX_ENDPOINT_CONNECTIONS);
  // one of the held connections is answered
  const ping = Buffer.from(frame(encodeClient('ping', {})));
  const answer = new Promise<Buffer>((r) => open[0]!.once('data', (d: Buffer) => r(d)));
  open[0]!.write(ping);
  t.equal(decodeServer((await answer).subarray(4)).msg, 'pong');
  // once the held ones go, new connections are served again
  held.forEach((c) => c.destroy());
  await new Promise((r) => setTimeout(r, 200));
  const c = new AgentClient(parseEndpoint(s.endpoint));
  t.equal(decodeServer((await c.call(encodeClient('ping', {}), { timeoutMs: 5_000 }))[0]!).msg, 'pong');
  c.close();
});

// WebSocket connections as a trigger (src/capabilities/ws, src/runtime/connections.ts), against a
// real `ws` WebSocketServer this test starts on loopback. The guest is the SDK example
// guest-sdk/examples/wsecho (examples/wsecho.elf): it dials, echoes each frame back, counts frames
// in its keys (berm.get/berm.set) across invocations, checks decimal frames arrive in order, and
// closes on "bye". The event framing checked here is the reference's: fields (event, decimal id,
// body), the tool named at the dial receiving them as raw argument bytes.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import { createServer as createHttps } from 'node:https';
import { createServer as createNetServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import t from 'tap';
import { WebSocketServer, type WebSocket } from 'ws';
import { decodeFields } from '../src/wire/fields.js';
import { eventArgs } from '../src/capabilities/ws/events.js';
import { recordsNamespace } from '../src/runtime/connections.js';
import { BermRuntime, type JournalRecord, type Outcome, type RuntimeOptions } from '../src/runtime/index.js';
import { ROOT, TEST_CACHE } from './helpers/fixtures.js';
import { until, sleep } from './helpers/wait.js';

const WSECHO = new Uint8Array(fs.readFileSync(path.join(ROOT, 'examples/wsecho.elf')));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-ws-'));
t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));
let n = 0;

// ------------------------------------------------------------------ the far end

interface Peer {
  path: string;
  socket: WebSocket;
  received: string[];
  closed: { code: number } | null;
}
const peers: Peer[] = [];
const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
const PORT = (wss.address() as AddressInfo).port;
const URL_BASE = `ws://127.0.0.1:${PORT}`;
wss.on('connection', (socket, req) => {
  const p: Peer = { path: req.url ?? '/', socket, received: [], closed: null };
  peers.push(p);
  socket.on('message', (data) => {
    p.received.push(String(data));
    // /burst: once every frame came back, say goodbye
    if (p.path === '/burst' && p.received.length === 1000) socket.send('bye');
  });
  socket.on('close', (code) => (p.closed = { code }));
  if (p.path === '/burst') for (let i = 0; i < 1000; i++) socket.send(String(i));
  if (p.path === '/big') socket.send('x'.repeat(2048));
  if (p.path === '/stream') {
    let i = 0;
    const timer = setInterval(() => socket.readyState === socket.OPEN && socket.send(String(i++)), 2);
    socket.on('close', () => clearInterval(timer));
  }
});
t.teardown(() => {
  for (const c of wss.clients) c.terminate();
  wss.close();
});
const peer = (p: string) => peers.filter((x) => x.path === p);

// ------------------------------------------------------------------ the runtime

async function runtime(opts: Partial<RuntimeOptions> = {}, state = path.join(tmp, `s${n++}`), poolSize = 2) {
  const rt = await BermRuntime.create({
    state,
    poolSize,
    cacheDir: TEST_CACHE,
    ...opts,
    limits: { timeoutMs: 10_000, graceMs: 1000, harnessRate: 100_000, harnessBurst: 100_000, ...opts.limits },
  });
  rt.start();
  return rt;
}

async function deploy(rt: BermRuntime, name: string, hosts: string[] | null = ['127.0.0.1']) {
  await rt.deploy(name, WSECHO, {
    capabilities: ['ws', 'storage'],
    grant: hosts ? { hosts } : {},
  });
}

function ok(o: Outcome): string {
  if (o.status === 'ok') return o.result;
  throw new Error(`expected ok, got ${JSON.stringify(o)}`);
}
function failed(o: Outcome): string {
  if (o.status === 'failed') return o.message;
  throw new Error(`expected failed, got ${JSON.stringify(o)}`);
}

async function dial(rt: BermRuntime, harness: string, url: string): Promise<number> {
  return (
    JSON.parse(ok(await rt.invoke(harness, 'dial', JSON.stringify({ url, harness })))) as { id: number }
  ).id;
}

interface Stats {
  frames: number;
  disorder: number;
  open: string;
  closed: string;
}
async function stats(rt: BermRuntime, harness: string): Promise<Stats> {
  return JSON.parse(ok(await rt.invoke(harness, 'stats', '{}'))) as Stats;
}

// One runtime serves most tests (each with its own harness names), one more the caps: starting a
// runtime and its workers is most of this file's time on a loaded machine.
const shared = await runtime();
t.teardown(() => shared.close());
const capped = await runtime({
  limits: { wsMaxFrameBytes: 1024, wsHarnessConnections: 2, wsConnections: 3, wsQueueFrames: 4 },
});
t.teardown(() => capped.close());

// ------------------------------------------------------------------ tests

t.test('event framing: fields (event, decimal id, body)', async (t) => {
  const f = decodeFields(eventArgs('message', 42, new Uint8Array([0, 255, 1])));
  t.same(
    f.map((x) => [...x]),
    [[...Buffer.from('message')], [...Buffer.from('42')], [0, 255, 1]],
  );
});

t.test('a harness dials, echoes 1,000 frames in order, counts them in its keys, closes', async (t) => {
  const rt = shared;
  await deploy(rt, 'echo');
  const events: JournalRecord[] = [];
  rt.on('invocation', (r: JournalRecord) => r.trigger === 'event' && r.harness === 'echo' && events.push(r));
  const id = await dial(rt, 'echo', `${URL_BASE}/burst`);
  t.equal(id, 0, 'the first id of a process is 0, as the reference numbers them');
  await until(
    'the harness to see its close',
    async () => (await stats(rt, 'echo')).closed !== '',
    240_000, // generous: a loaded 2-core machine may run only ~50 invocations/s
    250,
  );
  const s = await stats(rt, 'echo');
  t.same(s, { frames: 1001, disorder: 0, open: 'ok', closed: 'closed by the harness' });
  const [p] = peer('/burst');
  t.same(
    p!.received,
    Array.from({ length: 1000 }, (_, i) => String(i)),
    'the server got every frame back, in order',
  );
  await until('the server to see the close', async () => p!.closed !== null, 10_000, 50);
  t.equal(p!.closed!.code, 1000, 'closed cleanly by the harness');
  // open + 1,000 frames + bye + close, each its own invocation of trigger event, none failed
  t.equal(events.length, 1003);
  t.ok(events.every((r) => r.outcome === 'ok' && r.entry === 'on_event'));
  // after its close the id answers like one that never existed
  t.equal(
    failed(await rt.invoke('echo', 'send', JSON.stringify({ id, text: 'late' }))),
    `refused: berm.ws.send: no connection ${id} is open`,
  );
});

t.test("a second harness cannot send on or close the first one's connection", async (t) => {
  const rt = shared;
  await deploy(rt, 'a');
  await deploy(rt, 'b');
  const quiet = peer('/quiet').length;
  const id = await dial(rt, 'a', `${URL_BASE}/quiet`);
  await until('a to be open', async () => (await stats(rt, 'a')).open === 'ok', 20_000, 50);
  const fromB = failed(await rt.invoke('b', 'send', JSON.stringify({ id, text: 'intrude' })));
  const closeFromB = failed(await rt.invoke('b', 'close', JSON.stringify({ id })));
  t.equal(ok(await rt.invoke('a', 'send', JSON.stringify({ id, text: 'mine' }))), 'sent');
  const p = peer('/quiet')[quiet];
  await until('the server to get a frame', async () => p!.received.length === 1, 10_000, 50);
  t.same(p!.received, ['mine'], "b's send reached nothing");
  t.equal(p!.closed, null, "b's close closed nothing");
  // the same id once it does not exist (a closed it): exactly the same answers
  t.equal(ok(await rt.invoke('a', 'close', JSON.stringify({ id }))), 'closed');
  await until('a to see its close', async () => (await stats(rt, 'a')).closed !== '', 20_000, 50);
  t.equal(failed(await rt.invoke('a', 'send', JSON.stringify({ id, text: 'x' }))), fromB);
  t.equal(failed(await rt.invoke('a', 'close', JSON.stringify({ id }))), closeFromB);
  t.equal(fromB, `refused: berm.ws.send: no connection ${id} is open`);
  t.equal(closeFromB, `refused: berm.ws.close: no connection ${id} is open`);
  t.equal((await stats(rt, 'b')).frames, 0);
});

t.test('frame cap: a larger inbound frame closes with the reason, a larger send is refused', async (t) => {
  const rt = capped;
  await deploy(rt, 'big');
  const id = await dial(rt, 'big', `${URL_BASE}/big`);
  await until('the close', async () => (await stats(rt, 'big')).closed !== '', 20_000, 50);
  const s = await stats(rt, 'big');
  t.equal(s.open, 'ok');
  t.equal(s.frames, 0, 'the oversized frame was never delivered');
  t.equal(s.closed, 'a frame exceeded the limit of 1024 bytes (wsMaxFrameBytes)');
  const quiet = peer('/quiet').length;
  const id2 = await dial(rt, 'big', `${URL_BASE}/quiet`);
  t.equal(id2, id + 1);
  await until('the second dial', async () => peer('/quiet').length > quiet, 20_000, 50);
  t.equal(
    failed(await rt.invoke('big', 'send', JSON.stringify({ id: id2, text: 'y'.repeat(1025) }))),
    'refused: berm.ws.send: a frame of 1025 bytes exceeds the limit of 1024 (wsMaxFrameBytes); nothing was sent',
  );
  t.equal(ok(await rt.invoke('big', 'send', JSON.stringify({ id: id2, text: 'y'.repeat(1024) }))), 'sent');
});

t.test('send never waits: a full outbound queue is a refused call', async (t) => {
  // a server that accepts the TCP connection and never answers the handshake: the sends wait
  const silent = createNetServer(() => undefined);
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => silent.close());
  const rt = capped;
  await deploy(rt, 'q');
  const id = await dial(rt, 'q', `ws://127.0.0.1:${(silent.address() as AddressInfo).port}/`);
  for (let i = 0; i < 4; i++)
    t.equal(ok(await rt.invoke('q', 'send', JSON.stringify({ id, text: `f${i}` }))), 'sent');
  t.equal(
    failed(await rt.invoke('q', 'send', JSON.stringify({ id, text: 'f4' }))),
    `refused: berm.ws.send: connection ${id} has 4 frames waiting to go out, its limit (wsQueueFrames 4); nothing was sent`,
  );
  t.equal(ok(await rt.invoke('q', 'close', JSON.stringify({ id }))), 'closed');
  await until('the close', async () => (await stats(rt, 'q')).closed !== '', 20_000, 50);
  t.same(await stats(rt, 'q'), { frames: 0, disorder: 0, open: '', closed: 'closed by the harness' });
});

t.test('connection caps: per harness and per process', async (t) => {
  // the same runtime as the frame cap's, whose harness big still holds one connection
  const rt = capped;
  await deploy(rt, 'a');
  await deploy(rt, 'b');
  const first = await dial(rt, 'a', `${URL_BASE}/quiet`);
  await dial(rt, 'a', `${URL_BASE}/quiet`);
  t.equal(
    failed(await rt.invoke('a', 'dial', JSON.stringify({ url: `${URL_BASE}/quiet`, harness: 'a' }))),
    'refused: berm.ws.open: a already holds 2 connections, its limit (wsHarnessConnections 2)',
  );
  t.equal(
    failed(await rt.invoke('b', 'dial', JSON.stringify({ url: `${URL_BASE}/quiet`, harness: 'b' }))),
    'refused: berm.ws.open: this process already holds 3 connections, its limit (wsConnections 3)',
  );
  // a close frees its place
  t.equal(ok(await rt.invoke('a', 'close', JSON.stringify({ id: first }))), 'closed');
  await until('the place to free', async () => (await stats(rt, 'a')).closed !== '', 20_000, 50);
  t.type(await dial(rt, 'b', `${URL_BASE}/quiet`), 'number');
});

t.test('the grant: hosts outside it, other schemes, no hosts, another harness as target', async (t) => {
  const rt = shared;
  await deploy(rt, 'g');
  await deploy(rt, 'none', null);
  const refusal = async (h: string, url: string, target = h) =>
    failed(await rt.invoke(h, 'dial', JSON.stringify({ url, harness: target })));
  t.equal(
    await refusal('g', `ws://localhost:${PORT}/`),
    'refused: berm.ws.open: host localhost is not among the declared hosts',
  );
  t.equal(
    await refusal('g', 'ws://10.0.0.1/'),
    'refused: berm.ws.open: IP literal 10.0.0.1 is not among the declared hosts',
  );
  t.equal(
    await refusal('g', `http://127.0.0.1:${PORT}/`),
    'refused: berm.ws.open: scheme http is not allowed; only ws and wss',
  );
  t.match(
    await refusal('none', `${URL_BASE}/`),
    /^refused: berm\.ws\.open: no hosts are granted to this harness/,
  );
  t.equal(
    await refusal('g', `${URL_BASE}/`, 'none'),
    'refused: berm.ws.open: g may not deliver events to "none"; declare callees = ["none"]',
  );
  t.equal(peers.filter((p) => p.path === '/').length, 0, 'nothing was dialled');
});

t.test('a dial that fails is an open event carrying the error, and nothing more', async (t) => {
  const rt = shared;
  await deploy(rt, 'f');
  // a port nobody listens on: bound and closed again
  const dead = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((r) => dead.once('listening', () => r()));
  const deadPort = (dead.address() as AddressInfo).port;
  await new Promise<void>((r) => dead.close(() => r()));
  await dial(rt, 'f', `ws://127.0.0.1:${deadPort}/`);
  await until('the open event', async () => (await stats(rt, 'f')).open !== '', 20_000, 50);
  await sleep(200);
  const s = await stats(rt, 'f');
  t.match(s.open, /ECONNREFUSED/);
  t.equal(s.closed, '', 'no close follows a failed dial');
});

t.test('wss: the certificate is verified (a self-signed one is refused)', async (t) => {
  const dir = fs.mkdtempSync(path.join(tmp, 'tls-'));
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      path.join(dir, 'key.pem'),
      '-out',
      path.join(dir, 'cert.pem'),
    ],
    { stdio: 'ignore' },
  );
  const server = createHttps({
    key: fs.readFileSync(path.join(dir, 'key.pem')),
    cert: fs.readFileSync(path.join(dir, 'cert.pem')),
  });
  const secure = new WebSocketServer({ server });
  let accepted = 0;
  secure.on('connection', () => accepted++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => {
    secure.close();
    server.close();
  });
  const rt = shared;
  await deploy(rt, 'tls');
  await dial(rt, 'tls', `wss://127.0.0.1:${(server.address() as AddressInfo).port}/`);
  await until('the open event', async () => (await stats(rt, 'tls')).open !== '', 20_000, 50);
  t.match((await stats(rt, 'tls')).open, /self[- ]signed certificate/);
  t.equal(accepted, 0);
});

t.test('undeploy mid-conversation closes the connection; the runtime keeps serving', async (t) => {
  const rt = shared;
  await deploy(rt, 'talker');
  await deploy(rt, 'other');
  const events: JournalRecord[] = [];
  rt.on(
    'invocation',
    (r: JournalRecord) => r.trigger === 'event' && r.harness === 'talker' && events.push(r),
  );
  await dial(rt, 'talker', `${URL_BASE}/stream`);
  await until('frames to flow', async () => (await stats(rt, 'talker')).frames >= 20, 120_000, 100);
  const [p] = peer('/stream');
  t.ok(p!.received.length > 0, 'the echoes reached the server');
  t.ok(rt.undeploy('talker'));
  await until('the server to see the close', async () => p!.closed !== null, 10_000, 50);
  const after = events.length;
  await sleep(300);
  t.ok(events.length <= after + 1, 'no events after the undeploy (one may have been running)');
  // still serving: another harness dials and talks
  const id = await dial(rt, 'other', `${URL_BASE}/quiet`);
  await until('other to be open', async () => (await stats(rt, 'other')).open === 'ok', 20_000, 50);
  t.equal(ok(await rt.invoke('other', 'send', JSON.stringify({ id, text: 'still here' }))), 'sent');
});

t.test('after a restart each connection that was open yields a close with reason restart', async (t) => {
  const state = path.join(tmp, 'restart');
  const rt1 = await runtime({}, state, 1);
  await deploy(rt1, 'keeper');
  const first = await dial(rt1, 'keeper', `${URL_BASE}/quiet`);
  const second = await dial(rt1, 'keeper', `${URL_BASE}/quiet`);
  await until('keeper to be open', async () => (await stats(rt1, 'keeper')).open === 'ok', 20_000, 50);
  await rt1.close();
  const rt2 = await runtime({}, state, 1);
  t.teardown(() => rt2.close());
  const events: string[] = [];
  rt2.on('invocation', (r: JournalRecord) => r.trigger === 'event' && events.push(r.outcome));
  const restored = await rt2.restoreDeployments();
  t.same(
    restored.map((d) => d.name),
    ['keeper'],
  );
  await until('two restart closes', async () => events.length === 2, 20_000, 50);
  t.equal((await stats(rt2, 'keeper')).closed, 'restart');
  // the ids are gone, and a new dial gets a fresh one
  t.equal(
    failed(await rt2.invoke('keeper', 'send', JSON.stringify({ id: first, text: 'x' }))),
    `refused: berm.ws.send: no connection ${first} is open`,
  );
  const third = await dial(rt2, 'keeper', `${URL_BASE}/quiet`);
  t.ok(third > second, 'new ids pass the old ones');
  // once announced, a record is forgotten: what the store holds now is the new connection only
  const held = rt2.store.keys.get(recordsNamespace(state), new TextEncoder().encode('keeper'));
  t.same(
    (JSON.parse(new TextDecoder().decode(held)) as { id: number; url: string }[]).map((r) => [r.id, r.url]),
    [[third, `${URL_BASE}/quiet`]],
  );
});

// WebSocket connections under a real bermd process (bin/bermd.js), against a `ws` WebSocketServer
// on loopback: the boot log prints the connection caps with their defaults; a deployed harness
// (the SDK example wsecho, granted by the declaration file) dials and holds a conversation; a
// second harness cannot send on or close it; DELETE of the harness mid-conversation closes the
// connection and the daemon goes on serving; after a SIGKILL the next bermd on the same root
// delivers a `close` with reason `restart` for the connection that was open.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { WebSocketServer, type WebSocket } from 'ws';
import { REPO } from './helpers/daemon.js';
import { TEST_CACHE } from './helpers/fixtures.js';
import { until } from './helpers/wait.js';

const WSECHO = readFileSync(join(REPO, 'examples/wsecho.elf'));
const dir = mkdtempSync(join(tmpdir(), 'bermd-ws-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const root = join(dir, 'root');
const config = join(dir, 'decl.toml');
const digest = createHash('sha256').update(WSECHO).digest('hex');
writeFileSync(
  config,
  ['chat', 'peer']
    .map(
      (name) =>
        `[[harnesses]]\nname = "${name}"\nsource = "wsecho.elf"\nsha256 = "${digest}"\n` +
        `capabilities = ["ws", "storage"]\nhosts = ["127.0.0.1"]\n`,
    )
    .join('\n'),
);

interface Peer {
  path: string;
  socket: WebSocket;
  received: string[];
  closed: boolean;
}
const peers: Peer[] = [];
const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
await new Promise<void>((r) => wss.once('listening', () => r()));
const BASE = `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`;
wss.on('connection', (socket, req) => {
  const p: Peer = { path: req.url ?? '/', socket, received: [], closed: false };
  peers.push(p);
  socket.on('message', (d) => p.received.push(String(d)));
  socket.on('close', () => (p.closed = true));
  if (p.path === '/stream') {
    let i = 0;
    const timer = setInterval(() => socket.readyState === socket.OPEN && socket.send(String(i++)), 5);
    socket.on('close', () => clearInterval(timer));
  }
});
t.teardown(() => {
  for (const c of wss.clients) c.terminate();
  wss.close();
});

interface Bermd {
  proc: ChildProcess;
  url: string;
  log: string;
}

function startBermd(): Promise<Bermd> {
  return new Promise((resolve, reject) => {
    const proc = spawn(
      process.execPath,
      [join(REPO, 'bin/bermd.js'), '--addr', '127.0.0.1:0', '--root', root, '--cache-dir', TEST_CACHE],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...process.env, BERMD_CONFIG: config, BERMD_WORKERS: '1' },
      },
    );
    let err = '';
    const timer = setTimeout(() => reject(new Error(`bermd did not start:\n${err}`)), 90_000);
    proc.stderr!.on('data', (c: Buffer) => {
      err += c.toString();
      const m = /listening on (http:\/\/\S+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, url: m[1]!, log: err });
      }
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`bermd exited with ${code} before listening:\n${err}`));
    });
  });
}

function kill9(b: Bermd): Promise<void> {
  return new Promise((resolve) => {
    if (b.proc.exitCode !== null || b.proc.signalCode !== null) return resolve();
    b.proc.once('exit', () => resolve());
    b.proc.kill('SIGKILL');
  });
}

async function call(
  b: Bermd,
  harness: string,
  tool: string,
  args: unknown,
): Promise<{ done?: string; failed?: string }> {
  const r = await fetch(`${b.url}/harnesses/${harness}/tools/${tool}`, {
    method: 'POST',
    body: JSON.stringify(args),
  });
  if (r.status !== 200) throw new Error(`${harness}.${tool}: ${r.status} ${await r.text()}`);
  return (await r.json()) as { done?: string; failed?: string };
}
const stats = async (b: Bermd, h: string) =>
  JSON.parse((await call(b, h, 'stats', {})).done!) as { frames: number; open: string; closed: string };

t.test('bermd: caps at boot, a conversation, a foreign id, undeploy mid-conversation, SIGKILL', async (t) => {
  let b = await startBermd();
  t.teardown(() => kill9(b));
  for (const k of [
    'wsMaxFrameBytes +1048576',
    'wsHarnessConnections +16',
    'wsConnections +1024',
    'wsQueueFrames +256',
  ])
    t.match(b.log, new RegExp(`${k}  \\(default\\)`), `boot log: ${k.split(' ')[0]} and its default`);
  for (const h of ['chat', 'peer']) {
    t.equal((await fetch(`${b.url}/harnesses/${h}`, { method: 'PUT', body: WSECHO })).status, 200);
  }

  const id = (
    JSON.parse((await call(b, 'chat', 'dial', { url: `${BASE}/stream`, harness: 'chat' })).done!) as {
      id: number;
    }
  ).id;
  // dial answers with the id before the server has accepted the socket: look the peer up each time
  const streamPeer = (): Peer | undefined => peers.find((p) => p.path === '/stream');
  await until(
    'echoes to reach the server',
    async () => (streamPeer()?.received.length ?? 0) >= 10,
    60_000,
    100,
  );
  const stream = streamPeer()!;
  t.same(stream.received.slice(0, 10), ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9'], 'echoed in order');
  t.same(await call(b, 'peer', 'send', { id, text: 'intrude' }), {
    failed: `refused: berm.ws.send: no connection ${id} is open`,
  });
  t.same(await call(b, 'peer', 'close', { id }), {
    failed: `refused: berm.ws.close: no connection ${id} is open`,
  });
  t.notOk(stream.received.includes('intrude'));
  const metrics = await (await fetch(`${b.url}/metrics`)).text();
  t.match(
    metrics,
    /berm_invocations_total\{trigger="event",outcome="ok"\} [1-9]/,
    'events are counted by trigger',
  );

  // undeploy mid-conversation: the server sees the close, the daemon goes on serving
  t.equal((await fetch(`${b.url}/harnesses/chat`, { method: 'DELETE' })).status, 204);
  await until('the server to see the close', async () => stream.closed, 20_000, 50);
  const list = (await (await fetch(`${b.url}/harnesses`)).json()) as { name: string }[];
  t.same(
    list.map((h) => h.name),
    ['peer'],
  );
  t.equal((await stats(b, 'peer')).frames, 0);

  // a connection open when the process is killed: the next bermd says so with a restart close
  const quietBefore = peers.filter((p) => p.path === '/quiet').length;
  await call(b, 'peer', 'dial', { url: `${BASE}/quiet`, harness: 'peer' });
  await until('peer to be open', async () => (await stats(b, 'peer')).open === 'ok', 30_000, 100);
  t.equal(peers.filter((p) => p.path === '/quiet').length, quietBefore + 1);
  await kill9(b);
  b = await startBermd();
  await until('the restart close', async () => (await stats(b, 'peer')).closed === 'restart', 60_000, 200);
  t.pass('the restarted daemon delivered close "restart" to peer');
});

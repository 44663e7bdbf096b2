// WebSocket connections when bermd's store is PostgreSQL (--store, the test cluster of
// BERM_TEST_PG_URL): a harness (the SDK example wsecho) dials a `ws` WebSocketServer on loopback
// and counts the frames it echoes in its keys, read back on every frame, so the count is right
// only if berm.get/berm.set reach the same rows across invocations; the rows are read from the
// database directly. After a SIGKILL the next bermd on the same store delivers a `close` with
// reason `restart` for the connection that was open, and the harness's key records it.
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
import { freshDatabase, testPool } from './helpers/pg.js';
import { until } from './helpers/wait.js';

const WSECHO = readFileSync(join(REPO, 'examples/wsecho.elf'));
const dir = mkdtempSync(join(tmpdir(), 'bermd-ws-pg-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const config = join(dir, 'decl.toml');
const digest = createHash('sha256').update(WSECHO).digest('hex');
writeFileSync(
  config,
  `[[harnesses]]\nname = "chat"\nsource = "wsecho.elf"\nsha256 = "${digest}"\n` +
    `capabilities = ["ws", "storage"]\nhosts = ["127.0.0.1"]\n`,
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
    // 40 numbered frames, then quiet: the harness echoes each and counts them
    let i = 0;
    const timer = setInterval(() => {
      if (i >= 40) clearInterval(timer);
      else if (socket.readyState === socket.OPEN) socket.send(String(i++));
    }, 5);
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
}

function startBermd(store: string, root: string): Promise<Bermd> {
  return new Promise((resolve, reject) => {
    const proc = spawn(
      process.execPath,
      [
        join(REPO, 'bin/bermd.js'),
        ...['--addr', '127.0.0.1:0', '--root', root, '--cache-dir', TEST_CACHE, '--store', store],
      ],
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
        resolve({ proc, url: m[1]! });
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

async function call(b: Bermd, tool: string, args: unknown): Promise<{ done?: string; failed?: string }> {
  const r = await fetch(`${b.url}/harnesses/chat/tools/${tool}`, {
    method: 'POST',
    body: JSON.stringify(args),
  });
  if (r.status !== 200) throw new Error(`chat.${tool}: ${r.status} ${await r.text()}`);
  return (await r.json()) as { done?: string; failed?: string };
}

t.test('on PostgreSQL: keys across frame invocations, and close "restart" after a SIGKILL', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const db = testPool(t, url);
  /** the harness's key as the database holds it, or null */
  const key = async (k: string): Promise<string | null> => {
    const r = await db.query<{ value: Buffer }>('SELECT value FROM berm_kv WHERE harness = $1 AND key = $2', [
      'chat',
      Buffer.from(k),
    ]);
    return r.rows[0] ? r.rows[0].value.toString() : null;
  };
  const root = join(dir, 'root');
  let b = await startBermd(url, root);
  t.teardown(() => kill9(b));
  t.equal((await fetch(`${b.url}/harnesses/chat`, { method: 'PUT', body: WSECHO })).status, 200);

  await call(b, 'dial', { url: `${BASE}/stream`, harness: 'chat' });
  const stream = (): Peer | undefined => peers.find((p) => p.path === '/stream');
  await until('40 echoes', async () => (stream()?.received.length ?? 0) >= 40, 60_000, 100);
  const want = Array.from({ length: 40 }, (_, i) => String(i));
  t.same(stream()!.received, want, 'every frame echoed, in order');
  // the count the harness kept in its keys, one invocation per frame, read from PostgreSQL itself
  t.equal(await key('frames'), '40', 'berm_kv holds frames = 40');
  t.equal(await key('disorder'), null, 'no frame arrived out of order (the disorder key was never set)');
  t.equal(await key('open'), 'ok');
  const stats = JSON.parse((await call(b, 'stats', {})).done!) as {
    frames: number;
    open: string;
    closed: string;
  };
  t.same([stats.frames, stats.open, stats.closed], [40, 'ok', '']);

  // the connection is open when the process dies: the next bermd on the same store says so
  await kill9(b);
  b = await startBermd(url, root);
  await until('the restart close', async () => (await key('closed')) === 'restart', 60_000, 200);
  t.pass('berm_kv holds closed = restart');
  t.equal(await key('frames'), '40', 'the count survived the restart in the database');
});

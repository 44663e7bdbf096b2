// A reply the client never reads must not stay in bermd's memory for ever: a connection whose
// reply bytes wait unread (no progress) for --write-timeout is closed and counted, while a client
// that reads slowly and an idle SSE stream carry on. Real sockets against an in-process bermd.
import * as net from 'node:net';
import t from 'tap';
import { elf, testDaemon } from './helpers/daemon.js';
import { until } from './helpers/wait.js';

const HOSTILE = elf('test/data/hostile.elf');
const BIG = 4 * 1024 * 1024; // 4 MiB of 'x': more than the loopback socket buffers hold
const REQUEST = (port: number): string => {
  const body = JSON.stringify({ n: BIG });
  return (
    `POST /harnesses/h/tools/big HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n` +
    `content-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`
  );
};

function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
}

async function metric(d: Awaited<ReturnType<typeof testDaemon>>, name: string): Promise<number> {
  const text = await (await d.req('/metrics')).text();
  const m = new RegExp(`^${name} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

t.test('--write-timeout: a client that never reads is closed; readers and SSE streams are not', async (t) => {
  const d = await testDaemon({ writeTimeoutMs: '2000' });
  t.teardown(() => d.stop());
  t.ok(d.logs.some((l) => /write-timeout-ms +2000 +\(flag --write-timeout\)/.test(l)));
  t.equal((await d.req('/harnesses/h', { method: 'PUT', body: HOSTILE })).status, 200);
  const port = d.address.port;

  // an idle SSE stream: an MCP session's notification stream (GET /mcp), nothing written for long
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const init = await d.req('/mcp', {
    method: 'POST',
    headers,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'idle', version: '1' } },
    }),
  });
  await init.text();
  const session = init.headers.get('mcp-session-id')!;
  const stream = await d.req('/mcp', {
    headers: { accept: 'text/event-stream', 'mcp-session-id': session },
  });
  t.equal(stream.status, 200);
  const reader = stream.body!.getReader();
  let streamEnded = false;
  const streamDone = reader.read().then(
    (r) => (streamEnded = r.done),
    () => (streamEnded = true),
  );

  // the client that never reads: its socket is paused before the reply starts
  const parked = await connect(port);
  parked.pause();
  let parkedClosed = false;
  parked.on('close', () => (parkedClosed = true));
  parked.on('error', () => {});
  parked.write(REQUEST(port));

  // a slow reader: takes 512 KiB, then stops for 500 ms (a quarter of the timeout), again and again
  const slow = await connect(port);
  const chunks: Buffer[] = [];
  let got = 0;
  let mark = 0;
  const t0 = Date.now();
  const slowDone = new Promise<void>((resolve, reject) => {
    slow.on('data', (c: Buffer) => {
      chunks.push(c);
      got += c.length;
      if (got - mark >= 512 * 1024) {
        mark = got;
        slow.pause();
        setTimeout(() => slow.resume(), 500);
      }
    });
    slow.on('end', resolve);
    slow.on('error', reject);
  });
  slow.write(REQUEST(port).replace('HTTP/1.1\r\n', 'HTTP/1.1\r\nconnection: close\r\n'));

  // the parked connection is destroyed and counted, within a generous bound
  await until(
    'the write timeout to close a connection',
    async () => (await metric(d, 'berm_http_write_timeouts_total')) >= 1,
    30_000,
    100,
  );
  t.equal(await metric(d, 'berm_http_write_timeouts_total'), 1, 'one connection closed by the write timeout');
  // reading now, the parked client finds its reply cut short
  let parkedGot = 0;
  parked.on('data', (c: Buffer) => (parkedGot += c.length));
  parked.resume();
  await new Promise<void>((resolve) => (parkedClosed ? resolve() : parked.once('close', () => resolve())));
  t.ok(parkedGot < BIG, `the parked client got ${parkedGot} of over ${BIG} bytes`);

  // the slow reader gets its whole reply, though it took longer than the timeout
  await slowDone;
  const elapsed = Date.now() - t0;
  const text = Buffer.concat(chunks).toString('latin1');
  t.match(text, /^HTTP\/1\.1 200 /);
  const body = text.slice(text.indexOf('\r\n\r\n') + 4);
  const reply = JSON.parse(body) as { done: string };
  t.equal(reply.done.length, BIG);
  t.ok(/^x+$/.test(reply.done), 'all x');
  t.ok(elapsed > 2000, `the slow reader took ${elapsed} ms, longer than the write timeout`);

  // the daemon is healthy, the idle SSE stream still open, nothing else was closed
  t.equal((await d.req('/health')).status, 200);
  t.equal(streamEnded, false, 'the idle MCP notification stream is still open');
  t.equal(await metric(d, 'berm_http_write_timeouts_total'), 1);
  const listed = await d.req('/mcp', {
    method: 'POST',
    headers: { ...headers, 'mcp-session-id': session },
    body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
  });
  t.equal(listed.status, 200, 'the MCP session still answers');
  await listed.text();
  await reader.cancel();
  await streamDone;
  slow.destroy();
});

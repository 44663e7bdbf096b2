// Slowloris against bermd over real sockets: connections that never finish their headers (one
// header line a second, or nothing at all) hold slots of --max-connections before any
// authentication. They must be closed at the headers timeout (--body-timeout), not 30-40 s later
// when Node's default connection check comes round, and the slot must serve again.
import t from 'tap';
import { connect } from 'node:net';
import { testDaemon } from './helpers/daemon.js';

/** Open a raw connection; `mode` says what it sends. Resolves with when it closed and what it read. */
function slowClient(
  port: number,
  mode: 'silent' | 'trickle',
  giveUpMs: number,
): { opened: Promise<void>; closed: Promise<{ ms: number; read: string } | null> } {
  const s = connect(port, '127.0.0.1');
  const t0 = Date.now();
  let read = '';
  s.on('data', (c) => (read += c.toString()));
  s.on('error', () => undefined);
  const opened = new Promise<void>((r) => s.once('connect', () => r()));
  let tick: NodeJS.Timeout | null = null;
  if (mode === 'trickle') {
    s.once('connect', () => s.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n'));
    tick = setInterval(() => s.writable && s.write('X-Slow: 1\r\n'), 200);
  }
  const closed = new Promise<{ ms: number; read: string } | null>((resolve) => {
    const stop = setTimeout(() => {
      s.destroy();
      resolve(null);
    }, giveUpMs);
    s.on('close', () => {
      clearTimeout(stop);
      if (tick) clearInterval(tick);
      resolve({ ms: Date.now() - t0, read });
    });
  });
  return { opened, closed };
}

t.test('connections that never finish their headers are closed at the headers timeout', async (t) => {
  const d = await testDaemon({ bodyTimeoutMs: '1000', maxConnections: '2' });
  t.teardown(() => d.stop());
  const port = d.address.port;
  const trickle = slowClient(port, 'trickle', 8000);
  const silent = slowClient(port, 'silent', 8000);
  await Promise.all([trickle.opened, silent.opened]);
  // both slots are taken: a real client is turned away meanwhile
  const busy = await d.req('/health');
  t.equal(busy.status, 503, 'the cap is full while the slow clients hold it');
  for (const [name, c] of [
    ['trickling headers', trickle],
    ['sending nothing', silent],
  ] as const) {
    const r = await c.closed;
    t.not(r, null, `${name}: closed by bermd (not still open after 8 s)`);
    if (r === null) continue;
    // the headers timeout is 1000 ms; the check runs every 250 ms
    t.ok(r.ms >= 900 && r.ms < 2500, `${name}: closed after ${r.ms} ms`);
    t.match(r.read, /^HTTP\/1\.1 408 /, `${name}: answered 408`);
  }
  const after = await d.req('/health');
  t.equal(after.status, 200, 'the slots serve again');
});

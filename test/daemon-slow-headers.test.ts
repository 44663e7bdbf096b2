// Slowloris against bermd over real sockets: connections that never finish their headers (one
// header line a second, or nothing at all) hold slots of --max-connections before any
// authentication. They must be closed at the headers timeout (--body-timeout), not 30-40 s later
// when Node's default connection check comes round, and the slot must serve again; and at the cap
// the oldest of them gives way to a new connection at once.
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
  // both slots are taken by connections without headers: a real client is served at once, the
  // oldest of them closed (without a reply) to make room
  const t0 = Date.now();
  const busy = await d.req('/health');
  t.equal(busy.status, 200, 'a new client is served while the slow clients hold the cap');
  const [a, b] = await Promise.all([trickle.closed, silent.closed]);
  t.ok(a !== null && b !== null, 'both slow clients closed by bermd (not still open after 8 s)');
  if (a === null || b === null) return;
  const [evicted, timedOut] = a.ms <= b.ms ? [a, b] : [b, a];
  t.equal(evicted.read, '', 'the evicted one got no reply');
  t.ok(evicted.ms < Date.now() - t0 + 1000, `the evicted one closed at once (${evicted.ms} ms)`);
  // the headers timeout is 1000 ms; the check runs every 250 ms
  t.ok(timedOut.ms >= 900 && timedOut.ms < 2500, `the other closed after ${timedOut.ms} ms`);
  t.match(timedOut.read, /^HTTP\/1\.1 408 /, 'the other answered 408');
  const after = await d.req('/health');
  t.equal(after.status, 200, 'the slots serve again');
});

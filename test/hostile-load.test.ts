// bermd under hostile load over real sockets on loopback, each scenario bounded in time:
// unauthenticated uploads are refused without being read, `Expect: 100-continue` is answered only
// after authentication, and 1,000 slow-header connections from one address (refilled as bermd
// closes them) do not keep authorised calls out; the timeouts and the shed connections are counted
// in /metrics.
import * as http from 'node:http';
import { connect, type Socket } from 'node:net';
import t from 'tap';
import { elf, testDaemon, type TestDaemon } from './helpers/daemon.js';
import { until as untilTrue } from './helpers/wait.js';

const ECHO = elf('fixtures/build/echo-gcc-O2.elf');
const TOKEN = 'hostile-load-token';

/** A raw connection: what it read so far, when it closed. */
function raw(
  port: number,
  localAddress = '127.0.0.1',
): { s: Socket; read: () => string; closed: Promise<number> } {
  const s = connect({ port, host: '127.0.0.1', localAddress });
  let text = '';
  s.on('data', (c: Buffer) => (text += c.toString('latin1')));
  s.on('error', () => undefined);
  const t0 = Date.now();
  const closed = new Promise<number>((r) => s.once('close', () => r(Date.now() - t0)));
  return { s, read: () => text, closed };
}

/** One HTTP request on a connection of its own (no keep-alive), from `localAddress`. */
function call(
  d: TestDaemon,
  path: string,
  body: string | null,
  localAddress = '127.0.0.1',
): Promise<{ status: number; text: string; ms: number }> {
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: d.address.port,
        path,
        method: body === null ? 'GET' : 'POST',
        localAddress,
        agent: false,
        headers: { authorization: `Bearer ${TOKEN}`, connection: 'close' },
        timeout: 15_000,
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, ms: Date.now() - t0 }));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${path}: no answer in 15 s`)));
    req.on('error', reject);
    req.end(body ?? undefined);
  });
}

/** The value of a counter line of /metrics (0 when absent). */
async function metric(d: TestDaemon, line: string): Promise<number> {
  const text = await (await d.req('/metrics')).text();
  const m = new RegExp(`^${line.replace(/[{}"]/g, (c) => `\\${c}`)} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

t.test('a 401 or 403 closes the connection without reading the body', async (t) => {
  const d = await testDaemon({}, { BERMD_TOKEN: TOKEN });
  t.teardown(() => d.stop());
  const declared = 256 << 20;
  for (const [what, extra, status] of [
    ['no token', '', 401],
    ['wrong token', 'Authorization: Bearer nope\r\n', 401],
    ['another page', `Origin: http://evil.example\r\nAuthorization: Bearer ${TOKEN}\r\n`, 403],
  ] as const) {
    const c = raw(d.address.port);
    await new Promise((r) => c.s.once('connect', r));
    c.s.write(
      `PUT /harnesses/big HTTP/1.1\r\nHost: 127.0.0.1\r\n${extra}Content-Length: ${declared}\r\n\r\n`,
    );
    // upload as fast as the socket takes it, until bermd closes the connection (or 10 s)
    const chunk = Buffer.alloc(64 * 1024, 0x41);
    let sent = 0;
    let open = true;
    void c.closed.then(() => (open = false));
    const stop = Date.now() + 10_000;
    while (open && Date.now() < stop && sent < declared) {
      if (!c.s.write(chunk)) await new Promise((r) => setTimeout(r, 5));
      sent += chunk.length;
    }
    const ms = await Promise.race([c.closed, new Promise<number>((r) => setTimeout(() => r(-1), 5000))]);
    c.s.destroy();
    t.match(c.read(), new RegExp(`^HTTP/1\\.1 ${status} `), `${what}: ${status}`);
    t.match(c.read(), /\r\nconnection: close\r\n/i, `${what}: Connection: close`);
    t.ok(ms >= 0 && ms < 5000, `${what}: bermd closed the connection (after ${ms} ms)`);
    // what the kernel buffers on both sides is a few MiB at most; reading the body would take all
    t.ok(sent < 64 << 20, `${what}: the upload stopped after ${(sent / 2 ** 20).toFixed(1)} MiB of 256`);
  }
});

t.test('Expect: 100-continue is answered only after authentication', async (t) => {
  const d = await testDaemon({}, { BERMD_TOKEN: TOKEN });
  t.teardown(() => d.stop());
  t.equal((await d.req('/harnesses/echo', { method: 'PUT', body: ECHO })).status, 200);
  const body = '{"x":1}';
  const head = (auth: string): string =>
    `POST /harnesses/echo/tools/echo HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Content-Type: application/json\r\n` +
    `Content-Length: ${body.length}\r\nExpect: 100-continue\r\n\r\n`;
  const until = async (c: ReturnType<typeof raw>, re: RegExp): Promise<void> => {
    for (let i = 0; i < 250 && !re.test(c.read()); i++) await new Promise((r) => setTimeout(r, 20));
  };

  const anon = raw(d.address.port);
  anon.s.write(head(''));
  await until(anon, /\r\n\r\n/);
  t.match(anon.read(), /^HTTP\/1\.1 401 /, 'without a token: 401 first');
  t.notMatch(anon.read(), /100 Continue/, 'no 100 Continue before authentication');
  await anon.closed;

  const ok = raw(d.address.port);
  ok.s.write(head(`Authorization: Bearer ${TOKEN}\r\n`));
  await until(ok, /\r\n\r\n/);
  t.match(ok.read(), /^HTTP\/1\.1 100 Continue\r\n\r\n$/, 'with the token: 100 Continue, then the body');
  ok.s.write(body);
  await until(ok, /\r\n\r\n.*\{"done"/s);
  t.match(ok.read(), /HTTP\/1\.1 200 OK[^]*\{"done":"\{\\"x\\":1\}"\}/);
  ok.s.destroy();
});

t.test('1,000 slow-header connections from one address: authorised calls keep succeeding', async (t) => {
  // the headers timeout follows --body-timeout: 2 s, so the slow connections are also timed out
  // (and refilled) while the test runs
  const d = await testDaemon(
    { bodyTimeoutMs: '2000', maxConnections: '400', limit: ['drainMs=2000'] },
    { BERMD_TOKEN: TOKEN },
  );
  t.teardown(() => d.stop());
  t.equal((await d.req('/harnesses/echo', { method: 'PUT', body: ECHO })).status, 200);
  const port = d.address.port;

  // a kept-alive connection left idle (closed at the keep-alive timeout) and one that stops
  // half-way through its body (408 at the body timeout): both counted
  const idle = http.request({ port, path: '/health', agent: new http.Agent({ keepAlive: true }) });
  idle.end();
  const slowBody = raw(port);
  slowBody.s.write(
    `POST /harnesses/echo/tools/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Length: 100\r\n\r\n{`,
  );

  // the attack: 1,000 connections from 127.0.0.1 sending a request line and then a header byte a
  // second, each refilled when bermd closes it; 300 more from 127.0.0.3 to reach the global cap
  let running = true;
  let opened = 0;
  const live = new Set<Socket>();
  const slow = (localAddress: string): void => {
    if (!running) return;
    opened++;
    const s = connect({ port, host: '127.0.0.1', localAddress });
    live.add(s);
    s.on('error', () => undefined);
    s.once('connect', () => s.write('GET /harnesses HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: '));
    const tick = setInterval(() => s.writable && s.write('a'), 1000);
    s.once('close', () => {
      clearInterval(tick);
      live.delete(s);
      setTimeout(() => slow(localAddress), 1000);
    });
  };
  for (let i = 0; i < 1000; i++) slow('127.0.0.1');
  for (let i = 0; i < 300; i++) slow('127.0.0.3');
  t.teardown(() => {
    running = false;
    for (const s of live) s.destroy();
  });
  // the calls go out once bermd has closed slow connections and the attackers have refilled
  // them (a fixed pause let 40 fast calls finish before the first refill)
  await untilTrue('the attackers to refill', async () => opened > 1300, 30_000, 50);

  // authorised calls, one connection each, from the attacked address and from another
  const results: { status: number; ms: number; from: string }[] = [];
  const t0 = Date.now();
  for (let i = 0; i < 40; i++) {
    const from = i % 2 === 0 ? '127.0.0.1' : '127.0.0.2';
    const r = await call(d, '/harnesses/echo/tools/echo', `{"i":${i}}`, from);
    results.push({ status: r.status, ms: r.ms, from });
    if (r.status !== 200) t.fail(`call ${i} from ${from}: ${r.status} ${r.text}`);
    else if (r.text !== JSON.stringify({ done: `{"i":${i}}` })) t.fail(`call ${i}: ${r.text}`);
  }
  const health = await call(d, '/health', null, '127.0.0.1');
  t.equal(health.status, 200, '/health answers under the attack');
  t.equal(results.filter((r) => r.status === 200).length, 40, 'all 40 authorised calls answered 200');
  const worst = Math.max(...results.map((r) => r.ms));
  t.comment(`40 calls in ${Date.now() - t0} ms under ${opened} slow connections; slowest ${worst} ms`);
  t.ok(worst < 10_000, `no call waited out the attack (slowest ${worst} ms)`);
  t.ok(opened > 1300, `the attackers kept refilling (${opened} connections opened)`);
  running = false;

  // the headers timeout, the body timeout and the keep-alive timeout (5 s) have passed, or do soon
  const counted = async (line: string): Promise<number> => {
    let n = 0;
    for (let i = 0; i < 30 && n === 0; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 200));
      n = await metric(d, line);
    }
    return n;
  };
  t.ok((await counted('berm_http_connections_shed_total{reason="evicted"}')) > 0, 'evictions counted');
  t.ok((await counted('berm_http_timeouts_total{kind="headers"}')) > 0, 'headers timeouts counted');
  t.ok((await counted('berm_http_timeouts_total{kind="body"}')) >= 1, 'the slow body counted');
  t.ok((await counted('berm_http_timeouts_total{kind="idle"}')) >= 1, 'the idle connection counted');
  t.match(slowBody.read(), /^HTTP\/1\.1 408 /, 'the slow body was answered 408');
  running = false;
});

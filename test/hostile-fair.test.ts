// Fair share under hostile load, against bermd over real sockets on loopback (2 workers, as the
// 2-core machine the scenario was found on), bounded in time: 8 calls of a tool that spins for ever
// do not keep another harness's trivial tool waiting (one harness runs at most one fewer than the
// pool, and the queue serves harnesses round-robin), and calls whose HTTP client disconnected or
// whose MCP session ended are cancelled — dropped from the queue or interrupted — and journaled
// `cancelled`, counted in /metrics, long before their deadline.
import { availableParallelism } from 'node:os';
import * as fs from 'node:fs';
import * as http from 'node:http';
import { connect, type Socket } from 'node:net';
import * as path from 'node:path';
import t, { type Test } from 'tap';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { elf, testDaemon, type TestDaemon } from './helpers/daemon.js';

const ECHO = elf('fixtures/build/echo-gcc-O2.elf');
const HOSTILE = elf('test/data/hostile.elf');
// the spinning calls' deadline: far past every bound asserted below, so only a cancellation (or
// fair share) explains a fast answer
const SPIN_DEADLINE_MS = 20_000;

/** One POST on a connection of its own; its status, body and wall time. */
function post(
  d: TestDaemon,
  p: string,
  body: string,
  signal?: AbortSignal,
): Promise<{ status: number; text: string; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: d.address.port,
        path: p,
        method: 'POST',
        agent: false,
        ...(signal ? { signal } : {}),
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, ms: performance.now() - t0 }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** A tool call sent whole on a raw connection that is never read (closed by the caller). */
function abandoned(d: TestDaemon, p: string): Socket {
  const s = connect({ port: d.address.port, host: '127.0.0.1' });
  s.on('error', () => undefined);
  s.write(
    `POST ${p} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`,
  );
  return s;
}

/** Value of the sample `name{labels}` in bermd's /metrics (0 when absent). */
async function metric(d: TestDaemon, sample: string): Promise<number> {
  const text = await (await d.req('/metrics')).text();
  const line = text.split('\n').find((l) => l.startsWith(sample + ' '));
  return line ? Number(line.slice(sample.length + 1)) : 0;
}

/** Poll `f` every 20 ms until it holds, at most `ms`; whether it did. */
async function until(f: () => Promise<boolean> | boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await f()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return f();
}

/** The journal's records of `harness`. */
function journal(d: TestDaemon, harness: string): { outcome: string; detail?: string; entry: string }[] {
  const file = path.join(d.root, 'journal.jsonl');
  if (!fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as { harness: string; outcome: string; detail?: string; entry: string })
    .filter((r) => r.harness === harness);
}

/**
 * A daemon on 2 workers (`workers` null: bermd's default pool) with the spinning harness `h`
 * and the echo harness `e` deployed and warm.
 */
async function daemon(
  t: Test,
  limits: string[] = [],
  owner: Test = t,
  workers: string | null = '2',
): Promise<TestDaemon> {
  const t0 = performance.now();
  const d = await testDaemon({
    workers: workers ?? undefined,
    limit: [`timeoutMs=${SPIN_DEADLINE_MS}`, 'drainMs=500', 'graceMs=1000', ...limits],
  });
  owner.teardown(() => d.stop());
  t.equal((await d.req('/harnesses/h', { method: 'PUT', body: HOSTILE })).status, 200);
  t.equal((await d.req('/harnesses/e', { method: 'PUT', body: ECHO })).status, 200);
  // both workers have made an instance of echo (the first call of a harness on a worker pays it)
  await Promise.all([post(d, '/harnesses/e/tools/echo', '{}'), post(d, '/harnesses/e/tools/echo', '{}')]);
  t.comment(`daemon up with both harnesses in ${(performance.now() - t0).toFixed(0)} ms`);
  return d;
}

/** Echo calls one after another, each on a new connection: their wall times, ms. */
async function echoTimes(t: Test, d: TestDaemon, n: number): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const r = await post(d, '/harnesses/e/tools/echo', `{"i":${i}}`);
    t.equal(r.status, 200);
    t.same(JSON.parse(r.text), { done: `{"i":${i}}` });
    ms.push(r.ms);
  }
  return ms;
}

const root = t;
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** The daemon of the first and the last test (default limits but the deadline), made once. */
let shared: Promise<TestDaemon> | undefined;
const sharedDaemon = (t: Test): Promise<TestDaemon> => (shared ??= daemon(t, [], root));

t.test('8 spinning calls of one harness leave a worker for another harness', async (t) => {
  const d = await sharedDaemon(t);
  t.match(d.logs.join('\n'), /harnessConcurrency +1 +\(default\)/, 'one fewer than the 2 workers');
  // clients that stay connected: fair share alone keeps the echo harness served
  const gone = new AbortController();
  const spins = Array.from({ length: 8 }, () =>
    post(d, '/harnesses/h/tools/spin', '{}', gone.signal).catch(() => null),
  );
  t.ok(
    await until(async () => (await metric(d, 'berm_queue_depth')) === 7, 5000),
    'one spin runs, seven wait (harnessConcurrency 1)',
  );
  const ms = await echoTimes(t, d, 10);
  t.comment(`echo beside 8 spinning calls: ${ms.map((x) => x.toFixed(1)).join(' ')} ms`);
  // without the reserve, both workers spin and echo waits for a deadline (20 s). The target is
  // 100 ms; the bounds are looser because this machine is shared (at load 25 the median was 79 ms,
  // one call 2.5 s: a tier-up compile, the CPU taken by other processes), never a spin's deadline
  t.ok(median(ms) < 500, `median echo ${median(ms).toFixed(1)} ms < 500 ms`);
  t.ok(Math.max(...ms) < 5000, `slowest echo ${Math.max(...ms).toFixed(1)} ms < 5 s`);
  // the spinning calls are still there: the echo calls passed them in the round-robin
  t.equal(await metric(d, 'berm_in_flight'), 1);
  // their clients give up: cancelled (the test after the next shows how)
  gone.abort();
  await Promise.all(spins);
  t.ok(await until(() => journal(d, 'h').length === 8, 3000), 'the 8 spins ended');
  t.same(
    journal(d, 'h').map((r) => r.outcome),
    Array(8).fill('cancelled'),
  );
});

t.test('the default pool: one spin per core runs, and another harness still finds a worker', async (t) => {
  const cores = availableParallelism();
  const d = await daemon(t, [], t, null);
  const logs = d.logs.join('\n');
  t.match(
    logs,
    new RegExp(`workers +${cores + 1} +\\(default: ${cores} cores \\+ 1`),
    'a worker per core, plus one',
  );
  t.match(logs, new RegExp(`harnessConcurrency +${cores} +\\(default\\)`), 'one harness may use every core');
  const gone = new AbortController();
  const spins = Array.from({ length: 8 }, () =>
    post(d, '/harnesses/h/tools/spin', '{}', gone.signal).catch(() => null),
  );
  t.ok(
    await until(
      async () =>
        (await metric(d, 'berm_in_flight')) === cores && (await metric(d, 'berm_queue_depth')) === 8 - cores,
      5000,
    ),
    `${cores} spins run (one per core), ${8 - cores} wait`,
  );
  const ms = await echoTimes(t, d, 10);
  t.comment(`echo beside ${cores} running spins: ${ms.map((x) => x.toFixed(1)).join(' ')} ms`);
  // the reserve worker shares the cores with the spins, time-sliced: bounds as in the first test
  t.ok(median(ms) < 500, `median echo ${median(ms).toFixed(1)} ms < 500 ms`);
  t.ok(Math.max(...ms) < 5000, `slowest echo ${Math.max(...ms).toFixed(1)} ms < 5 s`);
  t.equal(await metric(d, 'berm_in_flight'), cores, 'the spins still run');
  gone.abort();
  await Promise.all(spins);
  t.ok(await until(() => journal(d, 'h').length === 8, 3000), 'the 8 spins ended');
});

t.test('8 abandoned spinning calls are cancelled: dropped if queued, interrupted if running', async (t) => {
  // the old default (one harness may use every worker): only the cancellation frees them
  const d = await daemon(t, ['harnessConcurrency=2']);
  const socks = Array.from({ length: 8 }, () => abandoned(d, '/harnesses/h/tools/spin'));
  t.ok(
    await until(
      async () => (await metric(d, 'berm_in_flight')) === 2 && (await metric(d, 'berm_queue_depth')) === 6,
      5000,
    ),
    'two spin, six wait',
  );
  const t0 = performance.now();
  for (const s of socks) s.destroy();
  const ms = await echoTimes(t, d, 10);
  t.comment(`echo right after 8 spinning clients disconnected: ${ms.map((x) => x.toFixed(1)).join(' ')} ms`);
  t.ok(median(ms) < 500, `median echo ${median(ms).toFixed(1)} ms < 500 ms (see above)`);
  t.ok(ms[0]! < 5000, `the first echo ${ms[0]!.toFixed(1)} ms < 5 s (it waited for an interrupt)`);
  t.ok(
    await until(() => journal(d, 'h').length === 8, 3000),
    `8 journal records within 3 s of the disconnect (deadline ${SPIN_DEADLINE_MS} ms)`,
  );
  t.comment(`all 8 journaled after ${(performance.now() - t0).toFixed(0)} ms`);
  const recs = journal(d, 'h');
  t.same(
    recs.map((r) => r.outcome),
    Array(8).fill('cancelled'),
    'each journaled cancelled',
  );
  t.equal(recs.filter((r) => /interrupted/.test(r.detail ?? '')).length, 2, 'two were interrupted');
  t.equal(recs.filter((r) => /dropped before it started/.test(r.detail ?? '')).length, 6, 'six dropped');
  t.ok(
    recs.every((r) => /HTTP client disconnected/.test(r.detail ?? '')),
    'the detail says why',
  );
  t.equal(await metric(d, 'berm_calls_cancelled_total{state="queued"}'), 6);
  t.equal(await metric(d, 'berm_calls_cancelled_total{state="running"}'), 2);
  t.equal(await metric(d, 'berm_invocations_total{trigger="call",outcome="cancelled"}'), 8);
  t.equal(await metric(d, 'berm_in_flight'), 0, 'nothing runs any more');
  // a finished call is not cancelled when its client closes afterwards
  const done = await post(d, '/harnesses/e/tools/echo', '{"after":1}');
  t.equal(done.status, 200);
  t.equal(await metric(d, 'berm_calls_cancelled_total{state="running"}'), 2);
  t.same(
    journal(d, 'e').map((r) => r.outcome),
    Array(journal(d, 'e').length).fill('ok'),
  );
});

t.test('a call whose POST /mcp is dropped by its client is cancelled, the session kept', async (t) => {
  const d = await sharedDaemon(t);
  const before = journal(d, 'h').length;
  const running = await metric(d, 'berm_calls_cancelled_total{state="running"}');
  // a session opened by the SDK's client; the call is a POST of its own on a raw socket
  const client = new Client({ name: 'hostile-fair', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${d.url}/mcp`));
  await client.connect(transport);
  t.teardown(() => client.close());
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id: 7,
    method: 'tools/call',
    params: { name: 'h.spin', arguments: {} },
  });
  const s = connect({ port: d.address.port, host: '127.0.0.1' });
  s.on('error', () => undefined);
  s.write(
    `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
      `Accept: application/json, text/event-stream\r\nMcp-Session-Id: ${transport.sessionId}\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  t.ok(await until(async () => (await metric(d, 'berm_in_flight')) === 1, 5000), 'the spin runs');
  s.destroy();
  t.ok(await until(() => journal(d, 'h').length === before + 1, 3000), 'journaled within 3 s');
  const rec = journal(d, 'h')[before];
  t.equal(rec?.outcome, 'cancelled');
  t.match(rec?.detail ?? '', /interrupted/);
  t.equal(await metric(d, 'berm_calls_cancelled_total{state="running"}'), running + 1);
  // the session outlives the dropped request
  const r = await client.callTool({ name: 'e.echo', arguments: { after: 'drop' } });
  t.same(r.content, [{ type: 'text', text: '{"after":"drop"}' }]);
});

t.test('a call whose MCP session ends is cancelled', async (t) => {
  const d = await sharedDaemon(t);
  const before = journal(d, 'h').length;
  const queued = await metric(d, 'berm_calls_cancelled_total{state="queued"}');
  const running = await metric(d, 'berm_calls_cancelled_total{state="running"}');
  const client = new Client({ name: 'hostile-fair', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${d.url}/mcp`));
  await client.connect(transport);
  const call = client.callTool({ name: 'h.spin', arguments: {} }).catch((e: Error) => e);
  t.ok(await until(async () => (await metric(d, 'berm_in_flight')) === 1, 5000), 'the spin runs');
  // DELETE /mcp ends the session on the server
  await transport.terminateSession();
  t.ok(await until(() => journal(d, 'h').length === before + 1, 3000), 'journaled within 3 s');
  const rec = journal(d, 'h')[before];
  t.equal(rec?.outcome, 'cancelled');
  t.match(rec?.detail ?? '', /MCP session ended.*interrupted/);
  t.equal(await metric(d, 'berm_calls_cancelled_total{state="running"}'), running + 1);
  t.equal(await metric(d, 'berm_calls_cancelled_total{state="queued"}'), queued);
  await client.close();
  await call;
});

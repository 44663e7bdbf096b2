// Amplification through replies, against bermd over real sockets on loopback, each scenario bounded
// in time: the result size limit counts the JSON-encoded reply (4 MiB of a control byte is 24 MiB
// in JSON), and 200 clients that ask for a large result and never read it are held within the
// byte budget (--max-buffered-bytes): the others are answered 503 with Retry-After, the process's
// RSS stays bounded and /health answers promptly throughout.
import * as http from 'node:http';
import { spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import t from 'tap';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { join } from 'node:path';
import { elf, REPO, testDaemon } from './helpers/daemon.js';

const HOSTILE = elf('test/data/hostile.elf');
const LIMIT = 4 * 1024 * 1024;
const BURST = join(REPO, 'test/helpers/reply-burst.mjs');

t.test('the result size limit counts the JSON-encoded reply', async (t) => {
  const d = await testDaemon();
  t.teardown(() => d.stop());
  t.equal((await d.req('/harnesses/h', { method: 'PUT', body: HOSTILE })).status, 200);
  const big = (args: object): Promise<Response> =>
    d.req('/harnesses/h/tools/big', { method: 'POST', body: JSON.stringify(args) });

  // 'x' is one byte in JSON: 4 MiB is at the limit and comes back whole
  const x = await big({ n: LIMIT });
  t.equal(x.status, 200);
  const xr = (await x.json()) as { done?: string };
  t.equal(xr.done?.length, LIMIT, '4 MiB of x: the whole result');
  // U+0001 must be escaped in JSON (RFC 8259 section 7): six bytes, \u0001
  const under = Math.floor(LIMIT / 6);
  const u = await big({ n: under, c: 1 });
  t.equal(u.status, 200);
  t.equal(((await u.json()) as { done?: string }).done, '\u0001'.repeat(under), `${under} control bytes`);
  const n = 1024 * 1024;
  const over = await big({ n, c: 1 });
  t.equal(over.status, 200, 'a failed tool call, as for a raw result over the limit');
  t.same(await over.json(), {
    failed: `berm refused the tool's result of ${n} bytes: it is ${n * 6} bytes JSON-encoded, over the limit of ${LIMIT} bytes`,
  });
  // the same over SSE and over MCP
  const sse = await d.req('/harnesses/h/tools/big', {
    method: 'POST',
    body: JSON.stringify({ n, c: 1 }),
    headers: { accept: 'text/event-stream' },
  });
  t.match(
    await sse.text(),
    /event: result\ndata: \{"status":200,"failed":"berm refused the tool's result of 1048576 bytes: it is 6291456 bytes JSON-encoded/,
  );
  const client = new Client({ name: 'hostile-replies', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${d.url}/mcp`)));
  t.teardown(() => client.close());
  const r = await client.callTool({ name: 'h.big', arguments: { n, c: 1 } });
  t.equal(r.isError, true);
  t.match(
    (r.content as { text: string }[])[0]!.text,
    /it is 6291456 bytes JSON-encoded, over the limit of 4194304 bytes/,
  );
});

/** GET /health on a connection of its own; resolves with the status once the reply is read. */
function healthOnce(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/health', agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
  });
}

t.test('200 clients that never read a large result stay within the byte budget', async (t) => {
  const budget = 64 * 1024 * 1024;
  const d = await testDaemon({ maxBufferedBytes: '64M', workers: '2', writeTimeoutMs: '60000' });
  t.teardown(() => d.stop());
  t.ok(d.logs.some((l) => /max-buffered-bytes +67108864 +\(flag --max-buffered-bytes\)/.test(l)));
  t.equal((await d.req('/harnesses/h', { method: 'PUT', body: HOSTILE })).status, 200);
  // warm up: the worker's instance and the reply path have run once
  for (let i = 0; i < 3; i++)
    t.equal((await d.req('/harnesses/h/tools/big', { method: 'POST', body: `{"n":${LIMIT}}` })).status, 200);
  global.gc?.();
  // RSS covers the worker threads too (each guest instance's memory, touched or not yet); what the
  // budget holds lives on this thread: its heap (result strings) and external memory (reply bytes)
  const held = (): number => {
    const m = process.memoryUsage();
    return m.heapUsed + m.external;
  };
  const base = process.memoryUsage().rss;
  const baseHeld = held();
  let peak = base;
  let peakHeld = baseHeld;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
    peakHeld = Math.max(peakHeld, held());
  }, 20);
  t.teardown(() => clearInterval(sampler));

  // /health probed every 50 ms, on a connection of its own each time
  const probe = async (ms: number): Promise<number[]> => {
    const out: number[] = [];
    for (const end = performance.now() + ms; performance.now() < end;) {
      const t0 = performance.now();
      t.equal(await healthOnce(d.address.port), 200);
      out.push(performance.now() - t0);
      await new Promise((r) => setTimeout(r, 50));
    }
    return out;
  };
  // the burst: 200 clients ask for the result at once and never read it, and /health is asked every
  // 100 ms for 3 s from then, each probe on a new connection and none waiting for another, so the
  // probes are spread through the burst however long one of them waits; clients and probes run in
  // a process of their own (test/helpers/reply-burst.mjs), off the daemon's serving thread
  const burster = spawn(
    process.execPath,
    [
      BURST,
      String(d.address.port),
      String(process.pid),
      '200',
      '/harnesses/h/tools/big',
      `{"n":${LIMIT}}`,
      '30',
      '100',
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  t.teardown(() => burster.kill());
  let report = '';
  burster.stdout.on('data', (c: Buffer) => (report += c.toString()));
  const reported = new Promise<void>((resolve, reject) => {
    burster.stdout.on('data', () => report.endsWith('\n') && resolve());
    burster.once('exit', (code) => reject(new Error(`reply-burst exited (${code}) before its report`)));
  });
  burster.stdin.write('go\n');
  await reported;
  const { heads, probes } = JSON.parse(report) as {
    heads: string[];
    probes: { wall: number; cpu: number }[];
  };
  const wall = probes.map((p) => p.wall).sort((a, b) => a - b);
  const cpu = probes.map((p) => p.cpu).sort((a, b) => a - b);
  // then the 200 clients hold their connections and never read: /health must answer promptly
  const health = await probe(2000);
  clearInterval(sampler);

  const ok = heads.filter((h) => /^HTTP\/1\.1 200 /.test(h)).length;
  const refused = heads.filter((h) => /^HTTP\/1\.1 503 /.test(h));
  t.equal(ok + refused.length, 200, `every client answered: ${ok} results, ${refused.length} 503s`);
  t.ok(ok >= 1 && ok <= budget / LIMIT + 2, `at most the budget's worth of results is held (${ok})`);
  t.ok(refused.length > 0, 'the rest refused');
  t.match(refused[0], /\r\nretry-after: 1\r\n/i, '503 with Retry-After');
  const grew = (peak - base) / 2 ** 20;
  const grewHeld = (peakHeld - baseHeld) / 2 ** 20;
  const sorted = [...health].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)] ?? Infinity;
  const worst = sorted[sorted.length - 1] ?? Infinity;
  const mid = (xs: number[]): number => xs[Math.floor(xs.length / 2)] ?? Infinity;
  t.comment(
    `${ok} results held; RSS grew ${grew.toFixed(0)} MiB, heap and external memory ${grewHeld.toFixed(0)} MiB (budget 64 MiB; 200 results would be 800 MiB of replies and as much of result strings); /health after the burst median ${median.toFixed(1)} ms, worst ${worst.toFixed(1)} ms over ${health.length} probes; during the burst wall median ${mid(wall).toFixed(0)} ms (${wall.map((x) => x.toFixed(0)).join(' ')}), serving-thread CPU median ${mid(cpu).toFixed(0)} ms (${cpu.map((x) => x.toFixed(0)).join(' ')}); load average ${loadavg()[0]!.toFixed(1)}`,
  );
  // the held replies (the budget) plus their results' strings and the worker's copies; without the
  // budget the same clients pinned 200 x 4 MiB replies and their results
  t.ok(grewHeld < 64 + 128, `what the daemon holds is bounded (grew ${grewHeld.toFixed(0)} MiB)`);
  t.ok(grew < 800, `RSS bounded, under what the replies alone would take (grew ${grew.toFixed(0)} MiB)`);
  t.ok(median < 100, `/health median under 100 ms (${median.toFixed(1)} ms)`);
  t.ok(worst < 1000, `/health never stalled (worst ${worst.toFixed(1)} ms)`);
  // During the burst a probe that connects behind the 200 waits to be accepted: the serving thread
  // accepts one connection per turn of its event loop (libuv since 1.45), so such a probe waits
  // for 200 turns and the work done in them. The turns stay short (a large reply is encoded a
  // slice per turn), so a probe waits for about what the 200 requests themselves cost; when each
  // reply was encoded in one go it waited for every reply's encoding too. The wall time depends on
  // what else the machine runs (at load 22-34 on 2 cores the wall median was 0.3-2.2 s, the 100 ms
  // of the goal only after the burst); the serving thread's CPU time while a probe waited much
  // less: median 85-225 ms at that load, 1,362 ms with each reply encoded in one go (wall 6.5 s).
  t.ok(
    mid(cpu) < 500,
    `/health during the burst: the serving thread's work while a probe waited, median ${mid(cpu).toFixed(0)} ms`,
  );
  const still = await fetch(`${d.url}/health`);
  t.equal(still.status, 200);
});

// A hostile client and a hostile harness against a real bermd process (bin/bermd.js on
// 127.0.0.1, port 0): whatever they send, bermd answers other clients and loses nothing. A
// child process, so a defect that hangs bermd's serving thread fails the test instead of hanging
// the test file.
import t, { type Test } from 'tap';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBermd, stopBermd } from './helpers/cluster.js';
import { elf, testDaemon } from './helpers/daemon.js';
import { TEST_CACHE } from './helpers/fixtures.js';

const HOSTILE = elf('test/data/hostile.elf');
const sha256 = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');
const tmp = mkdtempSync(join(tmpdir(), 'berm-hostile-daemon-'));
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));

/** fetch with a deadline: a bermd that stops answering fails the request instead of hanging. */
async function req(url: string, init: RequestInit = {}, ms = 30_000): Promise<Response> {
  return fetch(url, { ...init, signal: AbortSignal.timeout(ms) });
}

t.test("a harness's backtracking parameter pattern cannot hang bermd's serving thread", async (t) => {
  // the hostile harness's tool `match` declares {"s": {"pattern": "^(a|a)*$"}}: a backtracking
  // engine takes 2^n steps to refuse "a" x n + "b". bermd validates arguments on its serving
  // thread (HTTP and MCP), so such a run stops every request to it.
  const b = await startBermd({ root: join(tmp, 'pattern'), cacheDir: TEST_CACHE });
  t.teardown(() => stopBermd(b));
  const put = await req(`${b.url}/harnesses/h`, { method: 'PUT', body: HOSTILE }, 90_000);
  t.equal(put.status, 200, 'deployed');
  const slow = req(`${b.url}/harnesses/h/tools/match`, {
    method: 'POST',
    body: JSON.stringify({ s: 'a'.repeat(40) + 'b' }),
  }).then(
    async (r) => ({ status: r.status, body: await r.text() }),
    (e: Error) => ({ status: 0, body: e.message }),
  );
  // meanwhile (once that request had time to arrive) another client is served
  await new Promise((r) => setTimeout(r, 1000));
  const health = await req(`${b.url}/health`).then(
    (r) => r.status,
    (e: Error) => e.message,
  );
  t.equal(health, 200, 'bermd answers /health while the argument is checked');
  const r = await slow;
  t.equal(r.status, 400, r.body);
  t.match(r.body, /arguments do not match the parameters of h\.match: \/s: must match pattern/);
  const ok = await req(`${b.url}/harnesses/h/tools/match`, { method: 'POST', body: '{"s":"aaaa"}' });
  t.same(await ok.json(), { done: 'aaaa' });
});

t.test(
  'a deployment whose image was damaged on disk can be removed, and is gone after a restart',
  async (t) => {
    // bermd skips (and never serves) a deployment whose stored image no longer hashes to its digest;
    // the operator then removes it with DELETE, as any other deployment
    const ECHO = elf('fixtures/build/echo-gcc-O2.elf');
    const TEXT = elf('fixtures/build/text-gcc-O2.elf');
    const d = await testDaemon();
    t.equal((await d.req('/harnesses/good', { method: 'PUT', body: ECHO })).status, 200);
    t.equal((await d.req('/harnesses/hurt', { method: 'PUT', body: TEXT })).status, 200);
    await d.stop();
    writeFileSync(join(d.root, 'deployments', 'images', `${sha256(TEXT)}.elf`), 'not the image any more');

    const d2 = await testDaemon({}, {}, d.root);
    t.teardown(() => d2.stop());
    t.ok(
      d2.logs.some((l) =>
        /warning: harness hurt .* not restored: .*the image is damaged; deploy it again \(PUT \/harnesses\/hurt\) or remove it \(DELETE \/harnesses\/hurt\)$/.test(
          l,
        ),
      ),
      'the boot log names it',
    );
    t.equal((await d2.req('/harnesses/hurt')).status, 404, 'never served');
    const del = await d2.req('/harnesses/hurt', { method: 'DELETE' });
    t.equal(del.status, 204, 'removed');
    t.equal((await d2.req('/harnesses/hurt', { method: 'DELETE' })).status, 404, 'then unknown');
    t.equal((await d2.req('/harnesses/nope', { method: 'DELETE' })).status, 404);
    await d2.stop();

    const d3 = await testDaemon({}, {}, d.root);
    t.teardown(() => d3.stop());
    t.notOk(
      d3.logs.some((l) => l.includes('harness hurt')),
      'no warning at the next start',
    );
    const r = await d3.req('/harnesses/good/tools/echo', { method: 'POST', body: '{"k":1}' });
    t.same(await r.json(), { done: '{"k":1}' }, 'the other deployment is intact');
  },
);

t.test('arguments too deep or too large for a tool call: clear refusals over HTTP and MCP', async (t) => {
  // JSON.parse takes any depth; the checks after it (serialising, a recursive schema) recurse on
  // the host's stack. A raw JSON-RPC client: the SDK's own client could not even send this.
  const d = await testDaemon();
  t.teardown(() => d.stop());
  t.equal(
    (await d.req('/harnesses/e', { method: 'PUT', body: elf('fixtures/build/echo-gcc-O2.elf') })).status,
    200,
  );
  const levels = 400_000;
  const deep = `{"a":${'['.repeat(levels)}${']'.repeat(levels)}}`;
  const mcp = (body: string, sid?: string) =>
    d.req('/mcp', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...(sid ? { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-06-18' } : {}),
      },
      body,
    });
  const init = await mcp(
    JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'deep', version: '1' } },
    }),
  );
  const sid = init.headers.get('mcp-session-id')!;
  await init.text();
  await (await mcp('{"jsonrpc":"2.0","method":"notifications/initialized"}', sid)).text();
  const call = await mcp(
    `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"e.echo","arguments":${deep}}}`,
    sid,
  );
  const text = await call.text();
  // arguments the tool cannot take are a tool result the model reads (isError), not a protocol error
  t.match(text, /"isError":true/, 'an isError result');
  t.match(
    text,
    /the arguments of e\.echo nest too deeply to check \(Maximum call stack size exceeded\); flatten them/,
  );
  const http = await d.req('/harnesses/e/tools/echo', { method: 'POST', body: deep });
  t.equal(http.status, 200, 'over HTTP the text is handed to the guest as it is (nothing recurses)');
  t.equal(((await http.json()) as { done: string }).done.length, deep.length);

  // arguments within the body limit (2 MiB) but over a tool call's (1 MiB): a refusal naming the
  // limit, not a 500 from the run
  const big = JSON.stringify({ pad: 'x'.repeat(1_500_000) });
  const over = await d.req('/harnesses/e/tools/echo', { method: 'POST', body: big });
  t.equal(over.status, 413);
  t.match(
    ((await over.json()) as { error: string }).error,
    /^arguments of 1500010 bytes are over the limit of 1048576 bytes of a tool call$/,
  );
  const overMcp = await (
    await mcp(
      `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"e.echo","arguments":${big}}}`,
      sid,
    )
  ).text();
  t.match(overMcp, /"isError":true/);
  t.match(overMcp, /arguments of 1500010 bytes are over the limit of 1048576 bytes/);
  const ok = await d.req('/harnesses/e/tools/echo', { method: 'POST', body: '{"k":1}' });
  t.same(await ok.json(), { done: '{"k":1}' }, 'bermd carries on');
});

/**
 * A test bermd (stopped at the test's end) with the queue guest deployed as `qg` and `n` wakes of
 * `payload` armed over the API, `batch` requests at a time: ids `${prefix}0`.., due an hour from
 * now, 1 ms apart (so listed in id order). Asserts the deploy's 200 and every arm's 201.
 */
async function daemonWithWakes(
  t: Test,
  n: number,
  batch: number,
  prefix: string,
  payload: string,
): Promise<Awaited<ReturnType<typeof testDaemon>>> {
  const d = await testDaemon();
  t.teardown(() => d.stop());
  t.equal(
    (await d.req('/harnesses/qg', { method: 'PUT', body: elf('test/data/queue-guest.elf') })).status,
    200,
  );
  const base = Date.now() + 3_600_000;
  for (let i = 0; i < n; i += batch) {
    const s = await Promise.all(
      Array.from({ length: Math.min(batch, n - i) }, (_, k) =>
        d
          .req('/wakes', {
            method: 'POST',
            body: JSON.stringify({ harness: 'qg', at: base + i + k, id: `${prefix}${i + k}`, payload }),
          })
          .then((r) => r.status),
      ),
    );
    t.same(
      s.filter((x) => x !== 201),
      [],
      `wakes ${i}.. armed`,
    );
  }
  return d;
}

t.test('GET /wakes answers a bounded page of a large due-set, with the total pending', async (t) => {
  // a harness with the schedule grant can fill the due-set (millions of wakes, 64 KiB of payload
  // each); listing it whole would build gigabytes on the serving thread
  const d = await daemonWithWakes(t, 1001, 50, 'w', 'p');
  type Page = { wakes: { id: string }[]; pending: number; truncated?: boolean };
  const all = (await (await d.req('/wakes')).json()) as Page;
  t.equal(all.wakes.length, 1000, 'the default page');
  t.equal(all.pending, 1001);
  t.equal(all.truncated, true);
  t.equal(all.wakes[0]!.id, 'w0', 'earliest first');
  const two = (await (await d.req('/wakes?limit=2')).json()) as Page;
  t.same(
    two.wakes.map((w) => w.id),
    ['w0', 'w1'],
  );
  for (const bad of ['0', '10001', 'abc', '1.5', '-1']) {
    const r = await d.req(`/wakes?limit=${bad}`);
    t.equal(r.status, 400, `limit=${bad}`);
    t.match(((await r.json()) as { error: string }).error, /limit must be a whole number from 1 to 10000/);
  }
  t.notOk(
    ((await (await d.req('/wakes?limit=10000')).json()) as Page).truncated,
    'all of them in one page at the largest limit',
  );
});

t.test('GET /wakes stops at 4 MiB of payload, whatever the limit', async (t) => {
  // 10,000 wakes of 64 KiB each were read and answered at ?limit=10000: ~655 MB of JSON (and six
  // times that for payloads of control characters, each escaped as \uXXXX) in one request
  // 60,000 UTF-8 bytes each (30,000 characters)
  const payload = 'é'.repeat(30_000);
  const d = await daemonWithWakes(t, 100, 20, 'b', payload);
  type Page = { wakes: { id: string; payload: string }[]; pending: number; truncated?: boolean };
  const page = (await (await d.req('/wakes?limit=10000')).json()) as Page;
  // the 70th payload brings the listed ones to 4,200,000 bytes, past 4 MiB (4,194,304)
  t.same(
    page.wakes.map((w) => w.id),
    Array.from({ length: 70 }, (_, i) => `b${i}`),
    'the earliest 70',
  );
  t.equal(page.wakes[69]!.payload, payload, 'each whole');
  t.equal(page.pending, 100);
  t.equal(page.truncated, true);
});

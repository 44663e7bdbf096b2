// Small refusals of bermd over real sockets on loopback, each bounded in time: MCP authority values
// over the limit refused as over HTTP (not cut short), malformed MCP params answered InvalidParams
// with one sentence, the state directory private to its owner (files 0600, folders 0700).
import * as fs from 'node:fs';
import * as path from 'node:path';
import t, { type Test } from 'tap';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { elf, testDaemon, type TestDaemon } from './helpers/daemon.js';

const ECHO = elf('fixtures/build/echo-gcc-O2.elf');

async function mcpClient(t: Test, d: TestDaemon, token: string): Promise<Client> {
  const client = new Client({ name: 'hostile-load', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${d.url}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  t.teardown(() => client.close());
  return client;
}

t.test('MCP: authority over 256 characters is a 400, malformed params a -32602 sentence', async (t) => {
  const token = 'hostile-mcp-token';
  const d = await testDaemon({}, { BERMD_TOKEN: token });
  t.teardown(() => d.stop());
  t.equal((await d.req('/harnesses/echo', { method: 'PUT', body: ECHO })).status, 200);
  const client = await mcpClient(t, d, token);

  // 256 characters is the limit (docs/daemon.md, Authority): accepted as it is
  const ok = await client.callTool({
    name: 'echo.echo',
    arguments: { x: 1 },
    _meta: { 'berm/agent': 'a'.repeat(256), 'berm/session': 's'.repeat(256) },
  });
  t.notOk(ok.isError, 'a 256-character agent and session are taken');
  for (const key of ['berm/agent', 'berm/session', 'berm/sender']) {
    const err = await client
      .callTool({ name: 'echo.echo', arguments: { x: 1 }, _meta: { [key]: 'x'.repeat(257) } })
      .then(
        () => null,
        (e: unknown) => e as Error & { code?: number },
      );
    t.ok(err, `${key} of 257 characters is refused, not cut to 256`);
    t.equal(err?.code, 400, `${key}: HTTP 400, as X-Berm-* headers over 256 characters`);
    t.match(err?.message, `_meta[\\"${key}\\"] is longer than 256 characters`);
    t.match(err?.message, /"code":-32602/, 'the body is a JSON-RPC InvalidParams error');
  }
  // the same over HTTP, for comparison
  const h = await d.req('/harnesses/echo/tools/echo', {
    method: 'POST',
    body: '{}',
    headers: { 'x-berm-agent': 'x'.repeat(257) },
  });
  t.equal(h.status, 400);

  // malformed params: a name that is not a string, arguments that are not an object, a cursor
  // that is not a string, a resource uri missing
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['tools/call', { name: 5 }, /^invalid tools\/call params: params\.name: .*expected string/],
    [
      'tools/call',
      { name: 'echo.echo', arguments: [1, 2] },
      /^invalid tools\/call params: params\.arguments: /,
    ],
    ['tools/list', { cursor: 7 }, /^invalid tools\/list params: params\.cursor: /],
    ['resources/read', {}, /^invalid resources\/read params: params\.uri: /],
  ];
  for (const [method, params, want] of cases) {
    const err = await client.request({ method, params } as never, CallToolResultSchema).then(
      () => null,
      (e: unknown) => e,
    );
    t.ok(err instanceof McpError, `${method} ${JSON.stringify(params)} is refused`);
    if (!(err instanceof McpError)) continue;
    t.equal(err.code, ErrorCode.InvalidParams, `${method}: -32602 (not -32603)`);
    // the SDK's client prefixes "MCP error -32602: "
    const msg = err.message.replace(/^MCP error -?\d+: /, '');
    t.match(msg, want, `${method}: one sentence naming the field`);
    t.ok(msg.length < 160, `${method}: short (${msg.length} characters), no validator report`);
    t.notMatch(msg, /[[{]/, `${method}: no JSON dump`);
  }
  // the session still serves
  const again = await client.callTool({ name: 'echo.echo', arguments: { y: 2 } });
  t.notOk(again.isError);
});

/** Mode bits of a path. */
const mode = (p: string): number => fs.statSync(p).mode & 0o777;

t.test("the state under --root is its owner's alone: files 0600, folders 0700", async (t) => {
  const d = await testDaemon({ cacheDir: undefined });
  const root = d.root;
  t.teardown(() => fs.rmSync(root, { recursive: true, force: true }));
  const put = await d.req('/harnesses/echo', { method: 'PUT', body: ECHO });
  t.equal(put.status, 200);
  const digest = ((await put.json()) as { digest: string }).digest;
  t.equal((await d.req('/harnesses/echo/tools/echo', { method: 'POST', body: '{"a":1}' })).status, 200);
  const check = (when: string): void => {
    const cache = path.join(root, 'cache');
    const files = [
      'state.sqlite',
      'journal.jsonl',
      'kv.sqlite',
      'subscriptions.sqlite',
      'state.lock',
      'deployments/index.json',
      `deployments/images/${digest}.elf`,
      ...fs.readdirSync(cache).map((f) => `cache/${f}`),
    ];
    for (const f of files) {
      if (!fs.existsSync(path.join(root, f))) continue;
      t.equal(mode(path.join(root, f)).toString(8), '600', `${when}: ${f} is 0600`);
    }
    t.ok(fs.readdirSync(cache).length > 0, `${when}: the cache holds the translation`);
    for (const dir of ['.', 'cache', 'deployments', 'deployments/images'])
      t.equal(mode(path.join(root, dir)).toString(8), '700', `${when}: ${dir}/ is 0700`);
  };
  check('a fresh root');
  await d.stop();
  // state left world-readable (an older version, another umask) is narrowed at the next boot
  for (const f of ['state.sqlite', 'journal.jsonl', `deployments/images/${digest}.elf`])
    fs.chmodSync(path.join(root, f), 0o644);
  for (const dir of ['.', 'cache', 'deployments', 'deployments/images'])
    fs.chmodSync(path.join(root, dir), 0o755);
  const again = await testDaemon({ cacheDir: undefined }, {}, root);
  t.teardown(() => again.stop());
  check('after a restart');
});

// A client of upstream's daemon (crabtalk's bermd), written from the shapes its documentation and
// API fix, not from berm's types: it drives bermd over HTTP (list as a bare array of {name,
// digest, usage, tools:[{name, description, parameters}]}, inspect, deploy by PUT of the ELF, call
// answering {"done"} or {"failed"}, refusals as {"error"} with 404 for what does not exist, 400
// for a deploy under a bad name, undeploy 204) and over MCP with the official SDK client
// (instructions naming `{harness}.{tool}` and `berm://{harness}/usage`, tools/list, bad arguments
// as an isError result, -32002 for a resource that does not exist). Then a state root laid out
// as upstream's daemon lays it out (<root>/harnesses/<name>.elf, <root>/cache/) is served by
// bermd, and upstream's files are left exactly as they were.
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { elf, testDaemon } from './helpers/daemon.js';

const ECHO = elf('fixtures/build/echo-gcc-O2.elf');
const TEXT = elf('fixtures/build/text-gcc-O2.elf');
const MISBEHAVE = elf('fixtures/build/misbehave-gcc-O2.elf');
const PLAIN = elf('fixtures/build/compute-gcc-O2.elf');

/** sha256 of the ELF as lowercase hex: upstream's `digest` field. */
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

/** Upstream's harness object: exactly these fields must be there with these types. */
function isHarness(
  t: Test,
  h: unknown,
  what: string,
): asserts h is {
  name: string;
  digest: string;
  usage: string;
  tools: { name: string; description: string; parameters: unknown }[];
} {
  const o = h as Record<string, unknown>;
  t.type(o.name, 'string', `${what}: name`);
  t.match(o.digest, /^[0-9a-f]{64}$/, `${what}: digest is sha256 hex`);
  t.type(o.usage, 'string', `${what}: usage`);
  t.ok(Array.isArray(o.tools), `${what}: tools is an array`);
  for (const tool of o.tools as Record<string, unknown>[]) {
    t.type(tool.name, 'string');
    t.type(tool.description, 'string');
    t.ok('parameters' in tool, `${what}: ${String(tool.name)} has parameters`);
  }
}

t.test('HTTP as upstream documents it', async (t) => {
  const d = await testDaemon();
  t.teardown(() => d.stop());
  const u = (p: string): string => `${d.url}${p}`;

  // an empty daemon lists []
  const empty = await fetch(u('/harnesses'));
  t.equal(empty.status, 200);
  t.same(await empty.json(), [], 'a bare empty array');

  // deploy: PUT the ELF bytes, 200 with the harness
  for (const [name, bytes] of [
    ['text', TEXT],
    ['echo', ECHO],
    ['mis', MISBEHAVE],
  ] as const) {
    const r = await fetch(u(`/harnesses/${name}`), { method: 'PUT', body: bytes });
    t.equal(r.status, 200, `deploy ${name}`);
    const h = await r.json();
    isHarness(t, h, `deploy ${name}`);
    t.equal(h.name, name);
    t.equal(h.digest, sha(bytes), 'digest = sha256 of the ELF');
  }

  // list: a bare array sorted by name; `.[]` works on it
  const list = await fetch(u('/harnesses'));
  t.equal(list.status, 200);
  t.match(list.headers.get('content-type'), /^application\/json/);
  const arr = (await list.json()) as unknown[];
  t.ok(Array.isArray(arr), 'GET /harnesses is a JSON array');
  t.same(
    arr.map((h) => (h as { name: string }).name),
    ['echo', 'mis', 'text'],
  );
  for (const h of arr) isHarness(t, h, 'listed');

  // inspect
  const one = await fetch(u('/harnesses/echo'));
  t.equal(one.status, 200);
  const echo = await one.json();
  isHarness(t, echo, 'inspect');
  t.equal(echo.usage, 'Echo tools: return what you send.');
  t.same(
    echo.tools.map((x) => x.name),
    ['echo', 'echo_len'],
  );

  // call: the body is the argument object; done
  const call = await fetch(u('/harnesses/echo/tools/echo'), { method: 'POST', body: '{"hello":"world"}' });
  t.equal(call.status, 200);
  t.same(await call.json(), { done: '{"hello":"world"}' });

  // a failed call: 200 {"failed": message}
  const failed = await fetch(u('/harnesses/mis/tools/always_fails'), { method: 'POST', body: '{}' });
  t.equal(failed.status, 200);
  const f = (await failed.json()) as Record<string, unknown>;
  t.same(Object.keys(f), ['failed'], 'only "failed"');
  t.type(f.failed, 'string');

  // refusals: {"error": string}; unknown tool and unknown harness 404
  for (const [method, path, status] of [
    ['POST', '/harnesses/echo/tools/nope', 404],
    ['POST', '/harnesses/nope/tools/echo', 404],
    ['GET', '/harnesses/nope', 404],
    ['DELETE', '/harnesses/nope', 404],
    // a name that breaks the rule: nothing by it can exist (404), and it cannot be deployed (400)
    ['GET', '/harnesses/Not.A.Name', 404],
    ['DELETE', '/harnesses/Not.A.Name', 404],
    ['PUT', '/harnesses/Not.A.Name', 400],
  ] as const) {
    const r = await fetch(u(path), {
      method,
      ...(method === 'POST' ? { body: '{}' } : method === 'PUT' ? { body: ECHO } : {}),
    });
    t.equal(r.status, status, `${method} ${path}`);
    const body = (await r.json()) as Record<string, unknown>;
    t.type(body.error, 'string', `${method} ${path}: {"error": string}`);
  }

  // undeploy: 204 and an empty body; gone afterwards
  const del = await fetch(u('/harnesses/mis'), { method: 'DELETE' });
  t.equal(del.status, 204);
  t.equal(await del.text(), '');
  t.equal((await fetch(u('/harnesses/mis'))).status, 404);
  t.same(
    ((await (await fetch(u('/harnesses'))).json()) as { name: string }[]).map((h) => h.name),
    ['echo', 'text'],
  );
});

t.test('MCP as upstream documents it', async (t) => {
  const d = await testDaemon();
  t.teardown(() => d.stop());
  for (const [name, bytes] of [
    ['text', TEXT],
    ['plain', PLAIN],
  ] as const) {
    t.equal((await fetch(`${d.url}/harnesses/${name}`, { method: 'PUT', body: bytes })).status, 200, name);
  }
  const client = new Client({ name: 'reference-client', version: '0.0.3' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${d.url}/mcp`)));
  t.teardown(() => client.close());

  // initialize: instructions explain the naming and the usage resources
  const instructions = client.getInstructions();
  t.type(instructions, 'string', 'instructions present');
  t.match(instructions, '{harness}.{tool}');
  t.match(instructions, 'berm://{harness}/usage');
  t.same(client.getServerCapabilities()?.tools, { listChanged: true });
  t.same(client.getServerCapabilities()?.resources, { listChanged: true });

  // tools/list: {harness}.{tool}, with the manifest's schema
  const tools = (await client.listTools()).tools;
  t.ok(
    tools.some((x) => x.name === 'text.stats'),
    'text.stats listed',
  );
  for (const x of tools) t.match(x.name, /^[a-z0-9_-]+\.[^.]/, `${x.name} is harness.tool`);

  // tools/call with arguments the schema refuses: a result with isError, the message as text
  const bad = await client.callTool({ name: 'text.stats', arguments: { values: 'not an array' } });
  t.equal(bad.isError, true, 'isError result, not a JSON-RPC error');
  const content = bad.content as { type: string; text: string }[];
  t.equal(content[0]!.type, 'text');
  t.match(content[0]!.text, /values/, 'the message names the property');

  // resources: the usage of a harness that has one; an empty usage reads as an empty text
  const listed = (await client.listResources()).resources.map((r) => r.uri);
  t.same(listed, ['berm://text/usage'], 'only a harness with usage is listed');
  const usage = await client.readResource({ uri: 'berm://text/usage' });
  t.equal(
    (usage.contents[0] as { text: string }).text,
    'Number statistics and string formatting, exercising picolibc.',
  );
  const none = await client.readResource({ uri: 'berm://plain/usage' });
  t.equal((none.contents[0] as { text: string }).text, '', 'empty usage: empty text');

  // a resource that does not exist: -32002 (resource not found)
  for (const uri of ['berm://nope/usage', 'berm://text/other', 'file:///etc/passwd']) {
    const e = (await client.readResource({ uri }).then(
      () => null,
      (err: unknown) => err,
    )) as { code?: number } | null;
    t.equal(e?.code, -32002, `${uri}: resource not found`);
  }
});

/** Every file under `dir` with its bytes' sha256, size and mtime (to show nothing changed). */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string, rel: string): void => {
    for (const n of readdirSync(d).sort()) {
      const p = join(d, n);
      const st = statSync(p);
      if (st.isDirectory()) walk(p, `${rel}${n}/`);
      else out[`${rel}${n}`] = `${sha(readFileSync(p))} ${st.size} ${st.mtimeMs}`;
    }
  };
  walk(dir, '');
  return out;
}

t.test("a state root laid out by upstream's daemon", async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'bermd-upstream-root-'));
  mkdirSync(join(root, 'harnesses'));
  mkdirSync(join(root, 'cache'));
  writeFileSync(join(root, 'harnesses', 'echo.elf'), ECHO);
  writeFileSync(join(root, 'harnesses', 'text.elf'), TEXT);
  writeFileSync(join(root, 'harnesses', 'notes.txt'), 'not an image');
  // the code cache of upstream's engine: opaque to berm
  writeFileSync(join(root, 'cache', 'module-0'), Buffer.from([1, 2, 3, 4]));
  const before = { harnesses: snapshot(join(root, 'harnesses')), cache: snapshot(join(root, 'cache')) };

  const names = async (url: string): Promise<[string, string][]> =>
    ((await (await fetch(`${url}/harnesses`)).json()) as { name: string; digest: string }[]).map((h) => [
      h.name,
      h.digest,
    ]);

  const d = await testDaemon({}, {}, root);
  t.same(
    await names(d.url),
    [
      ['echo', sha(ECHO)],
      ['text', sha(TEXT)],
    ],
    "upstream's deployments are served",
  );
  const call = await fetch(`${d.url}/harnesses/echo/tools/echo`, { method: 'POST', body: '{"a":1}' });
  t.same(await call.json(), { done: '{"a":1}' });
  t.ok(
    d.logs.some((l) => /imported 2 upstream deployments from .*harnesses: echo, text/.test(l)),
    d.logs.join('\n'),
  );
  // undeployed from bermd: it stays undeployed after a restart, and upstream's file stays
  t.equal((await fetch(`${d.url}/harnesses/echo`, { method: 'DELETE' })).status, 204);
  await d.stop();

  const d2 = await testDaemon({}, {}, root);
  t.same(await names(d2.url), [['text', sha(TEXT)]], 'an undeploy holds across restarts');
  await d2.stop();
  t.same(
    { harnesses: snapshot(join(root, 'harnesses')), cache: snapshot(join(root, 'cache')) },
    before,
    "upstream's files are untouched: same names, bytes and modification times",
  );

  // upstream deploys echo again (new bytes under the name): bermd picks that up
  writeFileSync(join(root, 'harnesses', 'echo.elf'), TEXT);
  const d3 = await testDaemon({}, {}, root);
  t.teardown(() => d3.stop());
  t.same(
    await names(d3.url),
    [
      ['echo', sha(TEXT)],
      ['text', sha(TEXT)],
    ],
    'a changed upstream image is imported again',
  );
});

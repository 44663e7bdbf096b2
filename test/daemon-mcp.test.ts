// bermd's MCP endpoint driven by the official SDK's own Client over streamable HTTP: tools listed
// with the manifest's schema, called (done, berm.fail as isError, a trap as an error naming it,
// bad arguments as an isError result naming the property), list_changed after a deploy and an undeploy, usage resource.
import t from 'tap';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  ErrorCode,
  McpError,
  ResourceListChangedNotificationSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { elf, testDaemon } from './helpers/daemon.js';

const ECHO = elf('fixtures/build/echo-gcc-O2.elf');
const TEXT = elf('fixtures/build/text-gcc-O2.elf');
const PROBE = elf('examples/probe.elf');
const MISBEHAVE = elf('fixtures/build/misbehave-gcc-O2.elf');
const HOSTILE = elf('test/data/hostile.elf');

function waitFor(pred: () => boolean, what: string, ms = 10_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const tick = setInterval(() => {
      if (pred()) {
        clearInterval(tick);
        resolve();
      } else if (Date.now() - t0 > ms) {
        clearInterval(tick);
        reject(new Error(`timed out waiting for ${what}`));
      }
    }, 20);
  });
}

t.test('MCP: tools, calls, list_changed, usage resource', async (t) => {
  const token = 'mcp-test-token';
  const d = await testDaemon({ limit: ['drainMs=60000'] }, { BERMD_TOKEN: token });
  t.teardown(() => d.stop());
  t.equal((await d.req('/harnesses/text', { method: 'PUT', body: TEXT })).status, 200);
  t.equal((await d.req('/harnesses/probe', { method: 'PUT', body: PROBE })).status, 200);
  t.equal((await d.req('/harnesses/mis', { method: 'PUT', body: MISBEHAVE })).status, 200);

  const client = new Client({ name: 'berm-test-agent', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${d.url}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  let toolsChanged = 0;
  let resourcesChanged = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => void toolsChanged++);
  client.setNotificationHandler(ResourceListChangedNotificationSchema, () => void resourcesChanged++);
  await client.connect(transport);
  t.teardown(() => client.close());

  const caps = client.getServerCapabilities();
  t.same(caps?.tools, { listChanged: true });
  t.same(caps?.resources, { listChanged: true });

  const tools = (await client.listTools()).tools;
  const names = tools.map((x) => x.name).sort();
  t.same(names, [
    'mis.always_fails',
    'mis.no_result',
    'probe.call',
    'probe.down',
    'probe.oob',
    'probe.trap',
    'text.format',
    'text.number',
    'text.stats',
  ]);
  const stats = tools.find((x) => x.name === 'text.stats')!;
  t.same(stats.inputSchema, {
    type: 'object',
    properties: { values: { type: 'array', items: { type: 'number' } } },
    required: ['values'],
  });
  t.equal(stats.description, 'Sort a list of numbers and report count, min, max, sum, mean and median.');

  const r = await client.callTool({ name: 'text.stats', arguments: { values: [4, 1, 3] } });
  t.notOk(r.isError);
  const content = r.content as { type: string; text: string }[];
  t.equal(content[0]!.type, 'text');
  t.match(content[0]!.text, /"count":3,"min":1\.000,"max":4\.000,"sum":8\.000/);

  const failed = await client.callTool({ name: 'mis.always_fails', arguments: {} });
  t.equal(failed.isError, true, "a tool's own failure is an isError result");

  // an error reaches the client with the SDK's one "MCP error CODE: " prefix, then berm's text
  const mcpError = async (name: string, args: Record<string, unknown>) => {
    const e = (await client.callTool({ name, arguments: args }).then(
      () => t.fail(`${name} should have been refused`),
      (err: unknown) => err,
    )) as McpError;
    t.type(e, McpError, name);
    return e;
  };
  const trap = await mcpError('probe.trap', {});
  t.match(trap.message, /^MCP error -32603: probe\.trap trapped: MemoryFault: .* at pc 0x[0-9a-f]+/);
  t.equal(trap.code, ErrorCode.InternalError);
  t.match(trap.data, { trap: 'MemoryFault' });
  // arguments against the schema: a tool result the model can read and correct its call by
  const badArgs = await client.callTool({ name: 'text.stats', arguments: {} });
  t.equal(badArgs.isError, true, 'bad arguments are an isError result');
  t.match((badArgs.content as { text: string }[])[0]!.text, /\/values: must have required property/);
  t.match((await mcpError('text.nope', {})).message, /^MCP error -32602: [^]*no tool named nope/);
  t.match((await mcpError('nope.x', {})).message, /^MCP error -32602: [^]*no harness named nope/);
  t.match((await mcpError('notdotted', {})).message, /^MCP error -32602: tool name "notdotted"/);
  t.equal(trap.message.split('MCP error').length, 2, `one prefix: ${trap.message}`);

  const resources = (await client.listResources()).resources.map((x) => x.uri).sort();
  t.same(resources, ['berm://mis/usage', 'berm://probe/usage', 'berm://text/usage']);
  const usage = await client.readResource({ uri: 'berm://text/usage' });
  t.same(usage.contents, [
    {
      uri: 'berm://text/usage',
      mimeType: 'text/plain',
      text: 'Number statistics and string formatting, exercising picolibc.',
    },
  ]);

  // a deploy reaches the client as list_changed, and the new tools are listed
  const beforeTools = toolsChanged;
  const beforeResources = resourcesChanged;
  t.equal((await d.req('/harnesses/echo', { method: 'PUT', body: ECHO })).status, 200);
  await waitFor(
    () => toolsChanged > beforeTools && resourcesChanged > beforeResources,
    'list_changed after deploy',
  );
  t.ok(
    (await client.listTools()).tools.some((x) => x.name === 'echo.echo'),
    'echo.echo listed after deploy',
  );
  const echoed = await client.callTool({ name: 'echo.echo', arguments: { q: 'x' } });
  t.same(echoed.content, [{ type: 'text', text: '{"q":"x"}' }]);

  const afterDeploy = toolsChanged;
  t.equal((await d.req('/harnesses/echo', { method: 'DELETE' })).status, 204);
  await waitFor(() => toolsChanged > afterDeploy, 'list_changed after undeploy');
  t.notOk(
    (await client.listTools()).tools.some((x) => x.name.startsWith('echo.')),
    'echo gone after undeploy',
  );

  // an open notification stream is not work in progress: stopping does not wait for the drain bound
  const t0 = Date.now();
  await d.stop();
  t.ok(Date.now() - t0 < 30_000, `stopped in ${Date.now() - t0} ms with an MCP session open (bound 60 s)`);
});

t.test('a result over the 4 MiB limit: a failed tool call over HTTP and MCP; bermd stays up', async (t) => {
  const d = await testDaemon();
  t.teardown(() => d.stop());
  t.equal((await d.req('/harnesses/hz', { method: 'PUT', body: HOSTILE })).status, 200);
  const max = 4 * 1024 * 1024;
  const message = `berm refused the tool's result of ${max + 1} bytes: it is over the limit of ${max} bytes`;

  // HTTP: the shape of any other tool failure (200 {"failed"})
  const over = await d.req('/harnesses/hz/tools/big', {
    method: 'POST',
    body: JSON.stringify({ n: max + 1 }),
  });
  t.equal(over.status, 200);
  t.same(await over.json(), { failed: message });
  const at = await d.req('/harnesses/hz/tools/big', { method: 'POST', body: JSON.stringify({ n: max }) });
  t.equal(at.status, 200, 'exactly 4 MiB passes');
  t.equal(((await at.json()) as { done: string }).done, 'x'.repeat(max));

  // MCP (the official SDK's client): an isError result carrying berm's message
  const client = new Client({ name: 'berm-test-agent', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${d.url}/mcp`)));
  t.teardown(() => client.close());
  const r = await client.callTool({ name: 'hz.big', arguments: { n: max + 1 } });
  t.equal(r.isError, true);
  t.same(r.content, [{ type: 'text', text: message }]);

  t.equal((await d.req('/health')).status, 200, 'bermd still answers');
  const metrics = await (await d.req('/metrics')).text();
  t.match(metrics, /^berm_invocations_total\{trigger="call",outcome="failed"\} 2$/m, 'counted as failures');
});

t.test('a result that is not UTF-8, or none: a failed tool call over HTTP and MCP, logs kept', async (t) => {
  const d = await testDaemon();
  t.teardown(() => d.stop());
  t.equal((await d.req('/harnesses/hz', { method: 'PUT', body: HOSTILE })).status, 200);
  const badResult =
    "berm refused the tool's result of 10 bytes: it is not valid UTF-8 (the first bad byte is at offset 3)";
  const noResult = 'tool silent returned without calling berm.done or berm.fail';

  // HTTP: 200 {"failed"}, the shape of any other tool failure (was 500)
  const bad = await d.req('/harnesses/hz/tools/badutf8', { method: 'POST', body: '{"how":"done"}' });
  t.equal(bad.status, 200);
  t.same(await bad.json(), { failed: badResult });
  const silent = await d.req('/harnesses/hz/tools/silent', { method: 'POST', body: '{}' });
  t.equal(silent.status, 200);
  t.same(await silent.json(), { failed: noResult });

  // MCP (the official SDK's client): isError results carrying berm's message
  const client = new Client({ name: 'berm-test-agent', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${d.url}/mcp`)));
  t.teardown(() => client.close());
  const r1 = await client.callTool({ name: 'hz.badutf8', arguments: { how: 'done' } });
  t.equal(r1.isError, true);
  t.same(r1.content, [{ type: 'text', text: badResult }]);
  const r2 = await client.callTool({ name: 'hz.silent', arguments: {} });
  t.equal(r2.isError, true);
  t.same(r2.content, [{ type: 'text', text: noResult }]);

  t.equal((await d.req('/health')).status, 200, 'bermd still answers');
  const metrics = await (await d.req('/metrics')).text();
  t.match(metrics, /^berm_invocations_total\{trigger="call",outcome="failed"\} 4$/m, 'counted as failures');
  // the event stream: the log line the tool wrote before its bad result, then the failure
  const sse = await d.req('/harnesses/hz/tools/badutf8', {
    method: 'POST',
    body: '{"how":"done"}',
    headers: { accept: 'text/event-stream' },
  });
  const events = await sse.text();
  t.match(events, /event: log\ndata: before the bad bytes\n/);
  t.match(
    events,
    /event: result\ndata: .*"status":200.*"failed":"berm refused the tool's result of 10 bytes/,
  );
});

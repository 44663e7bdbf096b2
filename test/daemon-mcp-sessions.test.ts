// MCP sessions are bounded: clients that never DELETE their session (about 35 KB each) once grew
// bermd without limit (5,000 initializes: +172 MB RSS). Beyond MAX_MCP_SESSIONS the least recently
// used session is closed, and its client gets the 404 that the streamable HTTP transport answers
// by initializing again.
import t from 'tap';
import { MAX_MCP_SESSIONS } from '../src/daemon/mcp.js';
import { testDaemon } from './helpers/daemon.js';

const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const INIT = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'many', version: '1' } },
});
const LIST = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' });

t.test('the least recently used MCP session is closed beyond the bound', async (t) => {
  const d = await testDaemon();
  t.teardown(() => d.stop());
  const open = async (): Promise<string> => {
    const r = await d.req('/mcp', { method: 'POST', body: INIT, headers: HEADERS });
    await r.text();
    t.equal(r.status, 200);
    return r.headers.get('mcp-session-id')!;
  };
  const list = async (id: string): Promise<number> => {
    const r = await d.req('/mcp', {
      method: 'POST',
      body: LIST,
      headers: { ...HEADERS, 'mcp-session-id': id },
    });
    await r.text();
    return r.status;
  };
  const first = await open();
  const second = await open();
  t.equal(await list(first), 200, 'the first session is used again, so the second is now the oldest');
  const ids: string[] = [];
  for (let i = 2; i < MAX_MCP_SESSIONS; i += 32) {
    const n = Math.min(32, MAX_MCP_SESSIONS - i);
    ids.push(...(await Promise.all(Array.from({ length: n }, open))));
  }
  t.equal(await list(second), 200, `${MAX_MCP_SESSIONS} sessions are all kept`);
  // the bound is reached: each new session closes the least recently used one
  const newest = await open();
  t.equal(await list(first), 404, 'the least recently used session was closed');
  t.equal(await list(second), 200);
  t.equal(await list(newest), 200);
  t.equal(await list(ids[0]!), 200);
  const last = await open();
  t.equal(await list(ids[1]!), 404, 'then the next least recently used');
  t.equal(await list(last), 200);
});

// "remind me" under bermd, end to end against the agent-daemon double: the operator's declaration
// grants protocol:schedule and protocol:send; a tool call over HTTP carrying X-Berm-Agent /
// X-Berm-Session / X-Berm-Sender arms a wake through the door; the wake fires on the queue and
// sends the reminder to that agent, in that session. The same due-set is reached from the HTTP API
// (POST /wakes) and from berm's protocol endpoint (the agent-daemon side).
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { AgentClient, decodeServer, encodeClient, parseEndpoint, type Plain } from '../src/protocol/index.js';
import { DOUBLE_AGENT_IDS } from './helpers/agent-daemon-double.js';
import { startDoubleThread } from './helpers/double-thread.js';
import { REPO, elf, testDaemon } from './helpers/daemon.js';

const REMIND = elf('examples/remind.elf');
const ASSISTANT = DOUBLE_AGENT_IDS.assistant;

const dbl = await startDoubleThread();
process.env.BERM_AGENT_DAEMON = dbl.endpoint; // the workers read it when they start
const dir = mkdtempSync(join(tmpdir(), 'bermd-door-'));
const config = join(dir, 'harnesses.toml');
writeFileSync(
  config,
  `[[harnesses]]\nname = "remind"\nsource = "${join(REPO, 'examples/remind.elf')}"\n` +
    `sha256 = "${createHash('sha256').update(REMIND).digest('hex')}"\n` +
    `capabilities = ["protocol:schedule", "protocol:send"]\n`,
);
const sock = join(dir, 'protocol.sock');
const d = await testDaemon({ config, protocolEndpoint: `unix:${sock}` });
t.teardown(async () => {
  await d.stop();
  await dbl.close();
  delete process.env.BERM_AGENT_DAEMON;
});

async function until<T>(f: () => Promise<T | undefined>, what: string, ms = 30_000): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

t.test('remind me under bermd: HTTP call with authority headers -> wake -> send as that agent', async (t) => {
  const put = await d.req('/harnesses/remind', { method: 'PUT', body: REMIND });
  t.equal(put.status, 200);
  const call = await d.req('/harnesses/remind/tools/remind', {
    method: 'POST',
    headers: { 'x-berm-agent': ASSISTANT, 'x-berm-session': 'web:42', 'x-berm-sender': 'web:alice' },
    body: JSON.stringify({ text: 'stand up', in_ms: 300 }),
  });
  t.equal(call.status, 200);
  const { done } = (await call.json()) as { done: string };
  t.match(JSON.parse(done), { id: /^w-/, at_ms: Number });
  const sent = await until(async () => {
    const m = (await dbl.received()).find(
      (x) => x.msg === 'send' && (x.send as Plain).content === 'Reminder: stand up',
    );
    return m?.send as Plain | undefined;
  }, 'the reminder');
  t.match(sent, { agent: ASSISTANT, session_handle: 'web:42', sender: 'web:alice' });
});

t.test('the HTTP API, the endpoint and a guest share one due-set', async (t) => {
  const api = await d.req('/wakes', {
    method: 'POST',
    body: JSON.stringify({ harness: 'remind', delay_ms: 3_600_000, payload: 'from the API', id: 'api-1' }),
  });
  t.equal(api.status, 201);
  const c = new AgentClient(parseEndpoint(`unix:${sock}`));
  t.teardown(() => c.close());
  const ask = async (body: unknown) =>
    decodeServer((await c.call(encodeClient('berm', body), { timeoutMs: 5_000 }))[0]!);
  const ext = await ask({
    schedule_wake: { harness: 'remind', delay_ms: 7_200_000, payload: 'foo', id: 'ext-1' },
  });
  t.match(ext.berm, { wake: { id: 'ext-1', harness: 'remind' } });
  const guest = await d.req('/harnesses/remind/tools/remind', {
    method: 'POST',
    headers: { 'x-berm-agent': ASSISTANT },
    body: JSON.stringify({ text: 'later', in_ms: 5_400_000 }),
  });
  const gid = (JSON.parse(((await guest.json()) as { done: string }).done) as { id: string }).id;
  const viaApi = ((await (await d.req('/wakes')).json()) as { wakes: { id: string }[] }).wakes.map(
    (w) => w.id,
  );
  t.same(viaApi, ['api-1', gid, 'ext-1'], 'GET /wakes lists all three, earliest first');
  const viaEndpoint = await ask({ list_wakes: { harness: 'remind' } });
  t.same(
    ((viaEndpoint.berm as Plain).wake_list as { wakes: Plain[] }).wakes.map((w) => w.id),
    ['api-1', gid, 'ext-1'],
    'and so does the endpoint',
  );
  for (const id of ['api-1', gid, 'ext-1'])
    t.equal((await d.req(`/wakes/${id}`, { method: 'DELETE' })).status, 204);
});

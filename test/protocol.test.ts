// The protocol door against the agent-daemon double over real sockets (loopback TCP and a Unix
// socket): framing and the client (reconnect, timeout, not connected), grants by group for both
// door shapes, scoping to the invocation's authority, redaction, skill narrowing, the access log
// and the rate limit, declarations refusing never-grantable messages, and a real guest (RV64
// harness test/data/door-guest.elf) calling through the linker.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import t from 'tap';
import { Engine } from '../src/engine/engine.js';
import { UnknownHostCall } from '../src/engine/traps.js';
import { Harness } from '../src/harness/harness.js';
import { linkerEntries, parseDeclarations } from '../src/config/declarations.js';
import {
  AgentClient,
  CALL_WIRE_NAME,
  DEFAULT_RATE,
  FrameReader,
  GROUPS,
  MAX_FRAME,
  NEVER,
  RateLimiter,
  bridgeTransport,
  callDoor,
  configureProtocol,
  decodeServer,
  encodeClient,
  encodeServer,
  frame,
  parseEndpoint,
  PROTOCOL_CAPABILITIES,
  type DoorLogEntry,
  type DoorScope,
  type Envelope,
  type Plain,
} from '../src/protocol/index.js';
import { DOUBLE_AGENT_IDS, DOUBLE_SECRET } from './helpers/agent-daemon-double.js';
import { shutdownBridge } from '../src/sync/bridge.js';
import { CALL_DEADLINE, type CapabilityContext } from '../src/capabilities/types.js';
import { DEFAULT_PROTOCOL_TIMEOUT_MS } from '../src/protocol/capability.js';
import { startDoubleThread } from './helpers/double-thread.js';
import { TEST_CACHE } from './helpers/fixtures.js';

const REPO = path.resolve(import.meta.dirname, '..');
const GUEST = path.join(REPO, 'test', 'data', 'door-guest.elf');
const ASSISTANT = DOUBLE_AGENT_IDS.assistant;
const RESEARCHER = DOUBLE_AGENT_IDS.researcher;

const dbl = await startDoubleThread();
t.teardown(async () => {
  shutdownBridge();
  await dbl.close();
});

const transport = bridgeTransport(dbl.endpoint, 5_000);
const ALL = new Set(Object.keys(GROUPS));
const AUTH = { agent: ASSISTANT, session: 'tg:4412:main', sender: 'telegram:4412' };
const scope = (over: Partial<DoorScope> = {}): DoorScope => ({
  harness: 'h',
  groups: ALL,
  authority: AUTH,
  ...over,
});

/** Call the door with one ClientMessage member; the decoded answer or the refusal/error text. */
function door(msg: string, body: unknown, sc: DoorScope = scope(), env = { transport }): Envelope | string {
  const r = callDoor(encodeClient(msg, body), sc, env);
  if ('fields' in r) return decodeServer(r.fields[0]!);
  return 'refused' in r ? `refused: ${r.refused}` : `error: ${r.error}`;
}

t.test('framing: big-endian length, 16 MiB cap, split and joined chunks', async (t) => {
  const f = frame(new Uint8Array([1, 2, 3]));
  t.same([...f], [0, 0, 0, 3, 1, 2, 3], 'u32 big-endian length then the payload');
  const r = new FrameReader();
  t.same(r.push(f.subarray(0, 2)), []);
  const two = Buffer.concat([f.subarray(2), frame(new Uint8Array([9]))]);
  t.same(
    r.push(two).map((x) => [...x]),
    [[1, 2, 3], [9]],
  );
  // fed one byte at a time, and all at once: the same payloads (an empty one included)
  const many = [
    new Uint8Array(0),
    new Uint8Array([7]),
    new Uint8Array(70_000).fill(5),
    new Uint8Array([1, 2]),
  ];
  const stream = Buffer.concat(many.map((m) => frame(m)));
  const bytewise = new FrameReader();
  const got: number[][] = [];
  for (let i = 0; i < stream.length; i++)
    got.push(...bytewise.push(stream.subarray(i, i + 1)).map((x) => [...x]));
  t.same(
    got,
    many.map((m) => [...m]),
    'byte by byte',
  );
  t.equal(bytewise.pending, 0);
  t.same(
    new FrameReader().push(stream).map((x) => [...x]),
    many.map((m) => [...m]),
    'in one chunk',
  );
  t.throws(() => frame(new Uint8Array(MAX_FRAME + 1)), /over the limit of 16777216/);
  const big = Buffer.alloc(4);
  big.writeUInt32BE(MAX_FRAME + 1);
  t.throws(() => new FrameReader().push(big), /announced a frame of 16777217 bytes/);
  t.same(parseEndpoint('unix:/run/a.sock'), { path: '/run/a.sock' });
  t.same(parseEndpoint('127.0.0.1:7'), { host: '127.0.0.1', port: 7 });
  t.same(parseEndpoint('tcp://[::1]:9'), { host: '::1', port: 9 });
  t.throws(() => parseEndpoint('nonsense'), /neither a Unix socket/);
});

t.test('client: TCP and Unix socket, not connected, timeout, reconnect after a drop', async (t) => {
  const c = new AgentClient(parseEndpoint(dbl.endpoint));
  const [pong] = await c.call(encodeClient('ping', {}), { timeoutMs: 5_000 });
  t.equal(decodeServer(pong!).msg, 'pong');
  const stream = await c.call(
    encodeClient('stream', { agent: ASSISTANT, content: 'hi', session_handle: 's1' }),
    {
      timeoutMs: 5_000,
      stream: true,
    },
  );
  t.same(
    stream.map((s) => (decodeServer(s).stream as { event: string }).event),
    ['start', 'chunk', 'chunk', 'end'],
    'a stream is collected through its end event',
  );
  await dbl.drop();
  await new Promise((r) => setTimeout(r, 50));
  const [again] = await c.call(encodeClient('ping', {}), { timeoutMs: 5_000 });
  t.equal(decodeServer(again!).msg, 'pong', 'the next call reconnects after the daemon dropped us');
  c.close();

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-door-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const sock = path.join(dir, 'agent.sock');
  const u = await startDoubleThread({ path: sock });
  const cu = new AgentClient(parseEndpoint(`unix:${sock}`));
  const [st] = await cu.call(encodeClient('get_stats', {}), { timeoutMs: 5_000 });
  t.equal((decodeServer(st!).stats as Plain).version, '0.9.3', 'over a Unix socket');
  cu.close();
  await u.close();

  const nobody = new AgentClient({ path: path.join(dir, 'nobody.sock') });
  await t.rejects(
    nobody.call(encodeClient('ping', {}), { timeoutMs: 2_000 }),
    /the protocol is not connected yet: unix:.*ENOENT/,
  );
  const port = await new Promise<number>((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
  await t.rejects(
    new AgentClient({ host: '127.0.0.1', port }).call(encodeClient('ping', {}), { timeoutMs: 2_000 }),
    /the protocol is not connected yet: 127\.0\.0\.1:\d+: ECONNREFUSED/,
  );

  await dbl.silent(true);
  const slow = new AgentClient(parseEndpoint(dbl.endpoint));
  const t0 = Date.now();
  await t.rejects(slow.call(encodeClient('ping', {}), { timeoutMs: 300 }), /did not answer within 300 ms/);
  t.ok(Date.now() - t0 < 5_000, 'the timeout fired');
  await dbl.silent(false);
  const [late] = await slow.call(encodeClient('ping', {}), { timeoutMs: 5_000 });
  t.equal(decodeServer(late!).msg, 'pong', 'after a timeout the client reconnects and stays in step');
  slow.close();
});

t.test('every group allowed when granted and refused when not, through crabtalk.protocol.call', async (t) => {
  const samples: Record<string, [string, unknown, string]> = {
    'protocol:read': ['get_stats', {}, 'stats'],
    'protocol:history': ['list_conversations', {}, 'conversation_list'],
    'protocol:sessions': ['search_sessions', { query: 'dentist' }, 'session_hits'],
    'protocol:send': ['send', { content: 'hello' }, 'response'],
    'protocol:events': ['publish_event', { source: 'harness:h:tick', payload: 'p' }, 'pong'],
  };
  for (const [group, [msg, body, reply]] of Object.entries(samples)) {
    const granted = door(msg, body, scope({ groups: new Set([group]) }));
    t.equal((granted as Envelope).msg, reply, `${group}: ${msg} answered with ${reply}`);
    const others = new Set([...ALL].filter((g) => g !== group));
    await dbl.clear();
    const refused = door(msg, body, scope({ groups: others }));
    t.match(
      refused,
      `refused: ${CALL_WIRE_NAME}: this message type is in no group this harness was granted (${msg} needs ${group})`,
    );
    t.same(await dbl.received(), [], `${group}: the refused ${msg} never reached the daemon`);
  }
  // every operation of protocol:read answers with its kind
  const read = scope({ groups: new Set(['protocol:read']) });
  t.equal((door('ping', {}, read) as Envelope).msg, 'pong');
  t.equal((door('list_models', {}, read) as Envelope).msg, 'model_list');
  t.equal((door('list_subscriptions', {}, read) as Envelope).msg, 'subscription_list');
  t.equal((door('get_skill', { name: 'summarize' }, read) as Envelope).msg, 'skill_body');
  t.equal((door('list_skills', {}, read) as Envelope).msg, 'skill_list');
});

t.test('never-grantable messages, an empty message and garbage are refused before the daemon', async (t) => {
  await dbl.clear();
  for (const msg of Object.keys(NEVER)) {
    const body = msg === 'extension' ? new Uint8Array([1, 2]) : {};
    const r = door(msg, body);
    t.match(
      r,
      `refused: ${CALL_WIRE_NAME}: this message type is in no group this harness was granted (${msg} is never grantable`,
      msg,
    );
  }
  t.match(
    door('delete_agent', { agent: ASSISTANT }),
    /delete_agent is never grantable: destructive or configuring/,
  );
  const empty = callDoor(new Uint8Array(0), scope(), { transport });
  t.same(empty, { refused: `${CALL_WIRE_NAME}: empty client message` });
  const junk = callDoor(new Uint8Array([0x0a, 0xff, 0xff]), scope(), { transport });
  t.match(junk, { refused: /not a ClientMessage/ });
  t.same(await dbl.received(), [], 'nothing reached the daemon');
  const state = await dbl.state();
  t.equal(state.agents.length, 2, 'no agent was deleted');
});

t.test('send and stream are scoped to the invocation: agent, session and sender', async (t) => {
  await dbl.clear();
  const ok = door('send', { content: 'remind me' }) as Envelope;
  t.same(ok.response, {
    agent: ASSISTANT,
    content: 'echo: remind me',
    model: 'gpt-4o-mini',
    usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 },
  });
  const [sent] = (await dbl.received()).map((m) => m.send as Plain);
  t.match(sent, {
    agent: ASSISTANT,
    session_handle: 'tg:4412:main',
    sender: 'telegram:4412',
    content: 'remind me',
  });

  t.match(
    door('send', { agent: RESEARCHER, content: 'x' }),
    /refused: .*send: agent 01JD3R9F2H6P8S4A7Y3E5G1KQW is not the invocation's agent/,
  );
  t.match(
    door('send', { content: 'x', session_handle: 'cli:alice:1' }),
    /refused: .*session cli:alice:1 is not the invocation's session \(tg:4412:main\)/,
  );
  t.match(
    door('send', { content: 'x', sender: 'admin' }),
    /refused: .*sender admin is not the invocation's sender/,
  );
  t.match(
    door('stream', { agent: RESEARCHER, content: 'x' }),
    /refused: .*stream: agent .* is not the invocation's agent/,
  );
  t.match(
    door('send', { content: 'x' }, scope({ authority: {} })),
    /refused: .*the invocation carries no agent/,
  );

  // a declaration that grants another agent lets the harness address it
  await dbl.clear();
  const other = door(
    'send',
    { agent: RESEARCHER, content: 'cite this' },
    scope({ agents: [RESEARCHER] }),
  ) as Envelope;
  t.equal((other.response as Plain).agent, RESEARCHER);
  const [m] = (await dbl.received()).map((x) => x.send as Plain);
  t.match(m, { agent: RESEARCHER, session_handle: `berm:h:${RESEARCHER}`, sender: 'harness:h' });

  // a stream is folded into one SendResponse
  const st = door('stream', { content: 'streamed' }) as Envelope;
  t.same(st.response, {
    agent: ASSISTANT,
    content: 'echo: streamed',
    model: 'gpt-4o-mini',
    usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 },
  });
  // no session in the authority: the harness's own session, never somebody else's
  await dbl.clear();
  door('send', { content: 'from a wake' }, scope({ authority: { agent: ASSISTANT } }));
  t.match((await dbl.received())[0]!.send, { session_handle: 'berm:h', sender: 'harness:h' });
});

t.test('search_sessions and the history lists are overwritten to the invocation', async (t) => {
  await dbl.clear();
  const r = door('search_sessions', { query: 'dentist', agent: RESEARCHER, sender: 'cli:alice' }) as Envelope;
  const hits = (r.session_hits as { hits: Plain[] }).hits;
  t.ok(hits.length > 0, 'hits come back');
  t.ok(
    hits.every((h) => h.agent_id === ASSISTANT),
    'only the invocation agent’s sessions',
  );
  t.match((await dbl.received())[0]!.search_sessions, {
    agent: ASSISTANT,
    sender: 'telegram:4412',
    query: 'dentist',
  });
  const list = door('list_conversations', { agent: RESEARCHER }) as Envelope;
  const convs = (list.conversation_list as { conversations: Plain[] }).conversations;
  t.ok(convs.length > 0 && convs.every((c) => c.agent_id === ASSISTANT));
  const hist = door('get_conversation_history', {
    file_path: 'sessions/researcher/cli-alice-1.jsonl',
  }) as Envelope;
  t.match(hist, { msg: 'error', error: { code: 403 } }, "another agent's conversation is not passed on");
  const mine = door('get_conversation_history', {
    file_path: 'sessions/assistant/tg-4412-main.jsonl',
  }) as Envelope;
  t.equal((mine.conversation_history as Plain).agent_id, ASSISTANT);
  t.match(
    door('search_sessions', { query: 'x' }, scope({ authority: {} })),
    /refused: .*no agent to scope the search to/,
  );
});

t.test('redaction: AgentInfo.config is blanked in agent_info and every agent_list entry', async (t) => {
  const list = door('list_agents', {}) as Envelope;
  const agents = (list.agent_list as { agents: Plain[] }).agents;
  t.equal(agents.length, 2);
  for (const a of agents) {
    t.notOk(a.config, `${String(a.name)}: config blanked`);
    t.ok(a.id && a.name && a.skills, 'the rest is intact');
  }
  const one = door('get_agent', { name: 'researcher' }) as Envelope;
  t.equal((one.agent_info as Plain).id, RESEARCHER);
  t.notOk((one.agent_info as Plain).config);
  const r = callDoor(encodeClient('list_agents', {}), scope(), { transport });
  t.notOk(
    Buffer.from((r as { fields: Uint8Array[] }).fields[0]!).includes(DOUBLE_SECRET),
    'the secret is not in the bytes',
  );
});

t.test('skills are narrowed to the declaring agent’s', async (t) => {
  const names = (e: Envelope | string) =>
    (((e as Envelope).skill_list as { skills?: Plain[] }).skills ?? []).map((s) => s.name);
  t.same(
    names(door('list_skills', {})),
    ['summarize', 'translate'],
    "the invocation agent's skills (from the daemon)",
  );
  t.same(
    names(door('list_skills', {}, scope({ skills: ['translate'] }))),
    ['translate'],
    "the declaration's list",
  );
  t.match(door('get_skill', { name: 'code-review' }), /refused: .*skill not available: code-review/);
  t.match(
    door('get_skill', { name: 'summarize' }, scope({ skills: ['translate'] })),
    /refused: .*skill not available: summarize/,
  );
  t.same(names(door('list_skills', {}, scope({ authority: {} }))), [], 'no agent and no list: no skill');
  await dbl.setSkills('assistant', []);
  t.same(
    names(door('list_skills', {})),
    ['summarize', 'translate', 'code-review'],
    'an agent naming none is unrestricted',
  );
  await dbl.setSkills('assistant', ['summarize', 'translate']);
});

t.test('access log and rate limit', async (t) => {
  const lines: DoorLogEntry[] = [];
  let clock = 0;
  const limiter = new RateLimiter({ perSecond: 2, burst: 3 }, () => clock);
  const env = { transport, log: (e: DoorLogEntry) => lines.push(e), limiter };
  const outcomes = [1, 2, 3, 4].map(() => {
    const r = callDoor(encodeClient('ping', {}), scope(), env);
    return 'fields' in r ? 'ok' : 'refused' in r ? r.refused : r.error;
  });
  t.same(outcomes.slice(0, 3), ['ok', 'ok', 'ok']);
  t.match(outcomes[3], /rate limit of harness h reached \(2\/s, burst 3\)/);
  clock = 500; // one token back after half a second at 2/s
  t.ok('fields' in callDoor(encodeClient('ping', {}), scope(), env));
  t.ok('refused' in callDoor(encodeClient('ping', {}), scope({ harness: 'h' }), env));
  t.ok(
    'fields' in callDoor(encodeClient('ping', {}), scope({ harness: 'other' }), env),
    'buckets are per harness',
  );
  callDoor(encodeClient('delete_agent', {}), scope(), env);
  t.equal(lines.length, 8);
  t.match(lines[0], {
    harness: 'h',
    op: 'ping',
    outcome: 'ok',
    via: CALL_WIRE_NAME,
    scope: `agent=${ASSISTANT} session=tg:4412:main sender=telegram:4412`,
  });
  t.match(lines[3], { op: 'ping', outcome: 'refused', reason: /rate limit/ });
  t.match(lines[7], { op: 'delete_agent', outcome: 'refused', reason: /never grantable/ });
  t.equal(DEFAULT_RATE.perSecond, 50);
});

t.test('no daemon configured or reachable: "the protocol is not connected yet"', async (t) => {
  t.same(callDoor(encodeClient('ping', {}), scope(), {}), {
    refused: `${CALL_WIRE_NAME}: the protocol is not connected yet`,
  });
  const dead = bridgeTransport('unix:/nonexistent/agent.sock', 2_000);
  t.match(callDoor(encodeClient('ping', {}), scope(), { transport: dead }), {
    refused: /the protocol is not connected yet: unix:\/nonexistent\/agent.sock: ENOENT/,
  });
});

t.test('declarations: groups granted by name; never-grantable ones refused with the fix', async (t) => {
  const sha = createHash('sha256').update(fs.readFileSync(GUEST)).digest('hex');
  const entry = (caps: string[], extra = '') =>
    `[[harnesses]]\nname = "d"\nsource = "${GUEST}"\nsha256 = "${sha}"\ncapabilities = ${JSON.stringify(caps)}\n${extra}\n`;
  const ok = parseDeclarations(
    entry(['protocol:read', 'protocol:send'], `skills = ["summarize"]\nagents = ["${RESEARCHER}"]`),
    'x.toml',
  );
  t.same(ok.errors, []);
  t.same(ok.harnesses[0]!.capabilities, ['protocol:read', 'protocol:send']);
  t.same(ok.harnesses[0]!.grant, { skills: ['summarize'], agents: [RESEARCHER] });
  const cases: [string[], string, RegExp, RegExp][] = [
    [
      ['protocol:delete_agent'],
      '',
      /delete_agent is never grantable to a harness: destructive or configuring/,
      /remove "protocol:delete_agent"; grantable groups are/,
    ],
    [['protocol:list_mcps'], '', /a credential read/, /remove/],
    [['protocol:subscribe_events'], '', /a stream by shape/, /remove/],
    [['protocol:*'], '', /would grant the whole protocol/, /list only the groups/],
    [['protocol'], '', /names no group/, /"protocol:read"/],
    [
      ['protocol:send_message'],
      '',
      /unknown protocol group/,
      /grantable groups are protocol:events, protocol:history/,
    ],
    [
      ['protocol:send'.replace('send', 'get_agent')],
      '',
      /names one operation; the protocol is granted by group/,
      /write "protocol:read"/,
    ],
    [
      ['protocol:read'],
      `agents = ["${RESEARCHER}"]`,
      /agents is set but protocol:send is not granted/,
      /add "protocol:send"/,
    ],
    [
      ['protocol:send'],
      'agents = ["researcher"]',
      /agent "researcher" is not a ULID/,
      /resolve a name with get_agent/,
    ],
  ];
  for (const [caps, extra, problem, fix] of cases) {
    const d = parseDeclarations(entry(caps, extra), 'x.toml');
    t.equal(d.harnesses.length, 0, `${caps.join(',')} ${extra}: refused`);
    t.match(d.errors[0]?.problem, problem);
    t.match(d.errors[0]?.fix, fix);
    t.match(d.errors[0]?.message, /^x\.toml:\d+: /, 'with file:line');
  }
});

t.test(
  'a real guest: both door shapes, absent host functions, the secret never in guest memory',
  async (t) => {
    configureProtocol({ endpoint: dbl.endpoint, timeoutMs: 1_500, log: null });
    t.teardown(() => configureProtocol({}));
    const engine = new Engine({ cacheDir: TEST_CACHE });
    const h = await Harness.load(engine, fs.readFileSync(GUEST));
    const fnv = (s: string) => {
      let x = 0xcbf29ce484222325n;
      for (const b of Buffer.from(s)) x = BigInt.asUintN(64, (x ^ BigInt(b)) * 0x100000001b3n);
      return x;
    };
    const raw = (wire: string, fields: Uint8Array[]) => {
      const n = Buffer.alloc(8);
      n.writeBigUInt64LE(fnv(wire));
      const framed = Buffer.concat(
        fields.flatMap((f) => [Buffer.from(Uint32Array.of(f.length).buffer), Buffer.from(f)]),
      );
      return Buffer.concat([n, framed]);
    };
    const decl = (caps: string[]) => ({ name: 'dg', capabilities: caps, grant: {} });
    const run = (caps: string[], wire: string, fields: Uint8Array[], authority = AUTH) => {
      const r = h.invoke('raw', raw(wire, fields), {
        capabilities: linkerEntries(decl(caps), { authority }),
      });
      if (r.status !== 'ok') throw new Error(r.message);
      const bytes = Buffer.from(r.result.slice(1), 'hex');
      return {
        status: r.result[0],
        text: bytes.toString('utf8'),
        msg: r.result[0] === 'o' ? decodeServer(bytes) : undefined,
      };
    };
    const read = ['protocol:read'];
    const viaCall = run(read, 'crabtalk.protocol.call', [encodeClient('get_stats', {})]);
    t.equal(viaCall.status, 'o');
    t.equal((viaCall.msg!.stats as Plain).version, '0.9.3');
    const viaOp = run(read, 'crabtalk.protocol.ping', []);
    t.equal(viaOp.msg!.msg, 'pong', 'per-operation host function, empty message');
    const getAgent = run(read, 'crabtalk.protocol.get_agent', [
      Buffer.from([0x0a, 10, ...Buffer.from('researcher')]),
    ]);
    t.equal((getAgent.msg!.agent_info as Plain).id, RESEARCHER);
    const refused = run(read, 'crabtalk.protocol.call', [encodeClient('send', { content: 'x' })]);
    t.equal(refused.status, 'r');
    t.match(
      refused.text,
      /this message type is in no group this harness was granted \(send needs protocol:send\)/,
    );
    t.throws(
      () => run(read, 'crabtalk.protocol.send', [Buffer.from([0x12, 1, 0x78])]),
      UnknownHostCall,
      'an ungranted operation is absent from the linker',
    );
    t.throws(
      () => run([], 'crabtalk.protocol.call', [encodeClient('ping', {})]),
      UnknownHostCall,
      'no group: no door at all',
    );
    const send = run(['protocol:send'], 'crabtalk.protocol.send', [Buffer.from([0x12, 2, 0x68, 0x69])]);
    t.equal((send.msg!.response as Plain).content, 'echo: hi');
    t.equal((send.msg!.response as Plain).agent, ASSISTANT, 'sent as the invocation’s agent');
    const badFields = run(read, 'crabtalk.protocol.call', []);
    t.match(badFields.text, /expected fields \(client message\), got 0/);

    // the token in every agent's config never reaches guest memory
    const xored = Buffer.from(DOUBLE_SECRET).map((b) => b ^ 0x5a);
    const scan = h.invoke('scan', xored, { capabilities: linkerEntries(decl(read), { authority: AUTH }) });
    t.equal(scan.status, 'ok', scan.status === 'failed' ? scan.message : '');
    const result = (scan as { result: string }).result;
    t.match(result, /^clean /);
    const list = decodeServer(Buffer.from(result.slice(6), 'hex'));
    t.same(
      (list.agent_list as { agents: Plain[] }).agents.map((a) => a.name),
      ['assistant', 'researcher'],
      'the agents did arrive',
    );
    // control: the scan does find text the replies carry (an agent's description)
    const found = h.invoke(
      'scan',
      Buffer.from('Finds and cites sources').map((b) => b ^ 0x5a),
      {
        capabilities: linkerEntries(decl(read), { authority: AUTH }),
      },
    );
    t.equal(found.status, 'failed');
    t.match((found as { message: string }).message, /^FOUND at 0x/);

    // a daemon that never answers: a clean error after the timeout, and the next call works
    await dbl.silent(true);
    const t0 = Date.now();
    const timedOut = run(read, 'crabtalk.protocol.ping', []);
    t.equal(timedOut.status, 'e');
    t.match(timedOut.text, /did not answer within 1500 ms/);
    t.ok(Date.now() - t0 < 15_000);
    await dbl.silent(false);
    const after = run(read, 'crabtalk.protocol.ping', []);
    t.equal(after.msg!.msg, 'pong', 'the worker is not wedged');
  },
);

t.test('the C SDK wrappers (berm_protocol.h) against the door', async (t) => {
  // A recording stand-in for the due-set and the harness event bus: the SDK's encoding and
  // parsing are under test here; the queue's own due-set serves them in test/protocol-queue.
  const wakes: { id: string; atMs: number; payload: string; harness: string }[] = [];
  const subs: { id: number; source: string }[] = [];
  configureProtocol({
    endpoint: dbl.endpoint,
    timeoutMs: 5_000,
    log: null,
    wakes: {
      arm: (w) => {
        wakes.push({ id: w.id ?? 'x', atMs: w.atMs, payload: w.payload, harness: w.harness });
        return { id: w.id ?? 'x', harness: w.harness, entry: w.entry, at_ms: w.atMs, payload: w.payload };
      },
      cancel: (_h, id) => wakes.some((w) => w.id === id),
      list: () => [],
    },
    events: {
      subscribe: (h, source, once) => {
        subs.push({ id: 7, source });
        return { id: 7, source, target_agent: `harness:${h}`, once };
      },
      unsubscribe: () => false,
      list: () => [],
      publish: () => 0,
    },
  });
  t.teardown(() => configureProtocol({}));
  const engine = new Engine({ cacheDir: TEST_CACHE });
  const h = await Harness.load(engine, fs.readFileSync(GUEST));
  const all = linkerEntries(
    { name: 'dg', capabilities: Object.keys(GROUPS).sort(), grant: {} },
    { authority: AUTH },
  );
  const sdk = (letter: string) => {
    const r = h.invoke('sdk', Buffer.from(letter), { capabilities: all });
    return r.status === 'ok' ? r.result : `failed: ${r.message}`;
  };
  t.equal(sdk('p'), 'kind=2', 'ping answers pong (ServerMessage field 2)');
  t.equal(sdk('a'), `${RESEARCHER}|researcher|Finds and cites sources|gpt-4o`, 'AgentInfo parsed in C');
  t.equal(sdk('s'), 'echo: hello from C', 'SendResponse.content parsed in C');
  const before = Date.now();
  const w = sdk('w').split('|');
  t.same(w.slice(0, 4), ['w1', 'dg', 'on_wake', 'tea'], 'WakeInfo parsed in C');
  t.ok(Number(w[4]) >= before + 60_000 && Number(w[4]) < Date.now() + 61_000, 'at now + 60 s');
  t.match(wakes, [{ id: 'w1', payload: 'tea', harness: 'dg' }]);
  t.equal(sdk('c'), 'cancelled=1');
  t.equal(sdk('e'), 'subscription=7');
  t.same(subs, [{ id: 7, source: 'agent:assistant:done' }]);
  t.equal(sdk('u'), 'kind=2', 'publish answered by the daemon with pong');
  t.equal(sdk('x'), 'failed: empty refused: crabtalk.protocol.call: empty client message');
  const readOnly = linkerEntries(
    { name: 'dg', capabilities: ['protocol:read', 'protocol:send'], grant: {} },
    { authority: {} },
  );
  const r = h.invoke('sdk', Buffer.from('s'), { capabilities: readOnly });
  t.match(r, { status: 'failed', message: /send refused: .*the invocation carries no agent/ });
});

t.test("a daemon that never answers costs a call its deadline, not the door's timeout", async (t) => {
  // accepts (the kernel completes the handshake) and reads, never answers
  const mute = net.createServer((s) => s.on('data', () => {}));
  await new Promise<void>((r) => mute.listen(0, '127.0.0.1', r));
  t.teardown(() => mute.close());
  const port = (mute.address() as net.AddressInfo).port;
  const ping = PROTOCOL_CAPABILITIES.find((c) => c.name === 'protocol:read')!.calls[
    'crabtalk.protocol.ping'
  ]!;
  const ctxOf = (limits: Record<string, number> = {}): CapabilityContext => ({
    harness: 'h',
    grant: {},
    depth: 0,
    granted: ['protocol:read'],
    authority: AUTH,
    limits,
  });
  t.teardown(() => configureProtocol({}));
  // the bridge worker and its job module loaded first: start-up is not what is measured here
  configureProtocol({ endpoint: dbl.endpoint, log: null });
  t.ok('fields' in ping([], ctxOf()), 'the double answers a ping');
  configureProtocol({ endpoint: `127.0.0.1:${port}`, timeoutMs: DEFAULT_PROTOCOL_TIMEOUT_MS, log: null });
  const t0 = Date.now();
  const r = ping([], ctxOf({ [CALL_DEADLINE]: t0 + 1000 }));
  const waited = Date.now() - t0;
  t.match(r, {
    error:
      /^crabtalk\.protocol\.ping: ping: the call's deadline passed while waiting for the agent daemon \(waited \d+ ms: /,
  });
  // the door's own timeout is 10 s; the deadline cut it (generous bound for a loaded machine)
  t.ok(waited < DEFAULT_PROTOCOL_TIMEOUT_MS - 1000, `returned after ${waited} ms`);
  configureProtocol({ endpoint: dbl.endpoint, log: null });
  t.ok('fields' in ping([], ctxOf({ [CALL_DEADLINE]: Date.now() + 30_000 })), 'the next call goes through');
});

t.test('a daemon that streams without end is cut at 16 MiB, not at the timeout', async (t) => {
  // answers every request with 8 MiB chunk events and never the end event: the door's client once
  // kept collecting (up to 10,000 events of up to 16 MiB each) until the call's timeout, gigabytes
  // of host memory for one guest call. The daemon is a child process: the door's call blocks this
  // thread until it returns.
  const eventFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'berm-flood-')), 'event');
  fs.writeFileSync(eventFile, frame(encodeServer('stream', { chunk: { content: 'x'.repeat(8 << 20) } })));
  t.teardown(() => fs.rmSync(path.dirname(eventFile), { recursive: true, force: true }));
  const flood = spawn(
    process.execPath,
    [
      '-e',
      `const ev = require('fs').readFileSync(process.argv[1]);
       const srv = require('net').createServer((s) => {
         s.on('error', () => {});
         s.once('data', () => {
           const pump = () => { while (!s.destroyed && s.write(ev)); if (!s.destroyed) s.once('drain', pump); };
           pump();
         });
       });
       srv.listen(0, '127.0.0.1', () => console.log(srv.address().port));`,
      eventFile,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  t.teardown(() => flood.kill('SIGKILL'));
  const port = Number(
    await new Promise<string>((r) => flood.stdout.once('data', (d: Buffer) => r(String(d)))),
  );
  const t0 = Date.now();
  const r = door('stream', { content: 'hello' }, scope(), {
    transport: bridgeTransport(`127.0.0.1:${port}`, 12_000),
  });
  const waited = Date.now() - t0;
  t.match(r, /^error: .*sent an answer of more than 16777216 bytes/);
  t.ok(waited < 8_000, `cut after ${waited} ms, not at the 12 s timeout`);
  t.equal((door('ping', {}) as Envelope).msg, 'pong', 'the next call (another daemon) goes through');
});

/**
 * A stand-in for the crabtalk agent daemon, for tests and demos: a real server on a Unix socket
 * or loopback TCP port speaking the daemon's framing (src/protocol/frame.ts) and messages (src/protocol/schema.ts),
 * answering the messages a harness may be granted with canned but realistic data: agents with
 * ULIDs whose config holds an MCP bearer token and environment secret (what the door must
 * redact), skills, models, stats, sessions to search, conversations, subscriptions, and send /
 * stream answers that echo the content into the addressed session.
 *
 * It records every ClientMessage it receives (`received`), so a test can prove the door never
 * forwarded a refused message, and it can be told to stop answering (`silent`) to exercise the
 * door's timeout. Messages a harness can never be granted are answered too (a config holding
 * the secret, a list of MCPs with their auth), as the real daemon would to a trusted client.
 */
import * as net from 'node:net';
import { FrameReader, frame } from '../../src/protocol/frame.js';
import { decodeClient, encodeServer, member, type Envelope, type Plain } from '../../src/protocol/schema.js';

/** One agent of the double. `config` is the AgentConfig JSON, secrets included. */
export interface DoubleAgent {
  id: string;
  name: string;
  description: string;
  model: string;
  skills: string[];
  mcps: string[];
  config: string;
}

/** One persisted session of the double. */
export interface DoubleSession {
  session_handle: string;
  agent_id: string;
  sender: string;
  title: string;
  file_path: string;
  messages: { role: string; content: string }[];
}

/** Options of {@link AgentDaemonDouble.start}. */
export interface DoubleOptions {
  /** listen on this Unix socket path instead of 127.0.0.1:0 */
  path?: string;
  /** the secret placed in every agent's config (MCP Authorization header and env) */
  secret?: string;
}

/** ULIDs of the double's agents (26 Crockford base-32 characters). */
export const DOUBLE_AGENT_IDS = {
  assistant: '01JD3R7WQ4K8N5V2X9T6B1C0MZ',
  researcher: '01JD3R9F2H6P8S4A7Y3E5G1KQW',
} as const;

/** The default secret of {@link DoubleOptions.secret}. */
export const DOUBLE_SECRET = 'sk-live-DOUBLE-7f3a9c2e5b8d1f4a';

function agentConfig(name: string, secret: string): string {
  return JSON.stringify({
    name,
    description: `the ${name}`,
    model: 'gpt-4o-mini',
    mcps: [
      {
        name: 'github',
        url: 'https://mcp.github.example/sse',
        auth: `Bearer ${secret}`,
        env: { GITHUB_TOKEN: secret },
      },
    ],
  });
}

/** A running double (see the module comment). */
export class AgentDaemonDouble {
  /** every ClientMessage received, decoded, in arrival order (undecodable ones as `{}`) */
  readonly received: Envelope[] = [];
  /** when true the double reads requests but never answers */
  silent = false;
  /** the double's agents; tests may edit them */
  readonly agents: DoubleAgent[];
  /** the double's sessions; send and stream append to them */
  readonly sessions: DoubleSession[];
  /** subscriptions made through subscribe_event */
  readonly subscriptions: { id: number; source: string; target_agent: string; once: boolean }[] = [];
  /** events published through publish_event */
  readonly published: { source: string; payload: string }[] = [];
  private nextSub = 1;
  private readonly sockets = new Set<net.Socket>();
  readonly secret: string;

  private constructor(
    private readonly server: net.Server,
    options: DoubleOptions,
  ) {
    this.secret = options.secret ?? DOUBLE_SECRET;
    this.agents = [
      {
        id: DOUBLE_AGENT_IDS.assistant,
        name: 'assistant',
        description: 'General assistant',
        model: 'gpt-4o-mini',
        skills: ['summarize', 'translate'],
        mcps: ['github'],
        config: agentConfig('assistant', this.secret),
      },
      {
        id: DOUBLE_AGENT_IDS.researcher,
        name: 'researcher',
        description: 'Finds and cites sources',
        model: 'gpt-4o',
        skills: ['code-review'],
        mcps: ['github'],
        config: agentConfig('researcher', this.secret),
      },
    ];
    this.sessions = [
      {
        session_handle: 'tg:4412:main',
        agent_id: DOUBLE_AGENT_IDS.assistant,
        sender: 'telegram:4412',
        title: 'Dentist appointment',
        file_path: 'sessions/assistant/tg-4412-main.jsonl',
        messages: [
          { role: 'user', content: 'remind me about the dentist appointment on friday' },
          { role: 'assistant', content: 'Noted: dentist on Friday at 10:00.' },
        ],
      },
      {
        session_handle: 'cli:alice:1',
        agent_id: DOUBLE_AGENT_IDS.researcher,
        sender: 'cli:alice',
        title: 'RISC-V relaxation',
        file_path: 'sessions/researcher/cli-alice-1.jsonl',
        messages: [
          { role: 'user', content: 'why does lld refuse R_RISCV_ALIGN? (also: dentist)' },
          { role: 'assistant', content: 'lld 14 does not implement linker relaxation.' },
        ],
      },
    ];
  }

  /**
   * Start listening on `options.path` or 127.0.0.1 port 0.
   * @throws Error when the listen fails.
   */
  static async start(options: DoubleOptions = {}): Promise<AgentDaemonDouble> {
    const server = net.createServer();
    const d = new AgentDaemonDouble(server, options);
    server.on('connection', (s) => d.serve(s));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      if (options.path) server.listen(options.path, resolve);
      else server.listen(0, '127.0.0.1', resolve);
    });
    return d;
  }

  /** The endpoint as the client's parseEndpoint reads it (`unix:/path` or `127.0.0.1:port`). */
  get endpoint(): string {
    const a = this.server.address();
    if (typeof a === 'string') return `unix:${a}`;
    return `127.0.0.1:${a!.port}`;
  }

  /** Close the listener and every open connection. */
  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** Drop every open connection but keep listening (a daemon restart as a client sees it). */
  dropConnections(): void {
    for (const s of this.sockets) s.destroy();
  }

  /** Received messages of one kind (e.g. 'send'), their bodies. */
  bodies(kind: string): Plain[] {
    return this.received.filter((m) => m.msg === kind).map((m) => (m[kind] ?? {}) as Plain);
  }

  private serve(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => undefined);
    const reader = new FrameReader();
    socket.on('data', (chunk: Buffer) => {
      let frames: Uint8Array[];
      try {
        frames = reader.push(chunk);
      } catch {
        socket.destroy();
        return;
      }
      for (const f of frames) {
        let env: Envelope;
        try {
          env = decodeClient(f);
        } catch {
          this.received.push({});
          if (!this.silent) socket.write(frame(encodeServer('error', { code: 400, message: 'bad request' })));
          continue;
        }
        this.received.push(env);
        if (this.silent) continue;
        for (const reply of this.answer(env)) socket.write(frame(reply));
      }
    });
  }

  private agentById(id: string): DoubleAgent | undefined {
    return this.agents.find((a) => a.id === id);
  }

  private info(a: DoubleAgent): Plain {
    return {
      id: a.id,
      name: a.name,
      description: a.description,
      config: a.config,
      model: a.model,
      max_iterations: 16,
      thinking: false,
      skills: a.skills,
      mcps: a.mcps,
      compact_tool_max_len: 2048,
    };
  }

  private session(handle: string, agentId: string, sender: string): DoubleSession {
    let s = this.sessions.find((x) => x.session_handle === handle);
    if (!s) {
      s = {
        session_handle: handle,
        agent_id: agentId,
        sender,
        title: '',
        file_path: `sessions/${agentId}/${handle.replace(/[^A-Za-z0-9_-]/g, '-')}.jsonl`,
        messages: [],
      };
      this.sessions.push(s);
    }
    return s;
  }

  /** The ServerMessage(s) answering one ClientMessage, encoded. */
  private answer(env: Envelope): Uint8Array[] {
    const err = (code: number, message: string) => [encodeServer('error', { code, message })];
    const m = member(env);
    if (!m) return err(400, 'empty client message');
    const b = m.body;
    const str = (k: string) => (typeof b[k] === 'string' ? (b[k] as string) : '');
    switch (m.name) {
      case 'ping':
        return [encodeServer('pong', {})];
      case 'get_stats':
        return [
          encodeServer('stats', {
            uptime_secs: '86400',
            active_conversations: 1,
            registered_agents: this.agents.length,
            active_model: 'gpt-4o-mini',
            version: '0.9.3',
          }),
        ];
      case 'list_agents':
        return [encodeServer('agent_list', { agents: this.agents.map((a) => this.info(a)) })];
      case 'get_agent': {
        const a = this.agents.find((x) => x.name === str('name'));
        return a ? [encodeServer('agent_info', this.info(a))] : err(404, `agent not found: ${str('name')}`);
      }
      case 'list_skills':
        return [
          encodeServer('skill_list', {
            skills: [
              { name: 'summarize', description: 'Summarize a long text' },
              { name: 'translate', description: 'Translate between languages' },
              { name: 'code-review', description: 'Review a diff' },
            ],
          }),
        ];
      case 'get_skill': {
        const known = ['summarize', 'translate', 'code-review'];
        return known.includes(str('name'))
          ? [encodeServer('skill_body', { name: str('name'), body: `# ${str('name')}\nDo it well.` })]
          : err(404, `skill not found: ${str('name')}`);
      }
      case 'list_models':
        return [
          encodeServer('model_list', {
            models: [
              { name: 'gpt-4o-mini', active: true },
              { name: 'gpt-4o', active: false },
            ],
          }),
        ];
      case 'list_subscriptions':
        return [encodeServer('subscription_list', { subscriptions: this.subscriptions })];
      case 'subscribe_event': {
        const sub = {
          id: this.nextSub++,
          source: str('source'),
          target_agent: str('target_agent'),
          once: !!b.once,
        };
        this.subscriptions.push(sub);
        return [encodeServer('subscription_info', sub)];
      }
      case 'unsubscribe_event': {
        const i = this.subscriptions.findIndex((s) => String(s.id) === String(b.id ?? '0'));
        if (i < 0) return err(404, `no subscription ${String(b.id ?? '0')}`);
        const [sub] = this.subscriptions.splice(i, 1);
        return [encodeServer('subscription_info', sub)];
      }
      case 'publish_event':
        this.published.push({ source: str('source'), payload: str('payload') });
        return [encodeServer('pong', {})];
      case 'send':
      case 'stream': {
        const a = this.agentById(str('agent'));
        if (!a) return err(404, `agent not found: ${str('agent')}`);
        const s = this.session(str('session_handle'), a.id, str('sender'));
        s.messages.push({ role: 'user', content: str('content') });
        const reply = `echo: ${str('content')}`;
        s.messages.push({ role: 'assistant', content: reply });
        const usage = { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 };
        if (m.name === 'send') {
          return [encodeServer('response', { agent: a.id, content: reply, model: a.model, usage })];
        }
        return [
          encodeServer('stream', { start: { agent: a.id } }),
          encodeServer('stream', { chunk: { content: 'echo: ' } }),
          encodeServer('stream', { chunk: { content: str('content') } }),
          encodeServer('stream', { end: { agent: a.id, model: a.model, usage } }),
        ];
      }
      case 'search_sessions': {
        const q = str('query').toLowerCase();
        const hits = this.sessions
          .filter(
            (s) =>
              (str('agent') === '' || s.agent_id === str('agent')) &&
              (str('sender') === '' || s.sender === str('sender')),
          )
          .flatMap((s) =>
            s.messages
              .map((msg, i) => ({ msg, i }))
              .filter(({ msg }) => q !== '' && msg.content.toLowerCase().includes(q))
              .map(({ msg, i }) => ({
                session_handle: s.session_handle,
                msg_idx: i,
                score: 1,
                title: s.title,
                agent_id: s.agent_id,
                agent_name: this.agentById(s.agent_id)?.name ?? '',
                sender: s.sender,
                created_at: '2026-11-30T09:00:00Z',
                updated_at: '2026-11-30T09:05:00Z',
                window: [{ role: msg.role, msg_idx: i, snippet: msg.content, truncated: false }],
              })),
          )
          .slice(0, typeof b.limit === 'number' ? b.limit : 20);
        return [encodeServer('session_hits', { hits })];
      }
      case 'list_conversations':
      case 'list_active_conversations': {
        const rows = this.sessions.filter(
          (s) =>
            (str('agent') === '' || s.agent_id === str('agent')) &&
            (str('sender') === '' || s.sender === str('sender')),
        );
        if (m.name === 'list_conversations') {
          return [
            encodeServer('conversation_list', {
              conversations: rows.map((s, i) => ({
                agent_id: s.agent_id,
                agent_name: this.agentById(s.agent_id)?.name ?? '',
                sender: s.sender,
                seq: i + 1,
                title: s.title,
                file_path: s.file_path,
                message_count: String(s.messages.length),
                alive_secs: '600',
                date: '2026-11-30',
              })),
            }),
          ];
        }
        return [
          encodeServer('active_conversations', {
            conversations: rows.map((s) => ({
              agent_id: s.agent_id,
              agent_name: this.agentById(s.agent_id)?.name ?? '',
              sender: s.sender,
              message_count: String(s.messages.length),
              alive_secs: '600',
              title: s.title,
              session_handle: s.session_handle,
            })),
          }),
        ];
      }
      case 'get_conversation_history': {
        const s = this.sessions.find((x) => x.file_path === str('file_path'));
        if (!s) return err(404, `no conversation at ${str('file_path')}`);
        return [
          encodeServer('conversation_history', {
            messages: s.messages,
            title: s.title,
            agent_id: s.agent_id,
            agent_name: this.agentById(s.agent_id)?.name ?? '',
          }),
        ];
      }
      // Never grantable to a harness, answered as the daemon answers a trusted client.
      case 'get_config':
        return [
          encodeServer('config', {
            config: JSON.stringify({ agents: this.agents.map((a) => JSON.parse(a.config) as unknown) }),
          }),
        ];
      case 'list_mcps':
        return [
          encodeServer('mcp_list', {
            mcps: [
              {
                name: 'github',
                url: 'https://mcp.github.example/sse',
                auth: `Bearer ${this.secret}`,
                env: { GITHUB_TOKEN: this.secret },
              },
            ],
          }),
        ];
      case 'delete_agent': {
        const i = this.agents.findIndex((a) => a.id === str('agent'));
        if (i < 0) return err(404, `agent not found: ${str('agent')}`);
        this.agents.splice(i, 1);
        return [encodeServer('pong', {})];
      }
      default:
        return err(501, `the double does not implement ${m.name}`);
    }
  }
}

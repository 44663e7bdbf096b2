/**
 * MCP at /mcp over streamable HTTP, with the official SDK's low-level Server (so a tool's input
 * schema is the manifest's JSON Schema as written, not a zod translation). Each MCP session gets
 * its own Server and transport; all of them see the same deployments.
 *
 * - tools: `{harness}.{tool}` for every published tool, inputSchema = the manifest's parameters.
 *   tools/call validates the arguments, runs the tool through the runtime, and answers: done →
 *   text content; berm.fail → an `isError` result carrying the message (the model should see it);
 *   arguments the tool cannot take (not JSON, not matching the schema, nested too deeply, over a
 *   tool call's 1 MiB) → an `isError` result with the message, naming the property for a schema
 *   mismatch (input validation errors are tool results, so that a model can correct its call); an
 *   unknown harness or tool, or a name that is not `harness.tool` → InvalidParams; a trap → a
 *   JSON-RPC error naming the trap, pc and symbol; a refused limit → a JSON-RPC error naming it.
 * - resources: `berm://{harness}/usage` (text/plain) listed for each harness with a usage
 *   string; reading one of a deployed harness without usage gives an empty text, any other URI
 *   is resource-not-found (-32002).
 * - initialize answers {@link MCP_INSTRUCTIONS}: the naming of tools and where usage lives.
 * - every deploy and undeploy sends notifications/tools/list_changed and
 *   notifications/resources/list_changed to every session.
 * - authority: `_meta` of tools/call may carry `berm/agent`, `berm/session`, `berm/sender`; the
 *   agent defaults to the client's name from initialize, the session to the MCP session id. A
 *   value over {@link MAX_AUTHORITY_CHARS} characters is refused as over HTTP: `400` with a
 *   JSON-RPC InvalidParams error naming the key (a client name that long: InvalidParams).
 * - params the SDK's schema of a method refuses (tools/call, tools/list, resources/list,
 *   resources/read; e.g. a `name` that is not a string) are InvalidParams (-32602) with one
 *   sentence naming the field, answered before the SDK, which would send InternalError and its
 *   validator's whole report.
 * - at most {@link MAX_MCP_SESSIONS} sessions (about 35 KB each): a new one closes the least
 *   recently used, whose client then gets 404 and, as the streamable HTTP transport requires,
 *   initializes again. Clients that never DELETE their session (most that crash or forget) would
 *   otherwise grow the daemon without bound.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  isInitializeRequest,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import { MAX_AUTHORITY_CHARS } from '../contract/index.js';
import type { Authority } from '../contract/index.js';
import type { Backend } from './backend.js';
import type { Deployments } from './deployments.js';
import { HttpError, sendJson } from './http.js';
import { boundEncodedResult } from './reply-size.js';

interface Session {
  server: Server;
  transport: StreamableHTTPServerTransport;
}

const META_KEYS = { agent: 'berm/agent', session: 'berm/session', sender: 'berm/sender' } as const;

/** The SDK's schema of each request method bermd's servers handle (after initialize). */
const REQUEST_SCHEMAS: Record<string, { safeParse(v: unknown): SchemaCheck }> = {
  'tools/call': CallToolRequestSchema,
  'tools/list': ListToolsRequestSchema,
  'resources/list': ListResourcesRequestSchema,
  'resources/read': ReadResourceRequestSchema,
};

interface SchemaCheck {
  success: boolean;
  error?: { issues: { path: PropertyKey[]; message: string }[] };
}

/** A refusal of one JSON-RPC request before the SDK sees it: the HTTP status and the error. */
export interface EarlyRefusal {
  status: number;
  id: string | number;
  code: number;
  message: string;
}

/**
 * Check one JSON-RPC message of a POST to /mcp before the SDK handles it: params its schema
 * refuses (InvalidParams, one sentence naming the first field, HTTP 200 as any JSON-RPC error) and
 * authority values in `_meta` of a tools/call over {@link MAX_AUTHORITY_CHARS} characters
 * (InvalidParams, HTTP 400 as the same value in an `X-Berm-*` header). A batch, a notification, a
 * response or a method bermd does not handle is left to the SDK.
 * @returns the refusal to send, or null to hand the message on
 */
export function checkMessage(body: unknown): EarlyRefusal | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return null;
  const m = body as { method?: unknown; id?: unknown; params?: unknown };
  if (typeof m.method !== 'string' || (typeof m.id !== 'string' && typeof m.id !== 'number')) return null;
  const schema = REQUEST_SCHEMAS[m.method];
  if (schema === undefined) return null;
  const r = schema.safeParse(body);
  if (!r.success) {
    const issues = r.error?.issues ?? [];
    const first = issues[0];
    const where = first === undefined ? 'params' : first.path.map(String).join('.') || 'params';
    const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : '';
    return {
      status: 200,
      id: m.id,
      code: ErrorCode.InvalidParams,
      message: `invalid ${m.method} params: ${where}: ${first?.message ?? 'refused'}${more}`,
    };
  }
  if (m.method === 'tools/call') {
    const meta = (m.params as { _meta?: unknown })._meta;
    const long = overLongMeta(meta);
    if (long !== null) return { status: 400, id: m.id, code: ErrorCode.InvalidParams, message: long };
  }
  return null;
}

/** The refusal of an authority value in `_meta` over the limit, or null when there is none. */
function overLongMeta(meta: unknown): string | null {
  if (typeof meta !== 'object' || meta === null) return null;
  for (const key of Object.values(META_KEYS)) {
    const v = (meta as Record<string, unknown>)[key];
    if (typeof v === 'string' && v.length > MAX_AUTHORITY_CHARS)
      return `_meta["${key}"] is longer than ${MAX_AUTHORITY_CHARS} characters`;
  }
  return null;
}

/**
 * A JSON-RPC error for the SDK's server to send: it sends a thrown error's `code`, `message` and
 * `data` as they are, and its client then prefixes the message with "MCP error CODE: ". The SDK's
 * own McpError already carries that prefix in its message, so thrown here it reached clients
 * twice; this one's message is berm's text alone.
 */
class RpcError extends Error {
  override name = 'RpcError';
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/**
 * The server's `instructions` (sent with initialize): how tools are named and where each
 * harness's usage notes are. One short paragraph: every harness's own usage would put a manual in
 * front of the model on every turn, so those stay resources, read when needed.
 */
export const MCP_INSTRUCTIONS =
  'Tools are named `{harness}.{tool}`: the deployed harness, a dot, then one of its tools. A ' +
  'harness that says when to use its tools and how they combine publishes that as the resource ' +
  '`berm://{harness}/usage`; read it before choosing among the tools of one harness.';

/** JSON-RPC code of an unknown resource (MCP: resource not found). */
export const RESOURCE_NOT_FOUND = -32002;

/** Default bound on open MCP sessions (least recently used closed first). */
export const MAX_MCP_SESSIONS = 1024;

/** The ids of the JSON-RPC requests in a POSTed message or batch (notifications have none). */
function requestIds(body: unknown): (string | number)[] {
  const ids: (string | number)[] = [];
  for (const m of Array.isArray(body) ? body : [body]) {
    if (typeof m !== 'object' || m === null || typeof (m as { method?: unknown }).method !== 'string')
      continue;
    const id = (m as { id?: unknown }).id;
    if (typeof id === 'string' || typeof id === 'number') ids.push(id);
  }
  return ids;
}

/** The MCP endpoint: sessions, their servers, and change notifications. */
export class McpEndpoint {
  /** in order of last use, least recent first */
  private readonly sessions = new Map<string, Session>();

  /** @param maxSessions open sessions kept (≥ 1); a new one beyond closes the least recently used */
  constructor(
    private readonly deployments: Deployments,
    private readonly backend: Backend,
    private readonly version: string,
    private readonly maxSessions = MAX_MCP_SESSIONS,
  ) {
    deployments.on('changed', () => {
      for (const s of this.sessions.values()) {
        s.server.sendToolListChanged().catch(() => undefined);
        s.server.sendResourceListChanged().catch(() => undefined);
      }
    });
  }

  /** Number of open MCP sessions. */
  get sessionCount(): number {
    return this.sessions.size;
  }

  /**
   * Handle one HTTP request to /mcp (POST with a parsed JSON body, GET for the notification
   * stream, DELETE to end a session).
   * @throws HttpError 400 for a request without a known session that is not an initialize
   */
  async handle(req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
    const sid = req.headers['mcp-session-id'];
    const id = Array.isArray(sid) ? sid[0] : sid;
    if (id !== undefined) {
      const s = this.sessions.get(id);
      if (!s) {
        sendJson(res, 404, { error: `no MCP session ${id}: initialize a new session` });
        return;
      }
      this.sessions.delete(id);
      this.sessions.set(id, s);
      const refused = req.method === 'POST' ? checkMessage(body) : null;
      if (refused !== null) {
        sendJson(res, refused.status, {
          jsonrpc: '2.0',
          id: refused.id,
          error: { code: refused.code, message: refused.message },
        });
        return;
      }
      // a client that drops its POST before the reply cancels the requests it carried, as a
      // notifications/cancelled of each would (the SDK aborts their handlers); the session stays
      const ids = req.method === 'POST' ? requestIds(body) : [];
      if (ids.length > 0)
        res.once('close', () => {
          if (res.writableFinished) return;
          for (const requestId of ids)
            s.transport.onmessage?.({
              jsonrpc: '2.0',
              method: 'notifications/cancelled',
              params: { requestId, reason: 'the HTTP client dropped its request before the reply' },
            });
        });
      await s.transport.handleRequest(req, res, body);
      return;
    }
    if (req.method !== 'POST' || !isInitializeRequest(body)) {
      throw new HttpError(400, 'no mcp-session-id header: the first request of a session must be initialize');
    }
    const server = this.newServer();
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (newId) => {
        while (this.sessions.size >= this.maxSessions) {
          const [oldest, old] = this.sessions.entries().next().value as [string, Session];
          this.sessions.delete(oldest);
          old.server.close().catch(() => undefined);
        }
        this.sessions.set(newId, { server, transport });
      },
    });
    transport.onclose = () => {
      if (transport.sessionId !== undefined) this.sessions.delete(transport.sessionId);
    };
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  }

  /** Close every session (shutdown). */
  async close(): Promise<void> {
    const all = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.allSettled(all.map((s) => s.server.close()));
  }

  private newServer(): Server {
    const server = new Server(
      { name: 'bermd', version: this.version },
      {
        capabilities: { tools: { listChanged: true }, resources: { listChanged: true } },
        instructions: MCP_INSTRUCTIONS,
      },
    );
    server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: this.deployments.list().flatMap((d) =>
        d.manifest.tools.map((t) => ({
          name: `${d.name}.${t.name}`,
          description: t.description,
          inputSchema: { type: 'object' as const, ...t.parameters },
        })),
      ),
    }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
      const full = request.params.name;
      const dot = full.indexOf('.');
      if (dot <= 0) {
        throw new RpcError(ErrorCode.InvalidParams, `tool name ${JSON.stringify(full)} is not harness.tool`);
      }
      const harness = full.slice(0, dot);
      const tool = full.slice(dot + 1);
      let args: string;
      try {
        args = this.deployments.checkArgs(harness, tool, request.params.arguments ?? {});
      } catch (e) {
        // no such harness or tool: the request names nothing callable, a protocol error
        if (e instanceof HttpError && e.status === 404)
          throw new RpcError(ErrorCode.InvalidParams, e.message);
        // arguments the tool cannot take: a result the model reads and corrects its call by
        if (e instanceof HttpError) return { content: [{ type: 'text', text: e.message }], isError: true };
        throw e;
      }
      const meta = (request.params._meta ?? {}) as Record<string, unknown>;
      const long = overLongMeta(meta);
      if (long !== null) throw new RpcError(ErrorCode.InvalidParams, long);
      const authority: Authority = {};
      const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
      if ((str(server.getClientVersion()?.name)?.length ?? 0) > MAX_AUTHORITY_CHARS)
        throw new RpcError(
          ErrorCode.InvalidParams,
          `the client's name from initialize is longer than ${MAX_AUTHORITY_CHARS} characters: send _meta["${META_KEYS.agent}"] instead`,
        );
      const agent = str(meta[META_KEYS.agent]) ?? str(server.getClientVersion()?.name);
      const session = str(meta[META_KEYS.session]) ?? str(extra.sessionId);
      const sender = str(meta[META_KEYS.sender]);
      if (agent !== undefined) authority.agent = agent;
      if (session !== undefined) authority.session = session;
      if (sender !== undefined) authority.sender = sender;
      // the SDK aborts extra.signal when the session closes (DELETE, eviction, shutdown) or the
      // client sends notifications/cancelled (or drops its POST: see handle): the call is
      // cancelled then
      const gone = new AbortController();
      const onAbort = () => {
        const why: unknown = extra.signal.reason;
        gone.abort(
          typeof why === 'string' && why !== ''
            ? `the MCP client cancelled the request (${why})`
            : 'the MCP session ended, or its client cancelled the request, before the reply',
        );
      };
      if (extra.signal.aborted) onAbort();
      else extra.signal.addEventListener('abort', onAbort, { once: true });
      const out = boundEncodedResult(
        await this.backend.invoke(harness, tool, args, { authority, signal: gone.signal }),
      );
      extra.signal.removeEventListener('abort', onAbort);
      switch (out.status) {
        case 'ok':
          return { content: [{ type: 'text', text: out.result }] };
        case 'failed':
          return { content: [{ type: 'text', text: out.message }], isError: true };
        case 'trapped':
          throw new RpcError(
            ErrorCode.InternalError,
            `${full} trapped: ${out.trap}: ${out.message} at pc 0x${out.pc.toString(16)}${out.symbol ? ` (${out.symbol})` : ''}`,
            { trap: out.trap, pc: out.pc, symbol: out.symbol },
          );
        case 'refused':
          throw new RpcError(ErrorCode.InternalError, `${full} refused: ${out.message}`, {
            limit: out.limit,
          });
        case 'error':
          throw new RpcError(ErrorCode.InternalError, `${full}: ${out.message}`);
      }
    });
    server.setRequestHandler(ListResourcesRequestSchema, async () => ({
      resources: this.deployments
        .list()
        .filter((d) => d.manifest.usage !== '')
        .map((d) => ({
          uri: `berm://${d.name}/usage`,
          name: `${d.name} usage`,
          description: `how to use the ${d.name} harness`,
          mimeType: 'text/plain',
        })),
    }));
    server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
      const m = /^berm:\/\/([a-z0-9_-]+)\/usage$/.exec(request.params.uri);
      const d = m ? this.deployments.get(m[1]!) : undefined;
      if (!d) {
        throw new RpcError(RESOURCE_NOT_FOUND, `resource not found: ${request.params.uri}`, {
          uri: request.params.uri,
        });
      }
      return { contents: [{ uri: request.params.uri, mimeType: 'text/plain', text: d.manifest.usage }] };
    });
    return server;
  }
}

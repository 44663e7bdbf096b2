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
 *   agent defaults to the client's name from initialize, the session to the MCP session id.
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
import type { Authority } from '../contract/index.js';
import type { Backend } from './backend.js';
import type { Deployments } from './deployments.js';
import { HttpError, sendJson } from './http.js';

interface Session {
  server: Server;
  transport: StreamableHTTPServerTransport;
}

const META_KEYS = { agent: 'berm/agent', session: 'berm/session', sender: 'berm/sender' } as const;

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
      const authority: Authority = {};
      const str = (v: unknown): string | undefined =>
        typeof v === 'string' && v !== '' ? v.slice(0, 256) : undefined;
      const agent = str(meta[META_KEYS.agent]) ?? str(server.getClientVersion()?.name);
      const session = str(meta[META_KEYS.session]) ?? str(extra.sessionId);
      const sender = str(meta[META_KEYS.sender]);
      if (agent !== undefined) authority.agent = agent;
      if (session !== undefined) authority.session = session;
      if (sender !== undefined) authority.sender = sender;
      const out = await this.backend.invoke(harness, tool, args, { authority });
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

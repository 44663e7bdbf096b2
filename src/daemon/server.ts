/**
 * The daemon's HTTP server (node:http): connections (the --max-connections cap, the write
 * timeout), the drain at shutdown, and the route table (src/daemon/routes/: one module per
 * resource, with authentication — bearer token or workbench session — and metrics as the router's
 * hooks).
 *
 *   GET    /health                              {"status":"ok"} (no token needed)
 *   GET    /metrics                             Prometheus text
 *   GET    /events                              SSE change feed (src/daemon/events.ts)
 *   GET|PUT|DELETE /harnesses[/{name}]          routes/harnesses.ts (GET /harnesses: a bare array)
 *   POST   /harnesses/{name}/tools/{tool}       routes/harnesses.ts (JSON or SSE)
 *   GET    /harnesses/{name}/code[?function=|?pc=]  translated code (src/daemon/code-routes.ts)
 *   POST   /wakes  GET /wakes  DELETE /wakes/{id}  GET /wakes/fired   routes/wakes.ts
 *   GET    /index  POST /index/install          the harness index (src/daemon/index-routes.ts)
 *   GET    /  /assets/*  GET|POST|DELETE /session   the workbench page and its sessions
 *                                               (src/daemon/workbench.ts, run by the auth hook)
 *   POST|GET|DELETE /mcp                        MCP streamable HTTP (routes/mcp.ts)
 *
 * Every refusal is `{"error": "..."}` (plus detail fields for traps). The serving thread parses,
 * validates and routes; guests and translations run behind the Backend.
 */
import {
  createServer,
  STATUS_CODES,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Backend } from './backend.js';
import { BearerAuth, refuseBrowsers } from './auth.js';
import { CodeListings } from './code-routes.js';
import { ConnectionGate, type ShedReason } from './connections.js';
import { describe, type Deployments } from './deployments.js';
import { EventHub, feedEvents } from './events.js';
import { BufferBudget } from './budget.js';
import { HttpError, sendError, sendJson } from './http.js';
import { storeFault } from '../store/store-fault.js';
import type { IndexSource } from '../index/source.js';
import { McpEndpoint } from './mcp.js';
import { Metrics } from './metrics.js';
import type { RouteContext } from './routes/context.js';
import { eventRoutes } from './routes/events.js';
import { harnessRoutes } from './routes/harnesses.js';
import { healthRoutes } from './routes/health.js';
import { indexRoutes } from './routes/index-service.js';
import { mcpRoutes } from './routes/mcp.js';
import { metricsRoutes } from './routes/metrics.js';
import { Router } from './routes/router.js';
import { wakeRoutes } from './routes/wakes.js';
import { setStrictHeaders, Workbench } from './workbench.js';

/** Limits of the HTTP layer (bytes, ms). */
export interface HttpLimits {
  /** largest ELF accepted by PUT /harnesses/{name} */
  maxImageBytes: number;
  /** largest body of every other request (tool arguments, wakes, MCP messages) */
  maxBodyBytes: number;
  /** a request body must arrive completely within this time */
  bodyTimeoutMs: number;
  /**
   * a connection whose written reply bytes wait in its buffer with no progress (none taken by the
   * client) for this long is destroyed and counted (berm_http_write_timeouts_total); an idle
   * connection (nothing waiting: an SSE stream between events) is never affected, ms
   */
  writeTimeoutMs: number;
  /**
   * most client connections served at once (≥ 1). At the cap the oldest connection that has not
   * finished its first request's headers is closed in favour of a new one (./connections.ts); when
   * there is none, the new one is answered 503 with a JSON error and `connection: close` on its
   * first request, and closed after {@link OVER_CAP_GRACE_MS} if it sends none.
   */
  maxConnections: number;
  /** most client connections from one remote address served at once (≥ 1), the same way */
  maxConnectionsPerAddress: number;
  /**
   * bytes of request bodies and unread replies held at once (./budget.ts); over it, requests other
   * than /health and /metrics are answered 503 with Retry-After
   */
  maxBufferedBytes: number;
}

/** How long a kept-alive connection may wait for its next request before it is closed, ms. */
export const KEEP_ALIVE_MS = 5000;

/** How long a connection over the cap may take to send the request its 503 answers, ms. */
export const OVER_CAP_GRACE_MS = 2000;

/** What {@link DaemonServer} is built from. */
export interface DaemonServerOptions {
  backend: Backend;
  deployments: Deployments;
  /** bearer token; null only on loopback */
  token: string | null;
  limits: HttpLimits;
  /** version reported to MCP clients */
  version: string;
  /** one line per notable event (deploys, undeploys, shutdown) */
  log: (line: string) => void;
  /** the index of `--index` (GET /index, POST /index/install: ./index-routes.ts), null without */
  index?: IndexSource | null;
  /** the built workbench page's folder (default: found beside the daemon; null: none) */
  workbenchAssets?: string | null;
}

/** The HTTP face of the daemon. Create, {@link listen}, {@link close}. */
export class DaemonServer {
  readonly http: Server;
  readonly metrics: Metrics;
  readonly mcp: McpEndpoint;
  /** the change feed of GET /events */
  readonly events = new EventHub();
  /** the workbench page, its sessions and the page's authorisation */
  readonly workbench: Workbench;
  /** GET /harnesses/{name}/code (src/daemon/code-routes.ts) */
  private readonly code: CodeListings;
  private readonly auth: BearerAuth;
  private readonly router: Router;
  /** every open connection (served or over the cap), destroyed at close */
  private readonly sockets = new Set<Socket>();
  /** the connection caps (./connections.ts) */
  private readonly gate: ConnectionGate;
  /** bytes held for clients (./budget.ts) */
  readonly budget: BufferBudget;
  /** connections turned away at a cap, and why: their requests are answered 503 */
  private readonly overCap = new WeakMap<Socket, ShedReason>();
  private active = 0;
  private closing = false;
  private idle: (() => void) | null = null;
  /** sockets with reply bytes waiting: bytes taken so far and since when that figure stands */
  private readonly stalls = new Map<Socket, { taken: number; since: number }>();
  private readonly sweeper: NodeJS.Timeout;
  /** while the daemon restores its deployments: what it is doing, for the 503s and /health */
  private booting: (() => string) | null = null;

  constructor(private readonly o: DaemonServerOptions) {
    this.auth = new BearerAuth(o.token);
    this.metrics = new Metrics(o.backend, () => o.deployments.list().length);
    this.budget = new BufferBudget(o.limits.maxBufferedBytes);
    this.gate = new ConnectionGate(
      o.limits.maxConnections,
      Math.min(o.limits.maxConnections, o.limits.maxConnectionsPerAddress),
      (reason) => this.metrics.shed(reason),
    );
    this.mcp = new McpEndpoint(o.deployments, o.backend, o.version);
    this.workbench = new Workbench(this.auth, o.workbenchAssets);
    this.code = new CodeListings(o.deployments);
    feedEvents(
      this.events,
      o.deployments,
      (name) => {
        const d = o.deployments.get(name);
        return d === undefined ? null : describe(d);
      },
      o.backend,
    );
    const ctx: RouteContext = {
      backend: o.backend,
      deployments: o.deployments,
      log: o.log,
      body: (maxBytes = o.limits.maxBodyBytes) => ({
        maxBytes,
        timeoutMs: o.limits.bodyTimeoutMs,
        budget: this.budget,
      }),
      maxImageBytes: o.limits.maxImageBytes,
      budget: this.budget,
      closing: () => this.closing,
    };
    const restoring = (): string | null => (this.booting === null ? null : this.booting());
    this.router = new Router(
      [
        healthRoutes(ctx, restoring),
        metricsRoutes(this.metrics),
        eventRoutes(this.events),
        mcpRoutes(ctx, this.mcp),
        harnessRoutes(ctx, this.code),
        wakeRoutes(ctx, this.events),
        indexRoutes(ctx, o.index ?? null),
      ],
      {
        // a workbench page or session request is answered here, before the API's authorisation
        authenticate: async (req, res, pathname) => {
          const source = refuseBrowsers(req, this.auth.enabled);
          // `Expect: 100-continue` (the only expectation Node lets through): the client sends its
          // body once told to, which is after authentication; a login sends its token in the body
          const expects = req.headers.expect !== undefined;
          if (expects && pathname === '/session') res.writeContinue();
          const page = await this.workbench.handle(req, res, pathname, ctx.body());
          if (page !== null) return page;
          this.workbench.authorize(req, source);
          if (expects) res.writeContinue();
          return null;
        },
        finished: (route, status) => this.metrics.request(route, status),
        restoring,
      },
    );
    // A connection that never finishes its headers (slowloris: a byte now and then, or none) holds
    // a slot of --max-connections before any authentication: Node's headersTimeout closes it with
    // a 408, but only when its connection check runs, every 30 s by default, so such a connection
    // stayed 30-40 s whatever the timeout. The check runs at a quarter of the timeout instead
    // (100 ms to 1 s: it walks the open connections, at most --max-connections of them).
    const headersTimeout = Math.min(o.limits.bodyTimeoutMs, 60_000);
    this.http = createServer(
      {
        keepAliveTimeout: KEEP_ALIVE_MS,
        connectionsCheckingInterval: Math.min(1000, Math.max(100, Math.floor(headersTimeout / 4))),
      },
      (req, res) => void this.serve(req, res),
    );
    // a request with `Expect: 100-continue` comes here instead; the 100 is sent after authentication
    // (the authenticate hook above), so an unauthenticated client is refused before sending a body
    this.http.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => void this.serve(req, res));
    // Node's own answer to a connection whose headers time out (or do not parse), counted: 408 for a
    // timeout, 431 for headers too large, else 400, written only when nothing was written yet
    this.http.on('clientError', (err: NodeJS.ErrnoException, s: Socket) => {
      const timedOut = err.code === 'ERR_HTTP_REQUEST_TIMEOUT';
      if (timedOut) this.metrics.timeout('headers');
      if (s.writable && s.bytesWritten === 0) {
        const status = timedOut ? 408 : err.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400;
        s.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\n\r\n`);
      }
      s.destroy();
    });
    // a kept-alive connection without a request for keepAliveTimeout: closed, as Node does, and counted
    this.http.on('timeout', (s: Socket) => {
      this.metrics.timeout('idle');
      s.destroy();
    });
    // the body deadline is ours (a JSON 408); Node's own request timeout stays as a backstop
    this.http.requestTimeout = Math.max(o.limits.bodyTimeoutMs * 4, 60_000);
    this.http.headersTimeout = headersTimeout;
    // the sweep also sums the bytes waiting for readers, for the byte budget: a few times a second
    this.sweeper = setInterval(
      () => this.sweepStalled(),
      Math.min(250, Math.max(25, Math.floor(o.limits.writeTimeoutMs / 4))),
    );
    this.sweeper.unref();
    this.http.on('connection', (s: Socket) => {
      this.sockets.add(s);
      // over the cap: answer its first request 503 (serve), or drop it if it sends none soon;
      // it holds a descriptor for at most the grace period
      let drop: NodeJS.Timeout | null = null;
      const refused = this.gate.admit(s);
      if (refused !== null) {
        this.overCap.set(s, refused);
        drop = setTimeout(() => s.destroy(), OVER_CAP_GRACE_MS);
        drop.unref();
      }
      s.on('close', () => {
        this.sockets.delete(s);
        this.stalls.delete(s);
        if (drop !== null) clearTimeout(drop);
        else this.gate.closed(s);
      });
    });
  }

  /**
   * The write timeout: a socket whose buffered reply bytes (`writableLength` > 0) have not moved
   * (bytes taken = `bytesWritten` - `writableLength`, unchanged) for `writeTimeoutMs` belongs to a
   * client that does not read; it is destroyed, freeing the reply it pins, and counted. Progress
   * of any size restarts the clock, and a socket with nothing waiting is not watched, so slow
   * readers and idle SSE streams carry on.
   */
  private sweepStalled(): void {
    const now = Date.now();
    let held = 0;
    for (const s of this.sockets) {
      const waiting = s.writableLength;
      held += waiting;
      if (waiting === 0 || s.destroyed) {
        this.stalls.delete(s);
        continue;
      }
      const taken = (s.bytesWritten ?? 0) - waiting;
      const st = this.stalls.get(s);
      if (!st || st.taken !== taken) {
        this.stalls.set(s, { taken, since: now });
      } else if (now - st.since >= this.o.limits.writeTimeoutMs) {
        this.stalls.delete(s);
        this.metrics.writeTimeout();
        s.destroy();
      }
    }
    this.budget.setBuffered(held);
  }

  /**
   * Mark the daemon as restoring (a function saying how far, e.g. "restoring 3 of 12
   * deployments") or done (null). While restoring, every request that needs the deployments or
   * the due-set (`/harnesses...`, `/wakes...`, `/mcp`) is answered `503` with `Retry-After: 1`
   * and the progress, after authentication; `/health` answers `200 {"status":"restoring",
   * "restore"}` and `/metrics` as always.
   */
  setBooting(progress: (() => string) | null): void {
    this.booting = progress;
  }

  /** Listen on host:port (port 0: an ephemeral port). @returns the bound address */
  listen(host: string, port: number): Promise<AddressInfo> {
    return new Promise((resolve, reject) => {
      this.http.once('error', reject);
      this.http.listen(port, host, () => {
        this.http.off('error', reject);
        resolve(this.http.address() as AddressInfo);
      });
    });
  }

  /**
   * Stop accepting connections, let requests in progress finish for up to `drainMs`, then close
   * every connection and MCP session.
   * @returns the number of requests still running when the bound ran out (0 when all finished)
   */
  async close(drainMs: number): Promise<number> {
    this.closing = true;
    const closed = new Promise<void>((r) => this.http.close(() => r()));
    this.http.closeIdleConnections();
    if (this.active > 0) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, drainMs);
        this.idle = () => {
          clearTimeout(t);
          resolve();
        };
      });
    }
    const left = this.active;
    this.events.close();
    await this.code.close();
    await this.mcp.close();
    for (const s of this.sockets) s.destroy();
    clearInterval(this.sweeper);
    await closed;
    return left;
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const refused = this.overCap.get(req.socket);
    if (refused !== undefined) {
      res.on('finish', () => this.metrics.request('over-capacity', 503));
      res.setHeader('connection', 'close');
      res.setHeader('retry-after', '1');
      sendJson(res, 503, {
        error:
          refused === 'per-address'
            ? `bermd serves at most ${this.gate.maxPerAddress} connections at once from one address (--max-connections-per-address); retry later`
            : `bermd serves at most ${this.gate.max} connections at once (--max-connections); retry later`,
      });
      return;
    }
    this.gate.request(req.socket);
    // split the raw path ourselves: URL parsing would resolve '..' and hide a bad name
    const pathname = (req.url ?? '/').split('?')[0]!;
    const parts = pathname.split('/').slice(1);
    const method = req.method ?? 'GET';
    const match = this.router.match(parts, method);
    const counted = match.route?.counts?.(method) ?? true;
    if (counted) this.active++;
    try {
      setStrictHeaders(res);
      if (this.closing) res.setHeader('connection', 'close');
      // over the byte budget no new work starts; /health and /metrics still answer
      if (this.budget.exhausted && match.route?.duringRestore !== true) {
        res.on('finish', () => this.metrics.request('over-budget', 503));
        throw this.budget.spent();
      }
      await this.router.dispatch({ req, res, method, pathname, parts }, match);
    } catch (thrown) {
      // a store fault (a full disk, a locked or unreachable database) is not the client's mistake
      // and acknowledged nothing: 503, to be retried
      const fault = thrown instanceof HttpError ? null : storeFault(thrown);
      const e =
        fault === null ? thrown : new HttpError(503, `${fault}: ${(thrown as Error).message}; retry later`);
      // a refusal before the body was read closes the connection rather than read (or drain) a body
      // nobody will use: 413, 408, and 401/403 (an unauthenticated client must not make bermd
      // read its upload)
      if (e instanceof HttpError && [401, 403, 408, 413, 503].includes(e.status))
        res.setHeader('connection', 'close');
      if (e instanceof HttpError && e.status === 503 && !res.headersSent && !res.hasHeader('retry-after'))
        res.setHeader('retry-after', String(e.extra.retry_after ?? 1));
      if (e instanceof HttpError && e.status === 408) this.metrics.timeout('body');
      if (e instanceof HttpError && e.status === 401)
        res.setHeader('www-authenticate', 'Bearer realm="bermd"');
      sendError(res, e);
    } finally {
      this.budget.release(req);
      if (counted) {
        this.active--;
        if (this.active === 0) this.idle?.();
      }
    }
  }
}

/**
 * The daemon's HTTP server (node:http): routing of the upstream-compatible API, authentication,
 * body limits, SSE invocations, MCP and metrics, and a graceful close.
 *
 *   GET    /health                              {"status":"ok"} (no token needed)
 *   GET    /metrics                             Prometheus text
 *   GET    /harnesses                           [inspect shape...] (a bare array, sorted by name)
 *   GET    /harnesses/{name}                    {name, digest, usage, tools, deps, granted, deployed_at}
 *   PUT    /harnesses/{name}                    body = ELF bytes; 200 with the inspect shape
 *   DELETE /harnesses/{name}                    204
 *   POST   /harnesses/{name}/tools/{tool}       body = argument JSON; 200 {"done"} | {"failed"};
 *                                               Accept: text/event-stream streams berm.log lines
 *   POST   /wakes  GET /wakes  DELETE /wakes/{id}  GET /wakes/fired (recent firings)
 *   GET    /harnesses/{name}/code[?function=|?pc=]  translated code (src/daemon/code-routes.ts)
 *   GET    /events                              SSE change feed (src/daemon/events.ts)
 *   GET    /  /assets/*  GET|POST|DELETE /session   the workbench page and its sessions
 *                                               (src/daemon/workbench.ts)
 *   POST|GET|DELETE /mcp                        MCP streamable HTTP
 *
 * Every refusal is `{"error": "..."}` (plus detail fields for traps). The serving thread parses,
 * validates and routes; guests and translations run behind the Backend.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Authority, Backend, InvokeOutcome } from './backend.js';
import { BearerAuth, refuseBrowsers } from './auth.js';
import { CodeListings } from './code-routes.js';
import { describe, Deployments } from './deployments.js';
import { EventHub, feedEvents } from './events.js';
import {
  HttpError,
  checkHarnessName,
  endSliced,
  readBody,
  routeHarnessName,
  sendError,
  sendJson,
} from './http.js';
import { serveIndex } from './index-routes.js';
import type { IndexSource } from '../index/source.js';
import { McpEndpoint } from './mcp.js';
import { Metrics } from './metrics.js';
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
   * most client connections served at once (≥ 1). A connection beyond it is answered 503 with a
   * JSON error and `connection: close` on its first request, and closed after
   * {@link OVER_CAP_GRACE_MS} if it sends none; the served connections are unaffected.
   */
  maxConnections: number;
}

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

const AUTHORITY_HEADERS = {
  agent: 'x-berm-agent',
  session: 'x-berm-session',
  sender: 'x-berm-sender',
} as const;

/**
 * The authority an HTTP request states (`X-Berm-Agent`, `X-Berm-Session`, `X-Berm-Sender`; each
 * at most 256 characters, longer values refused).
 * @throws HttpError 400 on a value over 256 characters
 */
export function authorityFromHeaders(req: IncomingMessage): Authority {
  const out: Authority = {};
  for (const [k, h] of Object.entries(AUTHORITY_HEADERS) as [keyof Authority, string][]) {
    const v = req.headers[h];
    const s = Array.isArray(v) ? v[0] : v;
    if (s === undefined || s === '') continue;
    if (s.length > 256) throw new HttpError(400, `${h} is longer than 256 characters`);
    out[k] = s;
  }
  return out;
}

/** The body of a finished invocation and its status (upstream shapes). */
export function outcomeReply(
  harness: string,
  tool: string,
  out: InvokeOutcome,
): [number, Record<string, unknown>] {
  switch (out.status) {
    case 'ok':
      return [200, { done: out.result }];
    case 'failed':
      return [200, { failed: out.message }];
    case 'trapped':
      return [
        500,
        {
          error: `${harness}.${tool} trapped: ${out.trap}: ${out.message} at pc 0x${out.pc.toString(16)}${out.symbol ? ` (${out.symbol})` : ''}`,
          trap: out.trap,
          pc: out.pc,
          symbol: out.symbol,
        },
      ];
    case 'refused':
      return [
        429,
        { error: `${harness}.${tool} refused: ${out.message}`, ...(out.limit ? { limit: out.limit } : {}) },
      ];
    case 'error':
      // the shared store is away, or the call ran but its journal record could not be written:
      // nothing is acknowledged, the client retries (the Retry-After header is set by the caller)
      if (out.code === STORE_UNAVAILABLE)
        return [503, { error: `${harness}.${tool}: ${out.message}`, retry_after: STORE_RETRY_AFTER_S }];
      return [500, { error: `${harness}.${tool}: ${out.message}` }];
  }
}

/** The error code of an invocation the store could not record (answered 503 with Retry-After). */
export const STORE_UNAVAILABLE = 'store-unavailable';
/** Retry-After of that 503, seconds. */
export const STORE_RETRY_AFTER_S = 1;

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
  /** every open connection (served or over the cap), destroyed at close */
  private readonly sockets = new Set<Socket>();
  /** open connections within the cap */
  private served = 0;
  /** connections over the cap: their requests are answered 503 */
  private readonly overCap = new WeakSet<Socket>();
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
    // A connection that never finishes its headers (slowloris: a byte now and then, or none) holds
    // a slot of --max-connections before any authentication: Node's headersTimeout closes it with
    // a 408, but only when its connection check runs, every 30 s by default, so such a connection
    // stayed 30-40 s whatever the timeout. The check runs at a quarter of the timeout instead
    // (100 ms to 1 s: it walks the open connections, at most --max-connections of them).
    const headersTimeout = Math.min(o.limits.bodyTimeoutMs, 60_000);
    this.http = createServer(
      {
        keepAliveTimeout: 5000,
        connectionsCheckingInterval: Math.min(1000, Math.max(100, Math.floor(headersTimeout / 4))),
      },
      (req, res) => void this.serve(req, res),
    );
    // the body deadline is ours (a JSON 408); Node's own request timeout stays as a backstop
    this.http.requestTimeout = Math.max(o.limits.bodyTimeoutMs * 4, 60_000);
    this.http.headersTimeout = headersTimeout;
    this.sweeper = setInterval(
      () => this.sweepStalled(),
      Math.min(1000, Math.max(25, Math.floor(o.limits.writeTimeoutMs / 4))),
    );
    this.sweeper.unref();
    this.http.on('connection', (s: Socket) => {
      this.sockets.add(s);
      // over the cap: answer its first request 503 (serve), or drop it if it sends none soon;
      // it holds a descriptor for at most the grace period
      let drop: NodeJS.Timeout | null = null;
      if (this.served >= o.limits.maxConnections) {
        this.overCap.add(s);
        drop = setTimeout(() => s.destroy(), OVER_CAP_GRACE_MS);
        drop.unref();
      } else this.served++;
      s.on('close', () => {
        this.sockets.delete(s);
        this.stalls.delete(s);
        if (drop !== null) clearTimeout(drop);
        else this.served--;
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
    for (const s of this.sockets) {
      const waiting = s.writableLength;
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
    if (this.overCap.has(req.socket)) {
      res.on('finish', () => this.metrics.request('over-capacity', 503));
      res.setHeader('connection', 'close');
      res.setHeader('retry-after', '1');
      sendJson(res, 503, {
        error: `bermd serves at most ${this.o.limits.maxConnections} connections at once (--max-connections); retry later`,
      });
      return;
    }
    // an MCP GET is the session's notification stream: open as long as the client stays, it is
    // not work in progress and must not hold the drain at shutdown
    // the same for the change feed (GET /events)
    const bare = (req.url ?? '').split('?')[0];
    const counted = !(req.method === 'GET' && (bare === '/mcp' || bare === '/events'));
    if (counted) this.active++;
    let route = 'unknown';
    res.on('finish', () => this.metrics.request(route, res.statusCode));
    try {
      setStrictHeaders(res);
      if (this.closing) res.setHeader('connection', 'close');
      // split the raw path ourselves: URL parsing would resolve '..' and hide a bad name
      const pathname = (req.url ?? '/').split('?')[0]!;
      const url = { pathname };
      const parts = pathname.split('/').slice(1);
      const method = req.method ?? 'GET';
      if (url.pathname === '/health') {
        route = '/health';
        if (method !== 'GET' && method !== 'POST' && method !== 'HEAD') throw notAllowed(method, 'GET');
        if (method === 'POST') await readBody(req, this.bodyLimits());
        const booting = this.booting;
        sendJson(res, 200, booting === null ? { status: 'ok' } : { status: 'restoring', restore: booting() });
        return;
      }
      const source = refuseBrowsers(req, this.auth.enabled);
      const page = await this.workbench.handle(req, res, url.pathname, this.bodyLimits());
      if (page !== null) {
        route = page;
        return;
      }
      this.workbench.authorize(req, source);
      if (url.pathname === '/metrics') {
        route = '/metrics';
        if (method !== 'GET') throw notAllowed(method, 'GET');
        const m = await this.metrics.render();
        res.writeHead(200, { 'content-type': m.contentType });
        res.end(m.text);
        return;
      }
      if (url.pathname === '/events') {
        route = '/events';
        if (method !== 'GET') throw notAllowed(method, 'GET');
        this.events.subscribe(req, res);
        return;
      }
      if (this.booting !== null) {
        route = 'restoring';
        res.setHeader('retry-after', '1');
        throw new HttpError(503, `bermd is restoring its deployments (${this.booting()}); retry shortly`);
      }
      if (url.pathname === '/mcp') {
        route = '/mcp';
        const body = method === 'POST' ? parseJson(await readBody(req, this.bodyLimits())) : undefined;
        await this.mcp.handle(req, res, body);
        return;
      }
      if (parts[0] === 'harnesses') {
        const name =
          parts.length > 1 && parts[1] !== '' ? routeHarnessName(segment(parts[1]!), method) : undefined;
        if (parts.length === 1 || (parts.length === 2 && parts[1] === '')) {
          route = '/harnesses';
          if (method !== 'GET') throw notAllowed(method, 'GET');
          sendJson(res, 200, this.o.deployments.list().map(describe));
          return;
        }
        if (parts.length === 2) {
          route = '/harnesses/{name}';
          return await this.harness(method, name!, req, res);
        }
        if (parts.length === 3 && parts[2] === 'code') {
          route = '/harnesses/{name}/code';
          const at = (req.url ?? '').indexOf('?');
          return await this.code.serve(name!, method, at < 0 ? '' : (req.url ?? '').slice(at + 1), res);
        }
        if (parts.length === 4 && parts[2] === 'tools') {
          route = '/harnesses/{name}/tools/{tool}';
          if (method !== 'POST') throw notAllowed(method, 'POST');
          return await this.invoke(name!, segment(parts[3]!), req, res);
        }
      }
      if (parts[0] === 'wakes') {
        if (parts.length === 1) {
          route = '/wakes';
          if (method === 'GET') {
            const limit = listLimit(req.url ?? '');
            const { wakes, pending } = await this.o.backend.listWakes(limit);
            sendJson(res, 200, { wakes, pending, ...(pending > wakes.length ? { truncated: true } : {}) });
            return;
          }
          if (method === 'POST') return await this.armWake(req, res);
          throw notAllowed(method, 'GET, POST');
        }
        if (parts.length === 2 && parts[1] === 'fired' && method === 'GET') {
          route = '/wakes/fired';
          sendJson(res, 200, { fired: this.events.recentFirings() });
          return;
        }
        if (parts.length === 2) {
          route = '/wakes/{id}';
          if (method !== 'DELETE') throw notAllowed(method, 'DELETE');
          const id = segment(parts[1]!);
          if (!(await this.o.backend.cancelWake(id))) throw new HttpError(404, `no wake with id ${id}`);
          res.writeHead(204).end();
          return;
        }
      }
      if (parts[0] === 'index') {
        route = '/index';
        const query = (req.url ?? '').includes('?')
          ? (req.url ?? '').slice((req.url ?? '').indexOf('?') + 1)
          : '';
        const index = {
          source: this.o.index ?? null,
          deployments: this.o.deployments,
          body: (r: IncomingMessage) => readBody(r, this.bodyLimits()),
          log: this.o.log,
        };
        route = await serveIndex(index, method, parts, query, req, res);
        return;
      }
      throw new HttpError(404, `no route ${method} ${url.pathname}`);
    } catch (e) {
      if (e instanceof HttpError && (e.status === 413 || e.status === 408))
        res.setHeader('connection', 'close');
      if (e instanceof HttpError && e.status === 401)
        res.setHeader('www-authenticate', 'Bearer realm="bermd"');
      sendError(res, e);
    } finally {
      if (counted) {
        this.active--;
        if (this.active === 0) this.idle?.();
      }
    }
  }

  private bodyLimits(max = this.o.limits.maxBodyBytes): { maxBytes: number; timeoutMs: number } {
    return { maxBytes: max, timeoutMs: this.o.limits.bodyTimeoutMs };
  }

  private async harness(
    method: string,
    name: string,
    req: IncomingMessage,
    res: ServerResponse,
  ): Promise<void> {
    const d = this.o.deployments;
    if (method === 'GET') {
      sendJson(res, 200, describe(d.require(name)));
    } else if (method === 'PUT') {
      if (this.closing) throw new HttpError(503, 'bermd is shutting down');
      const bytes = await readBody(req, this.bodyLimits(this.o.limits.maxImageBytes));
      if (bytes.length === 0) throw new HttpError(400, 'empty body: PUT the harness ELF bytes');
      let deployed;
      try {
        deployed = await d.deploy(name, new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length));
      } catch (e) {
        // a pinned sha256 that differs is the operator's to resolve (the 403 tells the client to
        // ask them): the operator sees it here, not only whoever deployed
        if (e instanceof HttpError && e.status === 403)
          this.o.log(`refused the deploy of ${name}: ${e.message}`);
        throw e;
      }
      const { deployment, changed } = deployed;
      if (changed) {
        const caps = deployment.granted.capabilities.join(', ') || 'none';
        this.o.log(`deployed ${name} sha256 ${deployment.digest} capabilities: ${caps}`);
      }
      sendJson(res, 200, describe(deployment));
    } else if (method === 'DELETE') {
      await d.undeploy(name);
      this.o.log(`undeployed ${name}`);
      res.writeHead(204).end();
    } else {
      throw notAllowed(method, 'GET, PUT, DELETE');
    }
  }

  private async invoke(
    harness: string,
    tool: string,
    req: IncomingMessage,
    res: ServerResponse,
  ): Promise<void> {
    if (this.closing) throw new HttpError(503, 'bermd is shutting down');
    const body = await readBody(req, this.bodyLimits());
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(body);
    } catch {
      throw new HttpError(400, 'arguments are not valid UTF-8');
    }
    const args = this.o.deployments.checkArgs(harness, tool, text);
    const authority = authorityFromHeaders(req);
    const sse = (req.headers.accept ?? '').includes('text/event-stream');
    if (!sse) {
      const out = await this.o.backend.invoke(harness, tool, args, { authority });
      if (out.chain !== undefined) res.setHeader('x-berm-chain', out.chain);
      const [status, reply] = outcomeReply(harness, tool, out);
      if (status === 503) res.setHeader('retry-after', String(STORE_RETRY_AFTER_S));
      sendJson(res, status, reply);
      return;
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-accel-buffering': 'no',
    });
    res.flushHeaders();
    const out = await this.o.backend.invoke(harness, tool, args, {
      authority,
      onLog: (line) => {
        if (!res.writableEnded) res.write(sseEvent('log', line));
      },
    });
    const [status, reply] = outcomeReply(harness, tool, out);
    const chain = out.chain !== undefined ? { chain: out.chain } : {};
    endSliced(res, Buffer.from(sseEvent('result', JSON.stringify({ status, ...reply, ...chain }))));
  }

  private async armWake(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = parseJson(await readBody(req, this.bodyLimits()));
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw new HttpError(400, 'the body must be a JSON object {"harness", "delay_ms", "payload"?, "id"?}');
    }
    const b = body as Record<string, unknown>;
    if (typeof b.harness !== 'string') throw new HttpError(400, 'harness is missing or not a string');
    const harness = checkHarnessName(b.harness);
    this.o.deployments.require(harness);
    // `at` goes to the runtime as it is: the due instant is exactly `at`. Both are whole ms, as
    // the CLI requires; a JSON null counts as absent (`{"delay_ms": null, "at": N}` is `at` alone)
    const at = b.at ?? undefined;
    const delay = b.delay_ms ?? undefined;
    const shown = (v: unknown): string => (typeof v === 'number' ? String(v) : JSON.stringify(v));
    let when: { at: number } | { delayMs: number };
    if (at !== undefined) {
      if (typeof at !== 'number' || !Number.isSafeInteger(at) || at < 0) {
        throw new HttpError(
          400,
          `at must be a whole number of ms since the Unix epoch, >= 0 (got ${shown(at)})`,
        );
      }
      if (delay !== undefined) throw new HttpError(400, 'give either delay_ms or at, not both');
      when = { at };
    } else {
      if (delay === undefined) {
        throw new HttpError(400, 'give delay_ms (ms from now) or at (ms since the Unix epoch)');
      }
      if (typeof delay !== 'number' || !Number.isSafeInteger(delay) || delay < 0) {
        throw new HttpError(400, `delay_ms must be a whole number of ms >= 0 (got ${shown(delay)})`);
      }
      when = { delayMs: delay };
    }
    if (b.payload !== undefined && typeof b.payload !== 'string')
      throw new HttpError(400, 'payload must be a string');
    if (b.id !== undefined && (typeof b.id !== 'string' || b.id === '' || b.id.length > 128)) {
      throw new HttpError(400, 'id must be a non-empty string of at most 128 characters');
    }
    let wake;
    try {
      wake = await this.o.backend.armWake({
        harness,
        ...when,
        payload: (b.payload as string | undefined) ?? '',
        ...(b.id !== undefined ? { id: b.id as string } : {}),
      });
    } catch (e) {
      throw new HttpError(400, `wake refused: ${(e as Error).message}`);
    }
    sendJson(res, 201, wake);
  }
}

function sseEvent(event: string, data: string): string {
  return `event: ${event}\n${data
    .split(/\r\n|\r|\n/)
    .map((l) => `data: ${l}`)
    .join('\n')}\n\n`;
}

/** Default and largest `limit` of GET /wakes (wakes in one reply). */
export const WAKE_LIST_LIMIT = { default: 1000, max: 10_000 } as const;

/**
 * The `limit` query parameter of a list request: a whole number 1..WAKE_LIST_LIMIT.max, default
 * WAKE_LIST_LIMIT.default. A whole due-set in one reply could be gigabytes (millions of wakes of up
 * to 64 KiB of payload), built in memory on the serving thread.
 * @throws HttpError 400 for anything else
 */
function listLimit(url: string): number {
  const q = url.indexOf('?');
  const raw = q === -1 ? null : new URLSearchParams(url.slice(q + 1)).get('limit');
  if (raw === null) return WAKE_LIST_LIMIT.default;
  const n = Number(raw);
  if (!/^[0-9]+$/.test(raw) || n < 1 || n > WAKE_LIST_LIMIT.max)
    throw new HttpError(
      400,
      `limit must be a whole number from 1 to ${WAKE_LIST_LIMIT.max} (got ${JSON.stringify(raw.slice(0, 40))})`,
    );
  return n;
}

function notAllowed(method: string, allowed: string): HttpError {
  return new HttpError(405, `method ${method} not allowed here (allowed: ${allowed})`);
}

function segment(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw new HttpError(400, `bad percent-encoding in ${JSON.stringify(s)}`);
  }
}

function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (e) {
    throw new HttpError(400, `the body is not valid JSON: ${(e as Error).message}`);
  }
}

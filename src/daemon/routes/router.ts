/**
 * bermd's route table: each resource (health, metrics, MCP, harnesses, wakes, ...) is a module
 * exporting {@link Route}s; the {@link Router} matches a request's path against them and runs the
 * hooks around the handler in a fixed order:
 *
 *   1. the metrics hook learns the route's label (`berm_http_requests_total{route}`) when the reply
 *      finishes; a path no route claims is labelled `unknown`;
 *   2. authentication (the auth hook) for every route not marked `open`, and for unmatched paths;
 *      the hook may answer the request itself (the workbench page and its sessions);
 *   3. while the daemon restores its deployments, every route not marked `duringRestore` (and every
 *      unmatched path) is answered 503 with `Retry-After: 1`, labelled `restoring`;
 *   4. the resource's `guard` checks the path's segments (e.g. a harness name), then the route's
 *      label is set and its handler for the request's method runs; no handler: 405 naming `allow`.
 *
 * Of several routes whose patterns match a path, the first with a handler for the method serves
 * it; when none has one, the last of them answers 405.
 *
 * Paths are split on '/' as sent (no URL normalisation, which would resolve '..' and hide a bad
 * name); segments are percent-decoded only where a handler asks ({@link segment}).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpError } from '../http.js';

/** One request as a handler sees it. */
export interface RouteRequest {
  req: IncomingMessage;
  res: ServerResponse;
  /** HTTP method ('GET' when Node reports none) */
  method: string;
  /** the path without its query string, as sent */
  pathname: string;
  /** the path's segments after the leading '/', not decoded */
  parts: string[];
}

/**
 * A handler of one method of one route. Throw {@link HttpError} to refuse. It may return the
 * label its request is counted under, when the handler itself tells sub-routes apart.
 */
export type Handler = (r: RouteRequest) => Promise<string | void> | string | void;

/** One entry of the route table. */
export interface Route {
  /**
   * The path pattern, e.g. `/harnesses/{name}/tools/{tool}`: literal segments match exactly, a
   * `{...}` segment matches any one segment (empty included), a last segment `**` matches the rest
   * of the path (none included). It is also the metrics label unless `label` says otherwise.
   */
  path: string;
  /** the metrics label (default: `path`) */
  label?: string;
  /** handlers by method; `*` takes any method the others do not */
  methods: Partial<Record<string, Handler>>;
  /** the pattern also matches the path with a trailing '/' (one more, empty segment) */
  trailingSlash?: boolean;
  /** the allowed methods a 405 names (default: the keys of `methods`, comma-separated) */
  allow?: string;
  /** served without authentication (`/health`) */
  open?: boolean;
  /** served while the daemon restores its deployments (`/health`, `/metrics`) */
  duringRestore?: boolean;
  /**
   * false for a request that is not work in progress (an MCP notification stream) and must not
   * hold the drain at shutdown (default: every request counts)
   */
  counts?: (method: string) => boolean;
}

/** A resource: its routes, and a check of its path segments run before any of them. */
export interface Resource {
  routes: Route[];
  /**
   * Runs for every path whose first segment is this resource's (the first segment of its routes'
   * paths), before a route is chosen: e.g. the harness name of `/harnesses/{name}/...`.
   * @throws HttpError to refuse (the request is labelled `unknown`)
   */
  guard?: (parts: string[], method: string) => void;
}

/** The hooks the router runs around every request. */
export interface RouterHooks {
  /**
   * Authenticate a request to a route not marked `open` (or to no route).
   * @returns null to go on, or the label of a request the hook answered itself
   * @throws HttpError (401, 403) to refuse
   */
  authenticate(req: IncomingMessage, res: ServerResponse, pathname: string): Promise<string | null>;
  /** A reply finished: its route label and status (the request counter). */
  finished(route: string, status: number): void;
  /**
   * While the daemon restores its deployments: what it is doing ("restoring 3 of 12
   * deployments"); null once it serves.
   */
  restoring(): string | null;
}

interface Entry {
  route: Route;
  resource: Resource;
  segments: (string | null)[];
  /** the pattern ends in `**` (the rest of the path) */
  rest: boolean;
}

/** A matched request: the route (null: none) and its resource (null: no resource claims the path). */
export interface Match {
  route: Route | null;
  resource: Resource | null;
}

/** Matches paths against a table of resources and runs the hooks around the chosen handler. */
export class Router {
  private readonly entries: Entry[] = [];
  private readonly byPrefix = new Map<string, Resource>();

  /**
   * @param resources the table, in order; the first route whose pattern matches wins
   * @param hooks authentication, metrics and the restoring gate
   * @throws Error when two resources claim one first segment
   */
  constructor(
    resources: Resource[],
    private readonly hooks: RouterHooks,
  ) {
    for (const resource of resources) {
      for (const route of resource.routes) {
        const segments = route.path
          .split('/')
          .slice(1)
          .map((s) => (s.startsWith('{') ? null : s));
        const rest = segments[segments.length - 1] === '**';
        if (rest) segments.pop();
        const prefix = segments[0]!;
        const owner = this.byPrefix.get(prefix);
        if (owner !== undefined && owner !== resource)
          throw new Error(`two resources claim /${prefix} (route ${route.path})`);
        this.byPrefix.set(prefix, resource);
        this.entries.push({ route, resource, segments, rest });
      }
    }
  }

  /** The route and resource a request belongs to (no side effects, never throws). */
  match(parts: string[], method: string): Match {
    let last: Entry | null = null;
    for (const e of this.entries) {
      let n = parts.length;
      if (e.route.trailingSlash === true && n === e.segments.length + 1 && parts[n - 1] === '') n--;
      if (e.rest ? n < e.segments.length : e.segments.length !== n) continue;
      if (!e.segments.every((s, i) => s === null || s === parts[i])) continue;
      if (e.route.methods[method] !== undefined || e.route.methods['*'] !== undefined)
        return { route: e.route, resource: e.resource };
      last = e;
    }
    if (last !== null) return { route: last.route, resource: last.resource };
    return { route: null, resource: this.byPrefix.get(parts[0]!) ?? null };
  }

  /**
   * Serve one request through the table: hooks, guard, handler.
   * @throws HttpError (or any error) from a hook or handler; the caller sends it as the reply.
   *   The metrics hook hears of the reply however it ends.
   */
  async dispatch(r: RouteRequest, m: Match = this.match(r.parts, r.method)): Promise<void> {
    let label = 'unknown';
    r.res.on('finish', () => this.hooks.finished(label, r.res.statusCode));
    const { route, resource } = m;
    if (route?.open === true) label = route.label ?? route.path;
    else {
      const answered = await this.hooks.authenticate(r.req, r.res, r.pathname);
      if (answered !== null) {
        label = answered;
        return;
      }
    }
    if (route?.duringRestore !== true) {
      const restoring = this.hooks.restoring();
      if (restoring !== null) {
        label = 'restoring';
        r.res.setHeader('retry-after', '1');
        throw new HttpError(503, `bermd is restoring its deployments (${restoring}); retry shortly`);
      }
    }
    resource?.guard?.(r.parts, r.method);
    if (route === null) throw new HttpError(404, `no route ${r.method} ${r.pathname}`);
    label = route.label ?? route.path;
    const handler = route.methods[r.method] ?? route.methods['*'];
    if (handler === undefined)
      throw notAllowed(r.method, route.allow ?? Object.keys(route.methods).join(', '));
    const own = await handler(r);
    if (typeof own === 'string') label = own;
  }
}

/** A 405 naming the allowed methods. */
export function notAllowed(method: string, allowed: string): HttpError {
  return new HttpError(405, `method ${method} not allowed here (allowed: ${allowed})`);
}

/**
 * A path segment, percent-decoded.
 * @throws HttpError 400 on bad percent-encoding
 */
export function segment(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw new HttpError(400, `bad percent-encoding in ${JSON.stringify(s)}`);
  }
}

/**
 * A request body parsed as JSON.
 * @throws HttpError 400 when it is not valid JSON
 */
export function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (e) {
    throw new HttpError(400, `the body is not valid JSON: ${(e as Error).message}`);
  }
}

/**
 * The workbench's side of the daemon: the page's static files at `/` (built by scripts/build.mjs
 * from src/workbench into dist/workbench), the strict response headers, browser sessions
 * (`/session`), and the authorisation of every API request by either the bearer token (API
 * clients) or a session cookie plus CSRF proof (the page).
 *
 *   GET    /                      the page (index.html)
 *   GET    /assets/{file}         its script, style sheet and icon
 *   GET    /session               {"auth": "token"|"open", "session": bool, "csrf"?}
 *   POST   /session               body {"token"} (or {} without a token): 200 {"csrf"} and the
 *                                 HttpOnly SameSite=Strict session cookie; 401 on a wrong token
 *   DELETE /session               ends the session server side (needs the CSRF proof): 204
 *
 * The token travels only in the body of `POST /session`: never in a URL, a reply or a log line.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BearerAuth, RequestSource } from './auth.js';
import { HttpError, readBody, sendJson, type BodyLimits } from './http.js';
import { Sessions } from './sessions.js';

/** The page's Content-Security-Policy: its own script and styles only, no inline script, no frames. */
export const PAGE_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
/** The policy of every other reply (JSON, SSE, metrics): nothing may load from it, nor frame it. */
export const API_CSP = "default-src 'none'; frame-ancestors 'none'";

/** Headers every reply carries; the CSP is set per kind of reply. */
export function setStrictHeaders(res: ServerResponse): void {
  res.setHeader('x-content-type-options', 'nosniff');
  res.setHeader('referrer-policy', 'no-referrer');
  res.setHeader('x-frame-options', 'DENY');
  res.setHeader('content-security-policy', API_CSP);
}

interface Asset {
  type: string;
  body: Buffer;
  etag: string;
}

const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  svg: 'image/svg+xml',
  map: 'application/json; charset=utf-8',
};

/**
 * The folder of the built page: dist/workbench beside the compiled daemon (dist/daemon), or, when
 * the daemon runs from src/, the repository's dist/workbench. Null when the page was not built.
 */
export function findAssets(): string | null {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const dir of [join(here, '..', 'workbench'), join(here, '..', '..', 'dist', 'workbench')]) {
    // (src/workbench holds an index.html too, but no app.js: the sources, not the bundle)
    if (existsSync(join(dir, 'app.js')) && existsSync(join(dir, 'index.html'))) return dir;
  }
  return null;
}

function loadAssets(dir: string | null): Map<string, Asset> {
  const out = new Map<string, Asset>();
  if (dir === null) return out;
  for (const name of ['index.html', 'app.js', 'app.css', 'icon.svg']) {
    const file = join(dir, name);
    if (!existsSync(file)) continue;
    const body = readFileSync(file);
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
    out.set(name, { type: TYPES[name.split('.').pop()!]!, body, etag });
  }
  return out;
}

const MUTATING = new Set(['POST', 'PUT', 'DELETE', 'PATCH']);

/** Routes and checks of the workbench (see the module comment). */
export class Workbench {
  readonly sessions: Sessions;
  private readonly assets: Map<string, Asset>;

  /**
   * @param auth the daemon's bearer check (its token is what a login must present)
   * @param assetsDir the built page's folder (default {@link findAssets}); null serves none
   */
  constructor(
    private readonly auth: BearerAuth,
    assetsDir: string | null = findAssets(),
    sessions = new Sessions(),
  ) {
    this.sessions = sessions;
    this.assets = loadAssets(assetsDir);
  }

  /**
   * Serve the page, its assets and `/session` when `pathname` is one of them.
   * @returns the route name for metrics, or null when the request is not the workbench's
   * @throws HttpError (405, 400, 401, 403, 404) as the reply
   */
  async handle(
    req: IncomingMessage,
    res: ServerResponse,
    pathname: string,
    limits: BodyLimits,
  ): Promise<string | null> {
    const method = req.method ?? 'GET';
    if (pathname === '/' || pathname === '/index.html' || pathname.startsWith('/assets/')) {
      if (method !== 'GET' && method !== 'HEAD')
        throw new HttpError(405, `method ${method} not allowed here (allowed: GET)`);
      const name = pathname.startsWith('/assets/') ? pathname.slice('/assets/'.length) : 'index.html';
      this.sendAsset(req, res, name);
      return pathname.startsWith('/assets/') ? '/assets/{file}' : '/';
    }
    if (pathname !== '/session') return null;
    if (method === 'GET') {
      const s = this.sessions.get(req);
      sendJson(res, 200, {
        auth: this.auth.enabled ? 'token' : 'open',
        session: s !== null,
        ...(s !== null ? { csrf: s.csrf } : {}),
      });
    } else if (method === 'POST') {
      const body = await readBody(req, limits);
      let token: unknown;
      try {
        token =
          body.length === 0 ? undefined : (JSON.parse(body.toString('utf8')) as { token?: unknown }).token;
      } catch {
        throw new HttpError(400, 'the body must be JSON: {"token": "..."}');
      }
      if (this.auth.enabled) {
        if (typeof token !== 'string' || token === '')
          throw new HttpError(400, 'give the daemon\'s token: {"token": "..."}');
        if (!this.auth.matches(token)) throw new HttpError(401, 'wrong token');
      }
      const { id, csrf } = this.sessions.create();
      res.setHeader('set-cookie', Sessions.cookie(id));
      sendJson(res, 200, { csrf });
    } else if (method === 'DELETE') {
      const s = this.sessions.get(req);
      if (s === null) throw new HttpError(401, 'no session to end');
      if (!Sessions.csrfMatches(s, req)) throw new HttpError(403, 'missing or wrong X-Berm-CSRF header');
      this.sessions.end(req);
      res.setHeader('set-cookie', Sessions.clearCookie());
      res.writeHead(204).end();
    } else throw new HttpError(405, `method ${method} not allowed here (allowed: GET, POST, DELETE)`);
    return '/session';
  }

  /**
   * Authorise an API request: an API client by the bearer token (when one is set); the page by
   * its session cookie (when a token is set) and, on every mutating request, its CSRF proof
   * (always: without a token the page still opens a session to get one). A page request that
   * carries the bearer token itself is checked as an API client's.
   * @throws HttpError 401 without a valid token or session, 403 without the CSRF proof
   */
  authorize(req: IncomingMessage, source: RequestSource): void {
    if (source === 'api' || req.headers.authorization !== undefined) {
      this.auth.check(req);
      return;
    }
    const session = this.sessions.get(req);
    if (session === null && this.auth.enabled)
      throw new HttpError(401, "not logged in: log in to the workbench with the daemon's token");
    if (MUTATING.has(req.method ?? 'GET')) {
      if (session === null) throw new HttpError(403, 'no session: open one with POST /session first');
      if (!Sessions.csrfMatches(session, req))
        throw new HttpError(403, 'missing or wrong X-Berm-CSRF header');
    }
  }

  private sendAsset(req: IncomingMessage, res: ServerResponse, name: string): void {
    const a = this.assets.get(name);
    if (a === undefined) {
      throw new HttpError(
        404,
        name === 'index.html'
          ? 'the workbench is not built: run `npm run build` (it bundles src/workbench into dist/workbench)'
          : `no asset ${name}`,
      );
    }
    if (name === 'index.html') res.setHeader('content-security-policy', PAGE_CSP);
    res.setHeader('etag', a.etag);
    res.setHeader('cache-control', 'no-cache');
    if (req.headers['if-none-match'] === a.etag) {
      res.writeHead(304).end();
      return;
    }
    res.writeHead(200, { 'content-type': a.type, 'content-length': a.body.length });
    res.end(req.method === 'HEAD' ? undefined : a.body);
  }
}

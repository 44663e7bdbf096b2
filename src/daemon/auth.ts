/**
 * Bearer-token authentication of the control API and MCP. The token comes from the environment
 * (`BERMD_TOKEN`, the variable the CLI's client verbs send from too) or a file (`--token-file`, first line, surrounding whitespace removed); the
 * daemon refuses to listen on a non-loopback address without one. Comparison is constant-time
 * over SHA-256 digests of both sides, so neither the token's bytes nor its length leak through
 * timing.
 *
 * Other web pages are kept out ({@link refuseBrowsers}): bermd serves API clients and its own
 * workbench page only, yet a page the operator visits could otherwise POST a tool call to a loopback
 * daemon without a token (a form or `fetch(..., {mode: 'no-cors'})` is a CORS "simple request":
 * sent without preflight), or reach it through a name it rebinds to 127.0.0.1.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import * as fs from 'node:fs';
import { isIP } from 'node:net';
import type { IncomingMessage } from 'node:http';
import { HttpError } from './http.js';

/** A token source: where it came from, for the boot log (never the token itself). */
export interface TokenSetting {
  token: string | null;
  source: string;
  /** a variable set but not read (BERM_TOKEN: the index's token), for a warning */
  ignored?: string;
}

/**
 * Resolve the token: `--token-file`, else `BERMD_TOKEN`. `BERM_TOKEN` is never read: it is the
 * index's credential (`berm publish`), as in the reference implementation; when it is set and no
 * token is, `ignored` says so, for the boot log.
 * @throws Error when the file cannot be read or holds an empty token (the message names the file),
 *   or when the token holds whitespace or a character outside printable ASCII (it could never match)
 */
export function loadToken(tokenFile: string | undefined, env: NodeJS.ProcessEnv): TokenSetting {
  const t = readToken(tokenFile, env);
  // a Bearer credential is one run of visible characters (RFC 6750's b64token is narrower still):
  // a token with a space, a tab or a control character inside could never be sent and matched
  if (t.token !== null && /[^\x21-\x7e]/.test(t.token))
    throw new Error(
      `the token from ${t.source} contains whitespace or a non-printable character: no client can ` +
        'send it in an Authorization header; use printable ASCII without spaces (e.g. openssl rand -hex 32)',
    );
  return t;
}

function readToken(tokenFile: string | undefined, env: NodeJS.ProcessEnv): TokenSetting {
  if (tokenFile !== undefined) {
    let text: string;
    try {
      text = fs.readFileSync(tokenFile, 'utf8');
    } catch (e) {
      throw new Error(`cannot read the token file ${tokenFile} (${(e as NodeJS.ErrnoException).code ?? e})`);
    }
    const token = (text.split('\n')[0] ?? '').trim();
    if (token === '')
      throw new Error(`the token file ${tokenFile} is empty; write the token on its first line`);
    return { token, source: `file ${tokenFile}` };
  }
  const t = env.BERMD_TOKEN?.trim();
  if (t) return { token: t, source: 'env BERMD_TOKEN' };
  if (env.BERM_TOKEN?.trim()) return { token: null, source: 'none', ignored: 'BERM_TOKEN' };
  return { token: null, source: 'none' };
}

/** True for 127.0.0.0/8, ::1 and `localhost`. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '');
  if (h === 'localhost') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) === 6) return h === '::1' || h === '0:0:0:0:0:0:0:1';
  return false;
}

/** The hostname of a Host header value (`name:port`, `[v6]:port`, or either without a port). */
function hostName(host: string): string {
  const v6 = /^\[([^\]]*)\]/.exec(host);
  if (v6) return v6[1]!;
  const colon = host.lastIndexOf(':');
  return colon === -1 ? host : host.slice(0, colon);
}

/** Who sent a request that {@link refuseBrowsers} let through. */
export type RequestSource =
  /** an API client: no Origin, no Sec-Fetch-Site (curl, Node's fetch, the MCP SDK, the berm CLI) */
  | 'api'
  /** the workbench page bermd serves itself: a browser request from bermd's own origin */
  | 'page';

/**
 * Refuse a request a web browser sends on another page's behalf, and tell the workbench's own
 * requests from API clients'. Rules (after the MCP streamable HTTP transport's "servers MUST
 * validate the Origin header", and the Fetch standard's headers):
 * - an `Origin` header (browsers send it on every cross-origin request and on every POST) that is
 *   not bermd's own origin (`http://` + the Host header), or a `Sec-Fetch-Site` of
 *   `cross-site`/`same-site`: 403, whatever the token. Another port on the same loopback address
 *   is another origin, and `same-site` to a browser, so it is refused too;
 * - without a token (loopback only), a `Host` whose name is not loopback (127.0.0.0/8, ::1,
 *   `localhost`): 403, so a DNS name rebound to 127.0.0.1 reaches nothing. A request without Host
 *   (HTTP/1.0) passes: a browser always sends one.
 * A request with bermd's own Origin or a `Sec-Fetch-Site` of `same-origin` or `none` (the user
 * typed the address) is the workbench page's: it authenticates with a session and proves it is
 * not forged with a CSRF header (src/daemon/sessions.ts), not with the bearer token.
 * @param req the incoming request (only its headers are read)
 * @param tokenRequired whether the daemon checks a bearer token
 * @returns 'page' for a same-origin browser request, 'api' for everything else let through
 * @throws HttpError 403 naming the header and the rule
 */
export function refuseBrowsers(req: IncomingMessage, tokenRequired: boolean): RequestSource {
  const origin = req.headers.origin;
  const host = req.headers.host;
  const site = req.headers['sec-fetch-site'];
  if (
    origin !== undefined &&
    (host === undefined || origin.toLowerCase() !== `http://${host.toLowerCase()}`)
  ) {
    throw new HttpError(
      403,
      `requests from web pages are refused (Origin: ${origin.slice(0, 200)}): bermd serves API clients and its own workbench, not other pages`,
    );
  }
  if (site === 'cross-site' || site === 'same-site') {
    throw new HttpError(403, `requests from web pages are refused (Sec-Fetch-Site: ${site})`);
  }
  if (!tokenRequired && host !== undefined && !isLoopback(hostName(host))) {
    throw new HttpError(
      403,
      `Host ${host.slice(0, 200)} is not a loopback name: without a token bermd answers only requests ` +
        'addressed to 127.0.0.1, ::1 or localhost; set BERMD_TOKEN to serve other names',
    );
  }
  return origin !== undefined || site === 'same-origin' || site === 'none' ? 'page' : 'api';
}

const digest = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();

/** Checks `Authorization: Bearer <token>` in constant time. */
export class BearerAuth {
  private readonly expected: Buffer | null;

  /** @param token the expected token; null disables the check (loopback only) */
  constructor(token: string | null) {
    this.expected = token === null ? null : digest(token);
  }

  /** Whether a token is required. */
  get enabled(): boolean {
    return this.expected !== null;
  }

  /** Whether `token` is the expected one (constant time); true for any token when none is required. */
  matches(token: string): boolean {
    if (this.expected === null) return true;
    return timingSafeEqual(digest(token), this.expected);
  }

  /** @throws HttpError 401 (with a WWW-Authenticate hint in the message) when the token is missing or wrong. */
  check(req: IncomingMessage): void {
    if (this.expected === null) return;
    const h = req.headers.authorization;
    const m = h === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(h);
    if (!m) throw new HttpError(401, 'missing bearer token: send Authorization: Bearer <token>');
    if (!timingSafeEqual(digest(m[1]!), this.expected)) throw new HttpError(401, 'wrong bearer token');
  }
}

/**
 * Browser sessions of the workbench. A browser cannot keep a bearer token safely (a URL, a log or
 * local storage would leak it), so the page exchanges the token once (`POST /session`) for a
 * random session id held in an HttpOnly, SameSite=Strict cookie, which script cannot read and a
 * cross-site page cannot send. Each session also carries a CSRF proof: a second random value the
 * page reads from the login reply and sends as the `X-Berm-CSRF` header on every mutating request
 * (a synchronizer token; a form or `fetch` from another origin can neither read it nor set the
 * header without a CORS preflight bermd never grants). Logout deletes the session here, so a copy
 * of the cookie is worthless afterwards.
 *
 * Sessions live in memory: a restart of bermd logs every browser out. Ids are stored by their
 * SHA-256 digest and compared in constant time; an idle session expires after
 * {@link SESSION_IDLE_MS}, and at most {@link MAX_SESSIONS} are kept (the oldest is dropped).
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/** Name of the session cookie. */
export const SESSION_COOKIE = 'berm_session';
/** Request header carrying the CSRF proof (lowercase, as node:http presents it). */
export const CSRF_HEADER = 'x-berm-csrf';
/** An unused session ends after this long, ms (12 hours). */
export const SESSION_IDLE_MS = 12 * 3600_000;
/** Most sessions kept at once; creating one more drops the least recently used. */
export const MAX_SESSIONS = 1024;

/** One browser session. */
export interface Session {
  /** the CSRF proof the page sends back in {@link CSRF_HEADER} */
  readonly csrf: string;
  /** ms since the Unix epoch of the last request that used it */
  lastSeen: number;
}

const digest = (s: string): string => createHash('sha256').update(s, 'utf8').digest('hex');

/** The value of cookie `name` in a Cookie header, or undefined. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq === -1) continue;
    if (part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** The in-memory session table. */
export class Sessions {
  /** by SHA-256 of the id; a Map keeps insertion order, refreshed on use (least recent first) */
  private readonly byDigest = new Map<string, Session>();

  /**
   * @param now clock, ms since the epoch (tests pass their own)
   * @param idleMs idle lifetime of a session, ms
   * @param max most sessions kept
   */
  constructor(
    private readonly now: () => number = Date.now,
    private readonly idleMs = SESSION_IDLE_MS,
    private readonly max = MAX_SESSIONS,
  ) {}

  /** Open a session. @returns its id (for the cookie only) and its CSRF proof */
  create(): { id: string; csrf: string } {
    const id = randomBytes(32).toString('base64url');
    const csrf = randomBytes(32).toString('base64url');
    while (this.byDigest.size >= this.max) {
      const oldest = this.byDigest.keys().next().value as string;
      this.byDigest.delete(oldest);
    }
    this.byDigest.set(digest(id), { csrf, lastSeen: this.now() });
    return { id, csrf };
  }

  /** The live session a request's cookie names (refreshing its idle clock), or null. */
  get(req: IncomingMessage): Session | null {
    const id = cookieValue(req.headers.cookie, SESSION_COOKIE);
    if (id === undefined || id === '' || id.length > 128) return null;
    const key = digest(id);
    const s = this.byDigest.get(key);
    if (s === undefined) return null;
    const now = this.now();
    if (now - s.lastSeen > this.idleMs) {
      this.byDigest.delete(key);
      return null;
    }
    s.lastSeen = now;
    this.byDigest.delete(key);
    this.byDigest.set(key, s);
    return s;
  }

  /** End the session a request's cookie names. @returns whether there was one */
  end(req: IncomingMessage): boolean {
    const id = cookieValue(req.headers.cookie, SESSION_COOKIE);
    return id !== undefined && this.byDigest.delete(digest(id));
  }

  /** Number of sessions held (expired ones included until next seen). */
  get size(): number {
    return this.byDigest.size;
  }

  /** Whether the request's {@link CSRF_HEADER} equals the session's proof (constant time). */
  static csrfMatches(session: Session, req: IncomingMessage): boolean {
    const h = req.headers[CSRF_HEADER];
    const given = Array.isArray(h) ? h[0] : h;
    if (given === undefined) return false;
    const a = createHash('sha256').update(given).digest();
    const b = createHash('sha256').update(session.csrf).digest();
    return timingSafeEqual(a, b);
  }

  /** The Set-Cookie value that stores session `id`. */
  static cookie(id: string): string {
    return `${SESSION_COOKIE}=${id}; HttpOnly; SameSite=Strict; Path=/`;
  }

  /** The Set-Cookie value that removes the cookie. */
  static clearCookie(): string {
    return `${SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0`;
  }
}

/**
 * Registry authentication: parsing `WWW-Authenticate` challenges (RFC 7235 section 4.1, auth-param
 * syntax of RFC 9110 section 11.2), credentials from the environment, and the bearer token flow of
 * the distribution token spec (https://distribution.github.io/distribution/spec/auth/token/):
 * GET `realm?service=..&scope=..`, with Basic credentials when we have them, answered by JSON
 * `{"token": ..}` or `{"access_token": ..}`.
 *
 * Credentials come from the environment only (`~/.docker/config.json` is not read):
 * `BERM_REGISTRY_USER` and `BERM_REGISTRY_PASSWORD`, else `GITHUB_TOKEN` as the password of user
 * `berm` (GHCR reads the token as the password and ignores the user, as upstream berm relies on).
 * `GITHUB_TOKEN` is set in every GitHub Actions job whether or not the job means it for a
 * registry, so it goes to GHCR only ({@link GITHUB_TOKEN_HOSTS}: the registry and the token realm
 * both on ghcr.io); any other registry, and any realm a registry names elsewhere, never sees it.
 */
import type { Dispatcher } from 'undici';
import { OciError } from './errors.js';
import { httpExchange } from './http.js';
import { isLoopbackHost } from './reference.js';

/** One challenge: the scheme in lowercase and its parameters (names lowercase). */
export interface Challenge {
  scheme: string;
  params: Record<string, string>;
  /** a token68 value (`Basic abc==` style) when the challenge carried one instead of params */
  token68?: string;
}

const TOKEN_CHARS = /[!#$%&'*+.^_`|~0-9A-Za-z-]/;

/**
 * Parse a `WWW-Authenticate` header value into its challenges. Several challenges may share one
 * header, separated by commas (`Bearer realm="a",service="b", Basic realm="c"`); quoted strings
 * may contain commas and backslash escapes.
 * @returns the challenges in order; an empty list for an empty or unparsable header
 */
export function parseChallenges(text: string): Challenge[] {
  const out: Challenge[] = [];
  let i = 0;
  const n = text.length;
  const skipWs = (): void => {
    while (i < n && (text[i] === ' ' || text[i] === '\t')) i++;
  };
  const readToken = (): string => {
    const start = i;
    while (i < n && TOKEN_CHARS.test(text[i])) i++;
    return text.slice(start, i);
  };
  const readBare = (): string => {
    const start = i;
    while (i < n && text[i] !== ',' && text[i] !== ' ' && text[i] !== '\t') i++;
    return text.slice(start, i);
  };
  const readQuoted = (): string => {
    // text[i] === '"'
    i++;
    let s = '';
    while (i < n && text[i] !== '"') {
      if (text[i] === '\\' && i + 1 < n) i++;
      s += text[i++];
    }
    i++; // closing quote (or end)
    return s;
  };
  // true when what follows (after commas and spaces) is `name=` (another parameter) rather than a
  // new challenge's scheme
  const paramFollows = (): boolean => {
    const m = /^[\s,]*([!#$%&'*+.^_`|~0-9A-Za-z-]+)\s*=/.exec(text.slice(i));
    if (!m) return false;
    // `Basic abc==` would look like a parameter; a parameter's '=' is not followed by another '='
    const after = text.slice(i + m[0].length);
    return !after.startsWith('=');
  };
  while (i < n) {
    while (i < n && (text[i] === ',' || text[i] === ' ' || text[i] === '\t')) i++;
    if (i >= n) break;
    const scheme = readToken();
    if (scheme.length === 0) break; // garbage: stop with what we have
    const ch: Challenge = { scheme: scheme.toLowerCase(), params: {} };
    out.push(ch);
    skipWs();
    // token68 (`Basic YWxhZGRpbg==`)
    const t68 = /^[A-Za-z0-9\-._~+/]+=*/.exec(text.slice(i));
    if (t68 && !paramFollows()) {
      const end = i + t68[0].length;
      const rest = text.slice(end).trimStart();
      if (rest === '' || rest.startsWith(',')) {
        ch.token68 = t68[0];
        i = end;
        continue;
      }
    }
    while (i < n && paramFollows()) {
      while (i < n && (text[i] === ',' || text[i] === ' ' || text[i] === '\t')) i++;
      const name = readToken().toLowerCase();
      skipWs();
      i++; // '='
      skipWs();
      // an unquoted value should be a token, but registries send bare URLs too: take it up to
      // the next comma or white space
      const value = text[i] === '"' ? readQuoted() : readBare();
      ch.params[name] = value;
      skipWs();
    }
  }
  return out;
}

/** Credentials for Basic authentication. */
export interface Credentials {
  username: string;
  password: string;
  /** where they came from, for messages (never the secret itself) */
  source: string;
}

/** The hosts `GITHUB_TOKEN` is sent to: GitHub's container registry, which serves its own tokens. */
export const GITHUB_TOKEN_HOSTS: readonly string[] = ['ghcr.io'];

/** True when credentials may be sent to `hostname` (GITHUB_TOKEN only to {@link GITHUB_TOKEN_HOSTS}). */
export function credentialsGoTo(c: Credentials, hostname: string): boolean {
  return c.source !== 'GITHUB_TOKEN' || GITHUB_TOKEN_HOSTS.includes(hostname.toLowerCase());
}

/**
 * Credentials from the environment for the registry on `registryHost`: `BERM_REGISTRY_USER` +
 * `BERM_REGISTRY_PASSWORD`, else `GITHUB_TOKEN` (user `berm`) when the registry is GHCR, else
 * null.
 */
export function credentialsFromEnv(
  env: Record<string, string | undefined>,
  registryHost: string,
): Credentials | null {
  const user = env.BERM_REGISTRY_USER;
  const password = env.BERM_REGISTRY_PASSWORD;
  if (user && password)
    return { username: user, password, source: 'BERM_REGISTRY_USER/BERM_REGISTRY_PASSWORD' };
  const github: Credentials | null = env.GITHUB_TOKEN
    ? { username: 'berm', password: env.GITHUB_TOKEN, source: 'GITHUB_TOKEN' }
    : null;
  return github && credentialsGoTo(github, registryHost) ? github : null;
}

/** `Basic base64(user:password)`. */
export function basicAuthorization(c: Credentials): string {
  return 'Basic ' + Buffer.from(`${c.username}:${c.password}`, 'utf8').toString('base64');
}

/** True when sending a secret to this URL keeps it off the network in clear text. */
export function secureForSecrets(url: URL): boolean {
  return url.protocol === 'https:' || isLoopbackHost(url.hostname);
}

/**
 * Obtain a bearer token for a challenge.
 * @param challenge a `bearer` challenge with a `realm`
 * @param scopes the scopes to ask for (`repository:org/name:pull,push`); the challenge's own
 *   `scope` is added when it names one we did not
 * @returns the token
 * @throws OciError('unauthorized') when the realm is missing or not http(s), when credentials
 *   would cross the network in clear text, or when the endpoint refuses (naming the credential
 *   source and the fix); OciError('registry') when the answer has no token
 */
export async function fetchBearerToken(
  dispatcher: Dispatcher,
  challenge: Challenge,
  scopes: string[],
  credentials: Credentials | null,
): Promise<string> {
  const realm = challenge.params.realm;
  if (!realm)
    throw new OciError('unauthorized', 'the registry asked for a bearer token without naming a realm');
  let url: URL;
  try {
    url = new URL(realm);
  } catch {
    throw new OciError('unauthorized', `the registry's token realm '${realm}' is not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new OciError('unauthorized', `the registry's token realm '${realm}' is not http(s)`);
  }
  if (url.protocol === 'http:' && !isLoopbackHost(url.hostname)) {
    throw new OciError(
      'unauthorized',
      `the registry's token realm '${realm}' is plain http on a non-loopback host (refused: only localhost may be reached without TLS)`,
    );
  }
  if (challenge.params.service) url.searchParams.append('service', challenge.params.service);
  const wanted = [...scopes];
  for (const s of (challenge.params.scope ?? '').split(' ')) if (s && !wanted.includes(s)) wanted.push(s);
  for (const s of wanted) url.searchParams.append('scope', s);
  const headers: Record<string, string> = { accept: 'application/json' };
  const sent = credentials && credentialsGoTo(credentials, url.hostname) ? credentials : null;
  if (sent) headers.authorization = basicAuthorization(sent);
  const res = await httpExchange(dispatcher, url.href, { method: 'GET', headers, maxBytes: 1024 * 1024 });
  if (res.status === 401 || res.status === 403) {
    throw new OciError(
      'unauthorized',
      sent
        ? `the token endpoint ${url.origin}${url.pathname} refused the credentials from ${sent.source} (status ${res.status})`
        : `the token endpoint ${url.origin}${url.pathname} wants credentials (status ${res.status}): set BERM_REGISTRY_USER and BERM_REGISTRY_PASSWORD, or GITHUB_TOKEN for ghcr.io`,
    );
  }
  if (res.status < 200 || res.status >= 300) {
    throw new OciError(
      'registry',
      `the token endpoint ${url.origin}${url.pathname} answered ${res.status}${describeBody(res.body)}`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(res.body).toString('utf8'));
  } catch {
    throw new OciError(
      'registry',
      `the token endpoint ${url.origin}${url.pathname} answered with something that is not JSON`,
    );
  }
  const obj = (json ?? {}) as { token?: unknown; access_token?: unknown };
  const token = typeof obj.token === 'string' && obj.token ? obj.token : obj.access_token;
  if (typeof token !== 'string' || token.length === 0) {
    throw new OciError(
      'registry',
      `the token endpoint ${url.origin}${url.pathname} answered without a token`,
    );
  }
  return token;
}

/** `: <first 200 characters of the body>` when there is one (for error messages). */
export function describeBody(body: Uint8Array): string {
  if (body.length === 0) return '';
  const text = Buffer.from(body.subarray(0, 400)).toString('utf8').replace(/\s+/g, ' ').trim();
  return text ? `: ${text.slice(0, 200)}` : '';
}

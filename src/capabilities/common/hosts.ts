/**
 * Which URLs a capability that dials out may reach (berm.http.fetch: http and https; berm.ws.open:
 * ws and wss): the caller's schemes only; no
 * userinfo; the host must match a declared host exactly (case-insensitive) or a declared
 * `*.domain` (subdomains only, never the bare domain); IP literals only when declared as that
 * exact address. Hosts are compared after WHATWG URL parsing, which canonicalises IDNs to
 * punycode and odd IPv4 spellings (0x7f.1, 2130706433) to dotted quads, so a spelling trick
 * cannot pass a check that the connection would then resolve differently.
 */
import { isIP } from 'node:net';
import type { GrantSpec } from '../types.js';

/** A URL that passed the policy, or why not. */
export type UrlVerdict = { url: URL } | { refused: string };

function canonicalHost(host: string): string | null {
  let h = host.trim().toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (isIP(h) === 6) h = `[${h}]`;
  try {
    const parsed = new URL(`http://${h}/`).hostname;
    return parsed.replace(/\.$/, '');
  } catch {
    return null;
  }
}

/** True when `hostname` (as URL.hostname gives it) is an IPv4 or bracketed IPv6 literal. */
export function isIpLiteral(hostname: string): boolean {
  return isIP(hostname) !== 0 || (hostname.startsWith('[') && hostname.endsWith(']'));
}

/**
 * Does `hostname` (already canonical, from URL.hostname) match one of the declared `patterns`?
 * An entry `*.example.org` matches `a.example.org` and `a.b.example.org`, never `example.org`;
 * wildcards never match IP literals; any other entry matches only itself.
 */
export function hostAllowed(hostname: string, patterns: readonly string[]): boolean {
  const host = hostname.toLowerCase().replace(/\.$/, '');
  const ip = isIpLiteral(host);
  for (const p of patterns) {
    if (p.startsWith('*.')) {
      if (ip) continue;
      const domain = canonicalHost(p.slice(2));
      if (domain && host.length > domain.length + 1 && host.endsWith('.' + domain)) return true;
    } else if (canonicalHost(p) === host) {
      return true;
    }
  }
  return false;
}

/**
 * Check a declared host entry's form: a host name, `*.` + host name, or an IP literal; no
 * scheme, port, path or other wildcard.
 * @returns null when fine, else what is wrong.
 */
export function checkHostPattern(p: string): string | null {
  const body = p.startsWith('*.') ? p.slice(2) : p;
  if (body === '' || /[/:@?#*\s]/.test(body.replace(/^\[.*\]$/, 'ip'))) {
    if (isIP(body) === 6) return null;
    return `${JSON.stringify(p)} is not a host name, *.domain or IP address (no scheme, port, path or inner wildcard)`;
  }
  if (canonicalHost(body) === null) return `${JSON.stringify(p)} is not a valid host name`;
  if (p.startsWith('*.') && isIpLiteral(canonicalHost(body)!))
    return `${JSON.stringify(p)}: a wildcard of an IP address`;
  return null;
}

/**
 * Parse `raw` and apply the policy for a grant of `hosts` (absent or empty: no host at all).
 * @param schemes the schemes the caller speaks, without the colon (default http and https)
 */
export function checkUrl(
  raw: string,
  hosts: readonly string[] | undefined,
  schemes: readonly string[] = ['http', 'https'],
): UrlVerdict {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { refused: `not an absolute URL: ${JSON.stringify(raw.slice(0, 200))}` };
  }
  const scheme = url.protocol.replace(/:$/, '');
  if (!schemes.includes(scheme)) {
    return { refused: `scheme ${scheme} is not allowed; only ${schemes.join(' and ')}` };
  }
  if (url.username !== '' || url.password !== '') {
    return { refused: 'URLs with userinfo (user:password@) are not allowed' };
  }
  if (!hosts || hosts.length === 0) {
    return {
      refused: `no hosts are granted to this harness; declare hosts = ["${url.hostname}"] to allow it`,
    };
  }
  if (!hostAllowed(url.hostname, hosts)) {
    const what = isIpLiteral(url.hostname) ? 'IP literal' : 'host';
    return { refused: `${what} ${url.hostname} is not among the declared hosts` };
  }
  return { url };
}

/**
 * The `hosts` grant shared by the capabilities that dial out (http, ws): a list of host patterns
 * ({@link checkHostPattern}), lowercased, deduplicated and sorted; a bad pattern is a problem naming
 * it. Absent, the grant holds no hosts and reaches nothing.
 * @param example a host name for the fix printed when the key is missing or malformed
 */
export function hostsGrant(example: string): GrantSpec {
  return {
    schema: { type: 'object', properties: { hosts: { type: 'array', items: { type: 'string' } } } },
    fixes: { hosts: `write hosts = ["${example}", "*.example.com"]` },
    prepare: (values) => {
      const hosts = values.hosts as string[] | undefined;
      if (hosts === undefined) return { grant: {}, problems: [] };
      const problems = hosts.flatMap((h) => {
        const bad = checkHostPattern(h);
        return bad
          ? [
              {
                key: 'hosts',
                problem: `host ${bad}`,
                fix: 'write a bare host name, "*.domain" or an IP address',
              },
            ]
          : [];
      });
      return { grant: { hosts: [...new Set(hosts.map((h) => h.toLowerCase()))].sort() }, problems };
    },
  };
}

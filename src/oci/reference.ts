/**
 * Registry references `host[:port]/repo[:tag|@sha256:...]` and the base URL they resolve to.
 *
 * The grammar follows the distribution reference rules
 * (https://github.com/distribution/reference/blob/main/reference.go): path components are lowercase
 * alphanumerics joined by `.`, `_`, `__` or runs of `-`; a tag is `[\w][\w.-]{0,127}`; a digest is
 * `algorithm:hex`. Unlike docker there is no default registry: the host is always written, so a
 * reference never silently means Docker Hub. A reference without tag or digest means `latest`.
 */
import { isDigest } from './digest.js';
import { OciError } from './errors.js';

/** A parsed reference. */
export interface Reference {
  /** `host[:port]` as written (IPv6 literals keep their brackets) */
  registry: string;
  /** the host without port or brackets (`127.0.0.1`, `::1`, `ghcr.io`) */
  host: string;
  /** the repository path (`org/name`) */
  repository: string;
  /** the tag, or null when the reference has only a digest; `latest` when it has neither */
  tag: string | null;
  /** `sha256:<hex>`, or null */
  digest: string | null;
}

const COMPONENT = '[a-z0-9]+(?:(?:\\.|_|__|-+)[a-z0-9]+)*';
const REPOSITORY_RE = new RegExp(`^${COMPONENT}(?:/${COMPONENT})*$`);
const TAG_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;
const HOSTNAME_RE =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*$/;
const SYNTAX = 'host[:port]/repository[:tag|@sha256:<64 hex digits>]';

function bad(text: string, why: string): OciError {
  return new OciError('reference', `invalid reference '${text}': ${why} (expected ${SYNTAX})`);
}

/** Split `host[:port]` and check both parts. */
function parseRegistry(text: string, registry: string): { host: string } {
  let host: string;
  let port: string | undefined;
  if (registry.startsWith('[')) {
    const m = /^\[([0-9A-Fa-f:.]+)\](?::(\d+))?$/.exec(registry);
    if (!m) throw bad(text, `'${registry}' is not a bracketed IPv6 address with an optional port`);
    host = m[1];
    port = m[2];
  } else {
    const i = registry.lastIndexOf(':');
    host = i < 0 ? registry : registry.slice(0, i);
    port = i < 0 ? undefined : registry.slice(i + 1);
    if (!HOSTNAME_RE.test(host)) throw bad(text, `'${host}' is not a host name`);
  }
  if (port !== undefined) {
    const n = Number(port);
    if (!/^\d{1,5}$/.test(port) || n < 1 || n > 65535) throw bad(text, `port '${port}' is not 1-65535`);
  }
  return { host };
}

/**
 * Parse a reference.
 * @throws OciError('reference') naming the part that is wrong: no registry host, an uppercase or
 *   otherwise malformed repository, a bad tag, a digest that is not `sha256:` and 64 lowercase hex
 *   digits.
 */
export function parseReference(text: string): Reference {
  if (text.length === 0) throw bad(text, 'it is empty');
  if (text.length > 4096) throw bad(text.slice(0, 64) + '...', 'it is longer than 4096 characters');
  if (/\s/.test(text)) throw bad(text, 'it contains white space');
  const slash = text.indexOf('/');
  if (slash < 0) throw bad(text, 'it names no registry host (berm has no default registry)');
  const registry = text.slice(0, slash);
  const first = registry;
  // Docker's rule for telling a host from a repository component: a host has a dot or a port, or
  // is localhost. Anything else would be a repository on a default registry, which berm has not.
  if (!(first.includes('.') || first.includes(':') || first.startsWith('[') || first === 'localhost')) {
    throw bad(text, `'${first}' is not a registry host (a host has a dot or a port, or is localhost)`);
  }
  const { host } = parseRegistry(text, registry);
  let rest = text.slice(slash + 1);
  let digest: string | null = null;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!isDigest(digest)) {
      const alg = digest.split(':')[0];
      throw bad(
        text,
        alg !== 'sha256' && digest.includes(':')
          ? `digest algorithm '${alg}' is not supported (only sha256)`
          : `'${digest}' is not sha256: followed by 64 lowercase hex digits`,
      );
    }
  }
  let tag: string | null = null;
  const colon = rest.lastIndexOf(':');
  if (colon >= 0 && !rest.slice(colon).includes('/')) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG_RE.test(tag)) {
      throw bad(
        text,
        `tag '${tag}' must be letters, digits, '_', '.' or '-' (at most 128, not starting with '.' or '-')`,
      );
    }
  }
  if (rest.length === 0) throw bad(text, 'the repository is empty');
  if (rest.length > 255) throw bad(text, 'the repository is longer than 255 characters');
  if (!REPOSITORY_RE.test(rest)) {
    throw bad(
      text,
      `repository '${rest}' must be lowercase letters and digits, separated by '/', '.', '_', '__' or '-'`,
    );
  }
  if (tag === null && digest === null) tag = 'latest';
  return { registry, host, repository: rest, tag, digest };
}

/** The reference as text (`host/repo:tag`, `host/repo@digest` or `host/repo:tag@digest`). */
export function formatReference(ref: Reference): string {
  return `${ref.registry}/${ref.repository}${ref.tag !== null ? ':' + ref.tag : ''}${ref.digest !== null ? '@' + ref.digest : ''}`;
}

/** What the manifest endpoint is addressed by: the digest when given, else the tag. */
export function manifestReference(ref: Reference): string {
  return ref.digest ?? ref.tag ?? 'latest';
}

/**
 * True for the hosts plain http is allowed to: `localhost`, `127.0.0.1` and `::1`. Every other
 * registry is reached over https, so credentials and images never cross a network in clear text.
 */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '127.0.0.1' || h === '::1';
}

/** `http://host:port` for a loopback registry, `https://host[:port]` for every other. */
export function registryBaseUrl(ref: Reference): string {
  return `${isLoopbackHost(ref.host) ? 'http' : 'https'}://${ref.registry}`;
}

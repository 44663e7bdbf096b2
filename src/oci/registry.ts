/**
 * A client of one repository on an OCI registry, over the distribution API v2
 * (https://github.com/opencontainers/distribution-spec/blob/main/spec.md) with undici.
 *
 * Authentication is settled up front, the way upstream berm does it: `GET /v2/` and, on 401, the
 * `WWW-Authenticate` challenge is answered (a bearer token from the realm for
 * `repository:<repo>:pull[,push]`, or Basic credentials from the environment), so a blob upload is
 * never sent twice just to learn what the registry wants. A later 401 that asks for another scope
 * is answered once more. Plain http only to loopback hosts; the Authorization header never leaves
 * the registry's origin (a blob redirected to a CDN is fetched without it).
 */
import type { Dispatcher } from 'undici';
import {
  basicAuthorization,
  credentialsFromEnv,
  describeBody,
  fetchBearerToken,
  parseChallenges,
  secureForSecrets,
  type Challenge,
  type Credentials,
} from './auth.js';
import { sha256Digest, verifyDigest } from './digest.js';
import { OciError } from './errors.js';
import {
  EXCHANGE_BASE_MS,
  exchangeDeadline,
  header,
  headerValues,
  httpExchange,
  newAgent,
  type ExchangeOptions,
  type HttpResponse,
} from './http.js';
import { isLoopbackHost, registryBaseUrl, type Reference } from './reference.js';

/** What a repository is opened for. */
export type Access = 'pull' | 'push';

/** Options of {@link Registry.open}. */
export interface RegistryOptions {
  /** where credentials are read from (default process.env); see auth.ts */
  env?: Record<string, string | undefined>;
  /** an undici dispatcher to use (default: a private Agent closed by {@link Registry.close}) */
  dispatcher?: Dispatcher;
  /** refuse blobs larger than this many bytes (default 512 MiB) */
  maxBlobBytes?: number;
  /**
   * each exchange must end within this many ms plus the time its known bytes (a blob's size, an
   * upload) take at 64 KiB/s (default {@link EXCHANGE_BASE_MS}, 2 minutes; see ./http.ts)
   */
  exchangeBaseMs?: number;
}

/** A manifest as fetched. */
export interface FetchedManifest {
  bytes: Uint8Array;
  /** the Content-Type the registry gave (or the JSON's own mediaType when it gave none) */
  mediaType: string;
  /** sha256 of the bytes */
  digest: string;
}

/** Media types we accept when fetching a manifest: the artifact's own, and the ones we refuse by name. */
export const MANIFEST_ACCEPT = [
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.docker.distribution.manifest.v2+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
].join(', ');

const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
const MAX_REDIRECTS = 5;

/** A registry error body's first message: `{"errors":[{"code":..,"message":..}]}`. */
function registryMessage(res: HttpResponse): string {
  try {
    const json = JSON.parse(Buffer.from(res.body).toString('utf8')) as {
      errors?: { code?: string; message?: string; detail?: unknown }[];
    };
    const e = json.errors?.[0];
    if (e && (e.message || e.code))
      return `: ${e.code ? `${e.code}: ` : ''}${e.message ?? ''}`.replace(/: $/, '');
  } catch {
    // not the registry's JSON error shape
  }
  return describeBody(res.body);
}

/** A client of one repository. Create with {@link Registry.open}; call {@link Registry.close}. */
export class Registry {
  private authorization: string | null = null;
  private readonly scope: string;
  private readonly credentials: Credentials | null;

  private constructor(
    /** `http(s)://host[:port]` */
    readonly base: string,
    readonly repository: string,
    access: Access,
    private readonly dispatcher: Dispatcher,
    private readonly ownsDispatcher: boolean,
    env: Record<string, string | undefined>,
    private readonly maxBlobBytes: number,
    private readonly exchangeBaseMs: number,
  ) {
    this.scope = `repository:${repository}:${access === 'push' ? 'pull,push' : 'pull'}`;
    this.credentials = credentialsFromEnv(env, new URL(base).hostname);
  }

  /**
   * Open a repository: probe `GET /v2/` and answer its challenge if it has one.
   * @throws OciError('unreachable') when the registry does not answer; ('unauthorized') when it
   *   wants credentials we lack or refuses ours; ('registry') when `/v2/` is not a registry API
   */
  static async open(ref: Reference, access: Access, opts: RegistryOptions = {}): Promise<Registry> {
    const dispatcher = opts.dispatcher ?? newAgent();
    const reg = new Registry(
      registryBaseUrl(ref),
      ref.repository,
      access,
      dispatcher,
      opts.dispatcher === undefined,
      opts.env ?? process.env,
      opts.maxBlobBytes ?? 512 * 1024 * 1024,
      opts.exchangeBaseMs ?? EXCHANGE_BASE_MS,
    );
    try {
      const probe = await httpExchange(dispatcher, `${reg.base}/v2/`, {
        method: 'GET',
        deadlineMs: reg.exchangeBaseMs,
      });
      if (probe.status === 401) {
        await reg.answer(parseChallenges(headerValues(probe, 'www-authenticate').join(', ')));
      } else if (probe.status < 200 || probe.status >= 300) {
        throw new OciError(
          'registry',
          `${reg.base}/v2/ answered ${probe.status}${registryMessage(probe)} (is this an OCI registry?)`,
        );
      }
    } catch (e) {
      await reg.close();
      throw e;
    }
    return reg;
  }

  /** Answer challenges: a bearer token when one is offered, else Basic credentials. */
  private async answer(challenges: Challenge[], extraScope?: string): Promise<void> {
    const bearer = challenges.find((c) => c.scheme === 'bearer');
    if (bearer) {
      const scopes = [this.scope];
      if (extraScope && extraScope !== this.scope) scopes.push(extraScope);
      this.authorization =
        'Bearer ' + (await fetchBearerToken(this.dispatcher, bearer, scopes, this.credentials));
      return;
    }
    if (challenges.some((c) => c.scheme === 'basic')) {
      if (!this.credentials) {
        throw new OciError(
          'unauthorized',
          `${this.base} wants a user name and password: set BERM_REGISTRY_USER and BERM_REGISTRY_PASSWORD (GITHUB_TOKEN is sent to ghcr.io only)`,
        );
      }
      this.authorization = basicAuthorization(this.credentials);
      return;
    }
    const names = challenges.map((c) => c.scheme).join(', ');
    throw new OciError(
      'unauthorized',
      `${this.base} answered 401 with ${names ? `an authentication scheme berm does not speak (${names})` : 'no WWW-Authenticate challenge'}`,
    );
  }

  /**
   * Send a request to the registry: the Authorization header on the registry's own origin only,
   * one more try after a 401 that carries a new challenge, redirects followed for GET and HEAD.
   */
  private async send(
    url: string,
    opts: ExchangeOptions & { follow?: boolean; expectBytes?: number },
  ): Promise<HttpResponse> {
    const deadlineMs = exchangeDeadline(
      (opts.expectBytes ?? 0) + (opts.body?.length ?? 0),
      this.exchangeBaseMs,
    );
    let target = new URL(url, this.base);
    let reauthorized = false;
    for (let hop = 0; ;) {
      if (target.protocol !== 'https:' && !isLoopbackHost(target.hostname)) {
        throw new OciError(
          'registry',
          `refusing to follow ${this.base} to plain http on ${target.host} (only loopback hosts may be reached without TLS)`,
        );
      }
      const headers: Record<string, string> = { ...opts.headers };
      const sameOrigin = target.origin === new URL(this.base).origin;
      if (this.authorization && sameOrigin) headers.authorization = this.authorization;
      const res = await httpExchange(this.dispatcher, target.href, { ...opts, headers, deadlineMs });
      if (res.status === 401 && sameOrigin && !reauthorized) {
        const challenges = parseChallenges(headerValues(res, 'www-authenticate').join(', '));
        if (challenges.length > 0) {
          reauthorized = true;
          const bearer = challenges.find((c) => c.scheme === 'bearer');
          await this.answer(challenges, bearer?.params.scope);
          continue;
        }
      }
      if (opts.follow && [301, 302, 303, 307, 308].includes(res.status)) {
        const location = header(res, 'location');
        if (!location)
          throw new OciError('registry', `${target.href} answered ${res.status} without a Location`);
        if (++hop > MAX_REDIRECTS)
          throw new OciError('registry', `${url}: more than ${MAX_REDIRECTS} redirects`);
        const next = new URL(location, target);
        if (!secureForSecrets(next) && target.protocol === 'https:') {
          throw new OciError('registry', `refusing a redirect from https to ${next.origin}`);
        }
        target = next;
        continue;
      }
      return res;
    }
  }

  /** Turn a refusal into an error carrying the registry's own message. */
  private refusal(res: HttpResponse, what: string): OciError {
    const msg = `${what}: the registry answered ${res.status}${registryMessage(res)}`;
    if (res.status === 401 || res.status === 403) {
      const fix = this.credentials
        ? ` (credentials from ${this.credentials.source} were refused or lack access)`
        : ' (set BERM_REGISTRY_USER and BERM_REGISTRY_PASSWORD, or GITHUB_TOKEN for ghcr.io)';
      return new OciError('unauthorized', msg + fix);
    }
    if (res.status === 404) return new OciError('not-found', msg);
    return new OciError('registry', msg);
  }

  private path(kind: 'blobs' | 'manifests', ref: string): string {
    return `${this.base}/v2/${this.repository}/${kind}/${ref}`;
  }

  /** True when the repository holds the blob (`HEAD /v2/<repo>/blobs/<digest>`). */
  async hasBlob(digest: string): Promise<boolean> {
    const res = await this.send(this.path('blobs', digest), { method: 'HEAD', follow: true });
    if (res.status === 200) return true;
    if (res.status === 404) return false;
    throw this.refusal(res, `HEAD blob ${digest}`);
  }

  /**
   * Fetch a blob and verify it against its digest (and size, when known) before returning it.
   * @throws OciError('digest-mismatch') for bytes that do not hash to `digest`; ('not-found');
   *   ('too-large') when longer than `size` or the client's bound
   */
  async getBlob(digest: string, size?: number): Promise<Uint8Array> {
    const maxBytes = size !== undefined ? Math.min(size, this.maxBlobBytes) : this.maxBlobBytes;
    if (size !== undefined && size > this.maxBlobBytes) {
      throw new OciError(
        'too-large',
        `blob ${digest} is ${size} bytes, more than the bound of ${this.maxBlobBytes}`,
      );
    }
    const res = await this.send(this.path('blobs', digest), {
      method: 'GET',
      follow: true,
      maxBytes,
      expectBytes: maxBytes,
    });
    if (res.status !== 200) throw this.refusal(res, `GET blob ${digest}`);
    if (size !== undefined && res.body.length !== size) {
      throw new OciError(
        'digest-mismatch',
        `blob ${digest} is ${res.body.length} bytes where its descriptor says ${size} (refused)`,
      );
    }
    verifyDigest(res.body, digest, `blob ${digest}`);
    return res.body;
  }

  /**
   * Upload a blob unless the repository has it: HEAD, then a monolithic upload (POST to open an
   * upload session, PUT the whole body to its Location with `?digest=`).
   * @returns the digest and whether bytes were sent
   */
  async pushBlob(bytes: Uint8Array): Promise<{ digest: string; uploaded: boolean }> {
    const digest = sha256Digest(bytes);
    if (await this.hasBlob(digest)) return { digest, uploaded: false };
    const opened = await this.send(`${this.base}/v2/${this.repository}/blobs/uploads/`, {
      method: 'POST',
      headers: { 'content-length': '0' },
    });
    if (opened.status !== 202) throw this.refusal(opened, `POST blob upload for ${digest}`);
    const location = header(opened, 'location');
    if (!location)
      throw new OciError('registry', `the registry opened an upload for ${digest} without a Location`);
    const put = new URL(location, this.base);
    const href = put.href + (put.search ? '&' : '?') + 'digest=' + encodeURIComponent(digest);
    const done = await this.send(href, {
      method: 'PUT',
      headers: { 'content-type': 'application/octet-stream', 'content-length': String(bytes.length) },
      body: bytes,
    });
    if (done.status !== 201) throw this.refusal(done, `PUT blob ${digest}`);
    const stored = header(done, 'docker-content-digest');
    if (stored && stored !== digest) {
      throw new OciError('digest-mismatch', `the registry stored blob ${digest} as ${stored}`);
    }
    return { digest, uploaded: true };
  }

  /**
   * Fetch a manifest by tag or digest. When `reference` is a digest the bytes are verified
   * against it.
   */
  async getManifest(reference: string): Promise<FetchedManifest> {
    const res = await this.send(this.path('manifests', reference), {
      method: 'GET',
      follow: true,
      headers: { accept: MANIFEST_ACCEPT },
      maxBytes: MAX_MANIFEST_BYTES,
    });
    if (res.status !== 200) throw this.refusal(res, `GET manifest ${this.repository}:${reference}`);
    const digest = sha256Digest(res.body);
    if (reference.startsWith('sha256:')) verifyDigest(res.body, reference, `manifest ${reference}`);
    let mediaType = (header(res, 'content-type') ?? '').split(';')[0].trim();
    if (!mediaType || mediaType === 'application/json') {
      try {
        const mt = (JSON.parse(Buffer.from(res.body).toString('utf8')) as { mediaType?: unknown }).mediaType;
        if (typeof mt === 'string') mediaType = mt;
      } catch {
        // left to the caller, which refuses what is not JSON
      }
    }
    return { bytes: res.body, mediaType, digest };
  }

  /**
   * Store a manifest under a tag or digest.
   * @returns the manifest's digest
   */
  async putManifest(reference: string, bytes: Uint8Array, mediaType: string): Promise<string> {
    const digest = sha256Digest(bytes);
    const res = await this.send(this.path('manifests', reference), {
      method: 'PUT',
      headers: { 'content-type': mediaType, 'content-length': String(bytes.length) },
      body: bytes,
    });
    if (res.status !== 201 && res.status !== 200) {
      throw this.refusal(res, `PUT manifest ${this.repository}:${reference}`);
    }
    const stored = header(res, 'docker-content-digest');
    if (stored && stored !== digest) {
      throw new OciError('digest-mismatch', `the registry stored manifest ${digest} as ${stored}`);
    }
    return digest;
  }

  /** Release the connection pool (when the client created it). */
  async close(): Promise<void> {
    if (this.ownsDispatcher) await this.dispatcher.close();
  }
}

/**
 * Reaching an index, the way the reference implementation resolves one: the name given
 * (`--index`, else `$BERM_INDEX`, else the public list) is
 * - a directory: read in place;
 * - a URL ending in `.git`: a list to copy, cloned shallow once into
 *   `{cache}/index/{host}/{path}` and read from there (`update` fetches it again);
 * - anything else: the URL of an index service (`berm-indexd`, or the reference's).
 *
 * A service is asked with the newer route spelling (`/harnesses`) first and the older (`/berm`)
 * when that route is missing, so both generations of the reference's service answer.
 */
import { existsSync, statSync } from 'node:fs';
import * as path from 'node:path';
import { ensureDirectory } from '../util/dirs.js';
import { CursorError, type Catalog, type SearchOptions, type SearchPage } from './catalog.js';
import { entryKey, toEntry, type IndexEntry } from './entry.js';
import { loadIndexDirectory } from './files.js';
import { git } from './git.js';

/** The list read when nothing else is named (the reference implementation's default). */
export const DEFAULT_INDEX = 'https://github.com/crabtalk/berm-index.git';

/** An index that cannot be reached or answered with a refusal; the message is the index's own. */
export class IndexError extends Error {
  override name = 'IndexError';
  /** @param status the service's HTTP status, when it answered */
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

/** Where an index is, resolved. */
export type IndexLocation =
  { kind: 'dir'; dir: string } | { kind: 'git'; url: string; dir: string } | { kind: 'service'; url: string };

/**
 * Resolve an index name (see the module comment).
 * @param name `--index`, else `$BERM_INDEX`, else {@link DEFAULT_INDEX}
 * @param cacheDir berm's cache directory (a `.git` URL is cloned under `{cacheDir}/index`)
 */
export function locateIndex(name: string, cacheDir: string): IndexLocation {
  if (existsSync(name) && statSync(name).isDirectory()) return { kind: 'dir', dir: path.resolve(name) };
  if (name.endsWith('.git')) {
    const rest = name.replace(/^[a-z][a-z0-9+.-]*:\/\//i, '').replace(/\.git$/, '');
    const parts = rest.split(/[/:]+/).filter((p) => p !== '' && p !== '.' && p !== '..');
    return { kind: 'git', url: name, dir: path.join(path.resolve(cacheDir), 'index', ...parts) };
  }
  return { kind: 'service', url: name.replace(/\/+$/, '') };
}

/** An index to search, look up and publish to. */
export interface IndexSource {
  readonly location: IndexLocation;
  /** entries matching `term` (see Catalog.search) */
  search(term: string, opts?: SearchOptions): Promise<SearchPage>;
  /** the visible versions of a harness key, [] when none */
  versions(key: string): Promise<IndexEntry[]>;
  /** ask a service to list `reference`; @throws IndexError for a directory or git source */
  publish(reference: string, token: string | undefined): Promise<IndexEntry>;
}

/**
 * The digest the index published last for exactly `reference`, or undefined when it lists none.
 * @throws IndexError when the index cannot be read
 */
export async function publishedDigest(source: IndexSource, reference: string): Promise<string | undefined> {
  const versions = await source.versions(entryKey(reference));
  for (let i = versions.length - 1; i >= 0; i--)
    if (versions[i]!.reference === reference) return versions[i]!.digest;
  return undefined;
}

class LocalSource implements IndexSource {
  private catalog: Catalog | null = null;
  constructor(
    readonly location: IndexLocation & { dir: string },
    private readonly dir: string,
  ) {}

  private load(): Catalog {
    try {
      return (this.catalog ??= loadIndexDirectory(this.dir).catalog);
    } catch (e) {
      throw new IndexError((e as Error).message);
    }
  }

  async search(term: string, opts: SearchOptions = {}): Promise<SearchPage> {
    try {
      return this.load().search(term, opts);
    } catch (e) {
      if (e instanceof IndexError || e instanceof CursorError) throw e;
      throw new IndexError((e as Error).message);
    }
  }

  async versions(key: string): Promise<IndexEntry[]> {
    return this.load().versions(key);
  }

  async publish(): Promise<IndexEntry> {
    throw new IndexError(
      `publishing needs an index service to publish to, not a copy of the list (${this.dir}): give --index URL of a berm-indexd`,
    );
  }
}

const FETCH_TIMEOUT_MS = 60_000;

class ServiceSource implements IndexSource {
  /** the route prefix the service answers: '/harnesses', or '/berm' for the older services */
  private prefix: string | null = null;
  constructor(readonly location: IndexLocation & { url: string }) {}

  private async request(route: string, init: RequestInit = {}): Promise<Response> {
    const url = `${this.location.url}${route}`;
    try {
      return await fetch(url, { ...init, signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
    } catch (e) {
      const cause = (e as { cause?: { code?: string } }).cause?.code ?? (e as Error).message;
      throw new IndexError(`cannot reach the index at ${this.location.url}: ${cause}`);
    }
  }

  /** GET with the route prefix the service answers, learning it on the first request. */
  private async get(rest: string): Promise<Response> {
    if (this.prefix !== null) return this.request(this.prefix + rest);
    const r = await this.request('/harnesses' + rest);
    if (r.status === 404 && !(await refusalNamesNothingPublished(r.clone()))) {
      const old = await this.request('/berm' + rest);
      if (old.status !== 404 || (await refusalNamesNothingPublished(old.clone()))) {
        this.prefix = '/berm';
        return old;
      }
    }
    this.prefix = '/harnesses';
    return r;
  }

  async search(term: string, opts: SearchOptions = {}): Promise<SearchPage> {
    const q = new URLSearchParams({ q: term });
    if (opts.limit !== undefined && opts.limit !== Infinity) q.set('limit', String(opts.limit));
    if (opts.cursor !== undefined) q.set('cursor', opts.cursor);
    const r = await this.get(`?${q}`);
    const body = await answer(r, this.location.url);
    if (!Array.isArray(body))
      throw new IndexError(`${this.location.url} answered something that is not a harness list`);
    const next = r.headers.get('x-next-cursor');
    return { entries: entriesOf(body, this.location.url), ...(next !== null ? { next } : {}) };
  }

  async versions(key: string): Promise<IndexEntry[]> {
    const r = await this.get('/' + key.split('/').map(encodeURIComponent).join('/'));
    if (r.status === 404) return [];
    const body = await answer(r, this.location.url);
    if (!Array.isArray(body))
      throw new IndexError(`${this.location.url} answered something that is not a version list`);
    return entriesOf(body, this.location.url);
  }

  async publish(reference: string, token: string | undefined): Promise<IndexEntry> {
    const init = (prefix: string): Promise<Response> =>
      this.request(prefix, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        body: JSON.stringify({ reference }),
      });
    let r = await init(this.prefix ?? '/harnesses');
    if (this.prefix === null && (r.status === 404 || r.status === 405)) {
      const old = await init('/berm');
      if (old.status !== 404) r = old;
    }
    const body = await answer(r, this.location.url);
    const e = toEntry(body);
    if (e === null)
      throw new IndexError(`${this.location.url} answered something that is not an index entry`);
    return e;
  }
}

/** Whether a 404 is the service's "nothing published under ..." (the route exists). */
async function refusalNamesNothingPublished(r: Response): Promise<boolean> {
  try {
    const b = (await r.json()) as { error?: unknown };
    return typeof b.error === 'string' && b.error.startsWith('nothing published');
  } catch {
    return false;
  }
}

/** The JSON of a 2xx answer; a refusal becomes an IndexError with the service's own message. */
async function answer(r: Response, url: string): Promise<unknown> {
  const text = await r.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (r.status >= 200 && r.status < 300) {
    if (body === undefined) throw new IndexError(`${url} answered ${r.status} with a body that is not JSON`);
    return body;
  }
  const msg =
    typeof body === 'object' && body !== null && typeof (body as { error?: unknown }).error === 'string'
      ? (body as { error: string }).error
      : `${url} answered ${r.status}`;
  throw new IndexError(msg, r.status);
}

function entriesOf(list: unknown[], url: string): IndexEntry[] {
  return list.map((v) => {
    const e = toEntry(v);
    if (e === null)
      throw new IndexError(`${url} answered a list holding something that is not an index entry`);
    return e;
  });
}

/**
 * Open the index `name` names (see the module comment).
 * @param update for a `.git` URL: fetch the copy again first (cloned anyway when missing)
 * @throws IndexError when a clone or fetch fails (git's message)
 */
export async function openIndex(name: string, cacheDir: string, update = false): Promise<IndexSource> {
  const loc = locateIndex(name, cacheDir);
  if (loc.kind === 'dir') return new LocalSource(loc, loc.dir);
  if (loc.kind === 'service') return new ServiceSource(loc);
  try {
    if (!existsSync(path.join(loc.dir, '.git'))) {
      ensureDirectory(path.dirname(loc.dir));
      await git(path.dirname(loc.dir), ['clone', '--quiet', '--depth', '1', loc.url, loc.dir]);
    } else if (update) {
      await git(loc.dir, ['fetch', '--quiet', '--depth', '1', 'origin']);
      await git(loc.dir, ['reset', '--quiet', '--hard', 'FETCH_HEAD']);
    }
  } catch (e) {
    throw new IndexError(`cannot copy the index ${loc.url}: ${(e as Error).message}`);
  }
  return new LocalSource(loc, loc.dir);
}

/**
 * `berm-indexd`: the index service. It holds an index directory in memory (a {@link Catalog}) and
 * serves it over HTTP under both of the reference implementation's spellings:
 *
 *   GET    /harnesses?q=TERM[&limit=N&cursor=C]   200 JSON array of entries (next page's cursor in
 *   GET    /berm?q=TERM...                         the `x-next-cursor` header)
 *   GET    /harnesses/{key}   GET /berm/{key}      200 array of the key's versions; 404 when none
 *   POST   /harnesses         POST /berm           {"reference": "host/repo:tag"} → 200 the entry
 *   DELETE /harnesses/{key}   DELETE /berm/{key}   {"digest": "sha256:...", "reason"?} → 200 the
 *                                                  takedown line (operators only)
 *
 * Every refusal is `{"error": "..."}`: 400 bad request or reference, 401 unknown token, 403 a
 * takedown by a non-operator, 404, 405, 422 not a pullable berm artifact, 429 over the publish rate
 * (with `retry-after`), 502 registry unreachable, 500 unreadable index.
 *
 * Publishing pulls the manifest and config anonymously (./describe.ts), appends one line to the
 * key's file (./files.ts) and, when the directory is a git work tree, commits it with the
 * publisher as author; publishes are serialised, so lines and commits keep one order. The same
 * reference at the same digest again is a no-op answered with the entry already listed.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { ensureDirectory } from '../util/dirs.js';
import { CursorError, type Catalog } from './catalog.js';
import { describeArtifact, PublishError } from './describe.js';
import { entryKey, type IndexEntry, type Takedown } from './entry.js';
import { appendEntry, appendTakedown, IndexReadError, relativeName } from './files.js';
import { commitFiles, isWorkTree } from './git.js';
import { checkInBackground, type CheckResult } from './reconcile.js';
import { clearAppendNotes, noteAppend, writeSnapshot } from './snapshot.js';
import { loadForStart, loadFromFiles, type HeldIndex, type StartLoad } from './startup.js';
import { publisherOf, type Publisher } from './tokens.js';
import type { RegistryOptions } from '../oci/index.js';

/** Options of {@link startIndexService}. */
export interface IndexServiceOptions {
  /** the index directory (created when missing) */
  root: string;
  /** `host:port` to listen on (port 0 picks one) */
  addr: string;
  /** token hashes → publisher (`--tokens`); absent: the service is open and records no publisher */
  tokens?: Map<string, Publisher>;
  /** allow an open service (no tokens) on a non-loopback address */
  open?: boolean;
  /** publishes each client may make per minute (default 30) */
  publishesPerMinute?: number;
  /** registry options for the anonymous pulls (tests: timeouts) */
  registry?: RegistryOptions;
  /** one line per notable event */
  log?: (line: string) => void;
  /**
   * a snapshot file (./snapshot.ts): a start reads it and listens, then checks the files against it
   * in the background (./reconcile.ts), and writes it again when they had changed; absent: every
   * start reads every file before it listens
   */
  snapshot?: string;
}

/** A running index service. */
export interface RunningIndexService {
  /** `http://host:port` */
  url: string;
  server: Server;
  catalog: Catalog;
  /** whether publishes are committed to git */
  git: boolean;
  /** ms the start took to read the snapshot, or the files, before listening */
  loadMs: number;
  /**
   * settles when the files have been checked against a catalog read from the snapshot (and a
   * stale snapshot written again); at once when every file was read at start
   */
  checked: Promise<void>;
  close(): Promise<void>;
}

class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

const MAX_BODY = 64 * 1024;

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const bytes = Buffer.from(JSON.stringify(body));
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': bytes.length,
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(bytes);
}

function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const timer = setTimeout(() => {
      reject(new Refusal(408, 'the request body did not arrive within 30 s'));
      req.destroy();
    }, 30_000);
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        clearTimeout(timer);
        reject(new Refusal(413, `the request body is over ${MAX_BODY} bytes`));
        req.destroy();
      } else chunks.push(c);
    });
    req.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    req.on('end', () => {
      clearTimeout(timer);
      let v: unknown;
      try {
        v = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        reject(new Refusal(400, 'the body is not JSON: send {"reference": "host/repository:tag"}'));
        return;
      }
      if (typeof v !== 'object' || v === null || Array.isArray(v)) {
        reject(new Refusal(400, 'the body must be a JSON object'));
        return;
      }
      resolve(v as Record<string, unknown>);
    });
  });
}

/** A fixed-window-free token bucket per client address: `perMinute` publishes, refilled evenly. */
class RateLimit {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  constructor(private readonly perMinute: number) {}

  /** @returns 0 when allowed (and counted), else the seconds until the next publish is allowed */
  take(client: string, now = Date.now()): number {
    const rate = this.perMinute / 60_000;
    const b = this.buckets.get(client) ?? { tokens: this.perMinute, at: now };
    b.tokens = Math.min(this.perMinute, b.tokens + (now - b.at) * rate);
    b.at = now;
    this.buckets.set(client, b);
    if (this.buckets.size > 10_000) {
      for (const [k, v] of this.buckets) if (v.tokens >= this.perMinute) this.buckets.delete(k);
    }
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - b.tokens) / rate / 1000));
  }
}

function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127\./.test(h);
}

/** Split `host:port` (`[v6]:port` too). @throws Error when it is not one */
export function parseAddr(addr: string): { host: string; port: number } {
  const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(addr);
  if (!m || Number(m[2]) > 65535) throw new Error(`--addr ${addr}: expected host:port (e.g. 127.0.0.1:7788)`);
  return { host: m[1]!.replace(/^\[|\]$/g, ''), port: Number(m[2]) };
}

/**
 * Load the index directory and listen.
 * @throws Error for an unreadable directory, a bad address, or an open service on a non-loopback
 *   address without `open`
 */
export async function startIndexService(o: IndexServiceOptions): Promise<RunningIndexService> {
  const log = o.log ?? (() => {});
  const { host, port } = parseAddr(o.addr);
  if (o.tokens === undefined && !o.open && !isLoopbackHost(host)) {
    throw new Error(
      `refusing to serve an open index on ${host}: anyone could publish; give --tokens FILE, or --open to mean it`,
    );
  }
  ensureDirectory(o.root);
  const t0 = performance.now();
  const start = loadForStart(o.root, o.snapshot);
  const loadMs = performance.now() - t0;
  /** the catalog served and what it matches; replaced when the directory is read again */
  let held: HeldIndex = start;
  log(
    `loaded ${start.catalog.size} versions of ${start.catalog.keys} harnesses in ${loadMs.toFixed(0)} ms` +
      (start.how === 'snapshot'
        ? ` from the snapshot (${start.states.size} files, ${start.filesRead} read again since it)`
        : ` from ${start.filesRead} files` + (start.why !== undefined ? ` (${start.why})` : '')) +
      (start.counts.skipped > 0
        ? `; skipped ${start.counts.skipped} unreadable lines (${start.counts.skippedAt.join(', ')})`
        : ''),
  );
  const useGit = await isWorkTree(o.root);
  const limiter = new RateLimit(o.publishesPerMinute ?? 30);
  let chain: Promise<unknown> = Promise.resolve();
  const serial = <T>(f: () => Promise<T>): Promise<T> => {
    const p = chain.then(f, f);
    chain = p.catch(() => {});
    return p;
  };

  const caller = (req: IncomingMessage): Publisher | null => {
    if (o.tokens === undefined) return null;
    const who = publisherOf(req.headers.authorization, o.tokens);
    if (who === undefined)
      throw new Refusal(401, 'unknown token: this index does not know the bearer token sent', {
        'www-authenticate': 'Bearer realm="berm-indexd"',
      });
    return who;
  };

  /**
   * Run `append` (an append to the file of `key`, returning its path) with the snapshot's note made
   * first and the file's new state recorded after, in one synchronous step with the catalog's
   * update that follows it.
   */
  const appendRecorded = (append: () => string, key: string): string => {
    if (o.snapshot !== undefined) {
      try {
        noteAppend(o.snapshot, `${key}.json`);
      } catch (e) {
        log(`cannot note the append in the snapshot's notes: ${(e as Error).message}`);
      }
    }
    const file = append();
    held.states.recordAppend(file, relativeName(o.root, file));
    return file;
  };

  const publish = async (req: IncomingMessage): Promise<IndexEntry> => {
    const who = caller(req);
    if (o.tokens !== undefined && who === null) {
      throw new Refusal(401, 'publishing to this index needs a token: set BERM_TOKEN', {
        'www-authenticate': 'Bearer realm="berm-indexd"',
      });
    }
    const client = who?.name ?? req.socket.remoteAddress ?? 'unknown';
    const wait = limiter.take(client);
    if (wait > 0) {
      throw new Refusal(
        429,
        `too many publishes from ${client}: at most ${o.publishesPerMinute ?? 30} a minute; retry in ${wait} s`,
        {
          'retry-after': String(wait),
        },
      );
    }
    const body = await readJson(req);
    if (typeof body.reference !== 'string') throw new Refusal(400, 'reference is missing or not a string');
    const reference = body.reference;
    const entry = await describeArtifact(reference, who?.name, o.registry);
    return serial(async () => {
      const known = held.catalog.latest(entry.reference);
      if (known !== undefined && known.digest === entry.digest) return known;
      const file = appendRecorded(() => appendEntry(o.root, entry), entryKey(entry.reference));
      held.catalog.add(entry);
      if (useGit) {
        await commitFiles(
          o.root,
          [path.relative(o.root, file)],
          `publish ${entry.reference}\n\n${entry.digest}\n`,
          who?.name ?? 'anonymous',
        );
      }
      log(`published ${entry.reference} ${entry.digest}${who ? ` by ${who.name}` : ''}`);
      return entry;
    });
  };

  const takedown = async (req: IncomingMessage, key: string): Promise<Takedown> => {
    const who = caller(req);
    if (who === null || !who.operator) {
      throw new Refusal(
        403,
        o.tokens === undefined
          ? 'takedowns need an operator: start berm-indexd with --tokens FILE and an operator line'
          : 'only an operator may take an entry down',
      );
    }
    const body = await readJson(req);
    if (typeof body.digest !== 'string') throw new Refusal(400, 'digest is missing or not a string');
    const versions = held.catalog.versions(key).filter((e) => e.digest === body.digest);
    if (versions.length === 0)
      throw new Refusal(404, `nothing published under ${JSON.stringify(key)} at ${body.digest}`);
    const t: Takedown = {
      takedown: body.digest,
      reference: versions[0]!.reference,
      by: who.name,
      at: new Date().toISOString(),
    };
    if (typeof body.reason === 'string') t.reason = body.reason.slice(0, 1000);
    return serial(async () => {
      const file = appendRecorded(() => appendTakedown(o.root, t), entryKey(t.reference));
      for (const v of versions) held.catalog.hide(v.reference, v.digest);
      if (useGit)
        await commitFiles(
          o.root,
          [path.relative(o.root, file)],
          `take down ${t.reference}\n\n${t.takedown}\n`,
          who.name,
        );
      log(`took down ${key} ${t.takedown} by ${who.name}`);
      return t;
    });
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const raw = req.url ?? '/';
    const q = raw.indexOf('?');
    const pathname = q < 0 ? raw : raw.slice(0, q);
    const params = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
    const method = req.method ?? 'GET';
    const m = /^\/(harnesses|berm)(?:\/(.*))?$/.exec(pathname);
    if (!m) throw new Refusal(404, `no route ${method} ${pathname}`);
    let key = m[2];
    if (key !== undefined) {
      try {
        key = decodeURIComponent(key);
      } catch {
        throw new Refusal(400, 'the key is not valid percent-encoding');
      }
    }
    if (key === undefined || key === '') {
      if (method === 'GET' || method === 'HEAD') {
        let limit: number | undefined;
        const l = params.get('limit');
        if (l !== null) {
          if (!/^\d{1,6}$/.test(l) || Number(l) < 1)
            throw new Refusal(400, 'limit must be a whole number from 1 to 999999');
          limit = Number(l);
        }
        const page = held.catalog.search(params.get('q') ?? '', {
          limit,
          cursor: params.get('cursor') ?? undefined,
        });
        send(res, 200, page.entries, page.next !== undefined ? { 'x-next-cursor': page.next } : {});
        return;
      }
      if (method === 'POST') {
        send(res, 200, await publish(req));
        return;
      }
      throw new Refusal(405, `${method} is not allowed here (GET, POST)`, { allow: 'GET, POST' });
    }
    if (method === 'GET' || method === 'HEAD') {
      const versions = held.catalog.versions(key);
      if (versions.length === 0) throw new Refusal(404, `nothing published under ${JSON.stringify(key)}`);
      send(res, 200, versions);
      return;
    }
    if (method === 'DELETE') {
      send(res, 200, await takedown(req, key));
      return;
    }
    throw new Refusal(405, `${method} is not allowed here (GET, DELETE)`, { allow: 'GET, DELETE' });
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (e instanceof Refusal) send(res, e.status, { error: e.message }, e.headers);
      else if (e instanceof PublishError) send(res, e.status, { error: e.message });
      else if (e instanceof CursorError) send(res, 400, { error: e.message });
      else if (e instanceof IndexReadError) send(res, 500, { error: `cannot read the index: ${e.message}` });
      else {
        log(`internal error: ${(e as Error).stack ?? e}`);
        send(res, 500, { error: `cannot write the index: ${(e as Error).message}` });
      }
    });
  });
  server.requestTimeout = 60_000;
  server.headersTimeout = 20_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  let closing = false;

  /**
   * After the socket listens: a catalog read from the snapshot is checked against the files (in
   * slices, requests answered between them; a rewritten or removed file makes the service read
   * every file again), then a stale snapshot is written again. Logs its failures, never throws.
   */
  const afterListen = async (s: StartLoad): Promise<void> => {
    let stale = s.stale;
    if (s.how === 'snapshot') {
      try {
        let r: CheckResult;
        try {
          r = await checkInBackground(o.root, held.states, held.catalog, held.counts, {
            stopped: () => closing,
          });
        } catch (e) {
          // a file that cannot be read, or a damaged file table in the snapshot
          r = { files: 0, appended: 0, added: 0, touched: 0, ms: 0, rewritten: (e as Error).message };
        }
        if (r.stopped) return;
        if (r.rewritten !== undefined) {
          const t1 = performance.now();
          const l = loadFromFiles(o.root);
          const old = held;
          held = l;
          old.release?.();
          log(`${r.rewritten}: read all ${l.files} files again in ${(performance.now() - t1).toFixed(0)} ms`);
          stale = true;
        } else {
          log(
            `checked ${r.files} files against the snapshot in ${r.ms.toFixed(0)} ms: ` +
              `${r.appended} appended to, ${r.added} new since it`,
          );
          if (r.appended + r.added + r.touched > 0) stale = true;
        }
      } catch (e) {
        log(`cannot check the index files: ${(e as Error).message}`);
        return;
      }
    }
    if (o.snapshot === undefined || !stale || closing) return;
    await new Promise((r) => setImmediate(r));
    const t1 = performance.now();
    try {
      writeSnapshot(o.snapshot, o.root, {
        catalog: held.catalog,
        files: held.states.size,
        table: held.states.toTable(),
        ...held.counts,
      });
      // in the same synchronous step: no append can fall between the snapshot and the notes' end
      clearAppendNotes(o.snapshot);
      log(`wrote the snapshot ${o.snapshot} in ${(performance.now() - t1).toFixed(0)} ms`);
    } catch (e) {
      log(`cannot write the snapshot ${o.snapshot}: ${(e as Error).message}`);
    }
  };
  const checked = afterListen(start);
  const a = server.address() as AddressInfo;
  const url = `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;
  log(
    `berm-indexd serving ${o.root} on ${url}${useGit ? ' (git: a commit per publish)' : ''}${o.tokens ? '' : ' (open: no publisher identity)'}`,
  );
  return {
    url,
    server,
    get catalog() {
      return held.catalog;
    },
    git: useGit,
    loadMs,
    checked,
    close: async () => {
      closing = true;
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await checked;
      held.release?.();
    },
  };
}

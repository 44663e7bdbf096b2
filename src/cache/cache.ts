/**
 * On-disk cache of translated Wasm binaries. Entries are keyed by a digest of
 * the ELF bytes, the translator version and the options; written atomically (temp file + rename)
 * so concurrent compilers of one image are safe; each entry carries a header with its length and
 * sha256, so a corrupt or truncated entry is detected and treated as a miss.
 */
import { randomBytes } from 'node:crypto';
import {
  accessSync,
  constants,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { DirectoryError, ensureDirectory } from '../util/dirs.js';
import { entryBody, entryHeader, entryPath, type EntryKind } from './entry.js';

export { cacheKey } from './entry.js';

/** Default directory: $BERM_CACHE_DIR, else $XDG_CACHE_HOME/berm, else ~/.cache/berm. */
export function defaultCacheDir(): string {
  if (process.env.BERM_CACHE_DIR) return process.env.BERM_CACHE_DIR;
  const xdg = process.env.XDG_CACHE_HOME;
  return join(xdg && xdg.length > 0 ? xdg : join(homedir(), '.cache'), 'berm');
}

/**
 * What a file of the cache holds: a translated module (`<key>.wasm`, what `ls` lists), or the
 * summary of the ELF image it came from (`<key>.image`, JSON, see src/elf/summary.ts).
 */
export type { EntryKind } from './entry.js';

/** One cache entry as listed by `ls`. */
export interface CacheEntry {
  key: string;
  bytes: number;
  modified: Date;
  /** what the entry was compiled from, when the compiling program said so ({@link WasmCache.label}) */
  label?: CacheLabel;
}

/** What a cache entry was compiled from, kept beside it as `<key>.json` for `berm cache ls`. */
export interface CacheLabel {
  /** the ELF's path as the user named it, when known */
  source?: string;
  /** lowercase hex sha256 of the ELF bytes */
  sha256: string;
  /** size of the ELF in bytes */
  bytes: number;
}

/** Caches with writes queued by {@link WasmCache.putLater}, written at the latest when the process exits. */
const unwritten = new Set<WasmCache>();
let exitHook = false;

/** A directory of cached Wasm binaries. */
export class WasmCache {
  constructor(readonly dir: string) {}

  /** entries queued by putLater and not yet written: bytes (or null: nothing to write) by path */
  private readonly queued = new Map<
    string,
    { key: string; kind: EntryKind; make: () => Uint8Array | null }
  >();

  private path(key: string, kind: EntryKind = 'wasm'): string {
    return entryPath(this.dir, key, kind);
  }

  /**
   * The cached bytes of `kind` (a Wasm binary, or an image summary kept beside it), or null when
   * absent, unreadable, truncated or corrupt (a corrupt entry is removed).
   */
  get(key: string, kind: EntryKind = 'wasm'): Uint8Array | null {
    this.flush();
    const p = this.path(key, kind);
    let buf: Buffer;
    try {
      buf = readFileSync(p);
    } catch {
      return null;
    }
    const body = entryBody(buf);
    if (body !== null) return body;
    if (kind === 'wasm') this.delete(key);
    else rmSync(p, { force: true });
    return null;
  }

  /**
   * Store bytes of `kind` atomically: the entry appears whole or not at all. Errors (read-only
   * disk) are swallowed: a cache is optional.
   */
  put(key: string, wasm: Uint8Array, kind: EntryKind = 'wasm'): boolean {
    this.flush();
    return this.write(key, wasm, kind);
  }

  /**
   * {@link put} after the current turn of the event loop (a setImmediate that does not keep the
   * process alive), or when the process exits, whichever comes first; every other method of this
   * cache writes the queue first, so this process never sees the difference. Why: a cold compile
   * ends with two entries (the module and the image summary), ~2-3 ms of hashing, temp names and
   * file writes, and its caller is waiting to make the first call. An entry queued when the
   * process is killed is lost, as a put cut off by the kill would be: a cache is optional.
   * @param make the bytes, computed when written (null: nothing to write)
   */
  putLater(key: string, make: () => Uint8Array | null, kind: EntryKind = 'wasm'): void {
    const p = this.path(key, kind);
    this.queued.delete(p); // a later put of the same entry replaces the earlier one
    this.queued.set(p, { key, kind, make });
    if (unwritten.has(this)) return;
    unwritten.add(this);
    setImmediate(() => this.flush()).unref();
    if (!exitHook) {
      exitHook = true;
      process.on('exit', () => {
        for (const c of unwritten) c.flush();
      });
    }
  }

  /** Write the entries {@link putLater} queued, now. */
  flush(): void {
    if (this.queued.size === 0) return;
    const queued = [...this.queued.values()];
    this.queued.clear();
    unwritten.delete(this);
    for (const q of queued) {
      let bytes: Uint8Array | null = null;
      try {
        bytes = q.make();
      } catch {
        // an entry that cannot be made is an entry not cached
      }
      if (bytes !== null) this.write(q.key, bytes, q.kind);
    }
  }

  private write(key: string, wasm: Uint8Array, kind: EntryKind): boolean {
    const p = this.path(key, kind);
    const tmp = `${p}.tmp-${process.pid}-${randomBytes(6).toString('hex')}`;
    try {
      ensureDirectory(this.dir);
      writeFileSync(tmp, Buffer.concat([Buffer.from(entryHeader(wasm)), wasm]));
      renameSync(tmp, p);
      return true;
    } catch {
      try {
        unlinkSync(tmp);
      } catch {
        // nothing was written
      }
      return false;
    }
  }

  /**
   * Check that the cache can be used: the directory exists or can be created, and entries can be
   * written in it.
   * @returns null when usable, else what is wrong (e.g. "/proc/x: cannot create directory: ...",
   *   "/tmp/f: exists and is not a directory").
   */
  problem(): string | null {
    this.flush();
    try {
      ensureDirectory(this.dir);
      accessSync(this.dir, constants.W_OK | constants.X_OK);
      return null;
    } catch (e) {
      if (e instanceof DirectoryError) return e.message;
      return `${this.dir}: not writable (${(e as NodeJS.ErrnoException).code ?? String(e)})`;
    }
  }

  /** Record what an entry was compiled from (best effort: a cache is optional). */
  label(key: string, label: CacheLabel): void {
    this.flush();
    const p = `${this.path(key).slice(0, -'.wasm'.length)}.json`;
    const text = JSON.stringify(label);
    try {
      // a run from the cache usually finds its label written: reading it is cheaper than a write
      if (readFileSync(p, 'utf8') === text) return;
    } catch {
      // absent: written below
    }
    try {
      writeFileSync(p, text);
    } catch {
      // the label only helps `cache ls`
    }
  }

  /** Remove one entry (and its label), if present. */
  delete(key: string): void {
    this.flush();
    rmSync(this.path(key), { force: true });
    rmSync(`${this.path(key).slice(0, -'.wasm'.length)}.json`, { force: true });
  }

  /** Entries, newest first. */
  list(): CacheEntry[] {
    this.flush();
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch {
      return [];
    }
    const out: CacheEntry[] = [];
    for (const n of names) {
      const m = /^([0-9a-f]{64})\.wasm$/.exec(n);
      if (!m) continue;
      try {
        const st = statSync(join(this.dir, n));
        let label: CacheLabel | undefined;
        try {
          label = JSON.parse(readFileSync(join(this.dir, `${m[1]}.json`), 'utf8')) as CacheLabel;
        } catch {
          label = undefined;
        }
        out.push({ key: m[1], bytes: st.size, modified: st.mtime, ...(label ? { label } : {}) });
      } catch {
        // removed meanwhile
      }
    }
    return out.sort((a, b) => b.modified.getTime() - a.modified.getTime());
  }

  /** Remove every entry (and stale temp files). @returns how many entries were removed. */
  clear(): number {
    this.flush();
    let n = 0;
    let names: string[] = [];
    try {
      names = readdirSync(this.dir);
    } catch {
      return 0;
    }
    for (const name of names) {
      if (/^[0-9a-f]{64}\.((wasm|image)(\.tmp-.*)?|json)$/.test(name)) {
        rmSync(join(this.dir, name), { force: true });
        if (name.endsWith('.wasm')) n++;
      }
    }
    return n;
  }
}

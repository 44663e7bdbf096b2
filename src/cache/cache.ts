/**
 * On-disk cache of translated Wasm binaries. Entries are keyed by a digest of
 * the ELF bytes, the translator version and the options; written atomically (temp file + rename)
 * so concurrent compilers of one image are safe; each entry carries a header with its length and
 * sha256, so a corrupt or truncated entry is detected and treated as a miss.
 *
 * The directory may be writable by others (a shared cache, a hostile user), so nothing found at an
 * entry's name is trusted: it is read only when it is a regular file of a bounded size, opened
 * without following a symlink and without blocking ({@link readEntry}); every file the cache
 * writes (entries and labels) replaces what stood at its name by a rename, never writing through
 * it; and only files and links are removed, never a directory.
 */
// crypto.hash (one-shot) rather than createHash: ~0.2 ms less per digest in a fresh process, where a
// warm compile computes three (the ELF, the key, the entry)
import { hash, randomBytes } from 'node:crypto';
import {
  accessSync,
  constants,
  lstatSync,
  readdirSync,
  renameSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { DirectoryError, ensureDirectory } from '../util/dirs.js';
import { readBoundedFile, type BoundedRead } from '../util/read-file.js';
import { utf8 } from '../util/utf8.js';

/**
 * An entry is a header of ASCII text, then the bytes: the magic, the bytes' length as 16 hex
 * digits and their sha256 as 64 (one string comparison checks it, with no Buffer method or byte
 * loop: a warm compile in a fresh process pays for the first call of every function it runs).
 */
const MAGIC = 'BERMWC02';
const HEADER = MAGIC.length + 16 + 64;

/**
 * The largest entry read, in bytes: a header and 1 GiB, V8's limit on the size of a Wasm module
 * (wasm-limits.h `kV8MaxWasmModuleSize`), so no entry a compile could use is refused. An image
 * summary describes an image that fits a guest memory of at most 1 GiB, with far fewer bytes. A
 * larger file is damaged (a sparse file costs its writer nothing; reading it would cost seconds
 * and its size in memory) and is removed unread.
 */
const MAX_ENTRY_BYTES = HEADER + 2 ** 30;

/** The largest label read (`<key>.json`): a path of at most PATH_MAX (4096) bytes escaped as JSON. */
const MAX_LABEL_BYTES = 64 * 1024;

/**
 * How an entry is opened beyond what {@link readBoundedFile} always does (read-only, without
 * blocking, O_NOCTTY): without following a symlink at its name (fails with ELOOP). The cache never
 * makes a symlink (it renames regular files into place), so one is not an entry; following it would
 * open whatever path its maker chose, and opening some devices acts (a tape rewinds, a watchdog
 * arms) before any type check could refuse it. A legitimate link costs one translation, whose entry
 * then replaces the link. O_NOFOLLOW is 0 where a platform lacks it (Windows).
 */
const OPEN_ENTRY = constants.O_NOFOLLOW ?? 0;

/**
 * What {@link readEntry} found at a path: the bytes of a regular file; `absent` when nothing could
 * be opened or read (no such file, a symlink, no permission, an I/O error); `foreign` when it is
 * not a regular file (a FIFO, socket, device or directory: never made by the cache, so left where
 * it is); `oversize` when it is a regular file larger than the bound (damaged).
 */
type EntryRead = Uint8Array | 'absent' | 'foreign' | 'oversize';

/**
 * Read a file of the cache through one descriptor ({@link readBoundedFile} with
 * {@link OPEN_ENTRY}): only a regular file of at most `max` bytes. A file shortened while read
 * yields the bytes read (its header check then fails). Input files named by a user are read by
 * readRegularFile, which follows links and explains its refusals; a cache entry is only ever a hit
 * or a miss.
 * @param max the largest size accepted, in bytes
 */
function readEntry(path: string, max: number): EntryRead {
  let r: BoundedRead;
  try {
    r = readBoundedFile(path, max, OPEN_ENTRY);
  } catch {
    return 'absent';
  }
  if ('bytes' in r) return r.bytes;
  return r.refused === 'open' ? 'absent' : r.refused === 'type' ? 'foreign' : 'oversize';
}

/**
 * Remove a file or link of the cache (never a directory, never what a link points to); absent or
 * not removable is not an error.
 * @returns whether it was removed
 */
function removeFile(path: string): boolean {
  try {
    unlinkSync(path);
    return true;
  } catch {
    // absent, a directory (not the cache's to remove), or not permitted
    return false;
  }
}

/**
 * The user's home directory: $HOME, as `os.homedir()` answers when it is set, else what
 * `os.homedir()` finds in the password database. node:os is loaded only then: under the CLI's
 * non-default V8 flags every built-in module loaded late is compiled from source (src/util/clock.ts).
 */
function homeDirectory(): string {
  const home = process.env.HOME;
  return home !== undefined && home.length > 0 ? home : process.getBuiltinModule('node:os').homedir();
}

/** Default directory: $BERM_CACHE_DIR, else $XDG_CACHE_HOME/berm, else ~/.cache/berm. */
export function defaultCacheDir(): string {
  if (process.env.BERM_CACHE_DIR) return process.env.BERM_CACHE_DIR;
  const xdg = process.env.XDG_CACHE_HOME;
  return join(xdg && xdg.length > 0 ? xdg : join(homeDirectory(), '.cache'), 'berm');
}

/**
 * sha256 over the parts, each length-prefixed so that no two part lists collide.
 * @returns 64 hex characters.
 */
export function cacheKey(parts: (Uint8Array | string)[]): string {
  // ASCII strings under 128 characters (an engine's keys: a hex digest, the translator's version
  // and digest, the options) frame to ASCII text, which hash() takes as it is
  let text = '';
  for (const p of parts) {
    if (typeof p !== 'string' || p.length > 127 || NOT_ASCII.test(p))
      return hash('sha256', frame(parts), 'hex');
    text += `${String.fromCharCode(p.length)}${SEVEN_ZEROS}${p}`;
  }
  return hash('sha256', text, 'hex');
}

const NOT_ASCII = /[\u0080-\uffff]/;
const SEVEN_ZEROS = '\0'.repeat(7);

/** The parts, each preceded by its length as 8 bytes little-endian. */
function frame(parts: (Uint8Array | string)[]): Buffer {
  const chunks: Uint8Array[] = [];
  for (const p of parts) {
    const b = typeof p === 'string' ? Buffer.from(p) : p;
    const len = new Uint8Array(8);
    for (let i = 0, n = b.length; i < 8; i++, n = Math.floor(n / 256)) len[i] = n % 256;
    chunks.push(len, b);
  }
  return Buffer.concat(chunks);
}

/**
 * What a file of the cache holds: a translated module (`<key>.wasm`, what `ls` lists), or the
 * summary of the ELF image it came from (`<key>.image`, JSON, see src/elf/summary.ts).
 */
export type EntryKind = 'wasm' | 'image';

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

/** The header of an entry holding `body`. */
function header(body: Uint8Array): string {
  return `${MAGIC}${body.length.toString(16).padStart(16, '0')}${hash('sha256', body, 'hex')}`;
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
    if (key.length !== 64 || /[^0-9a-f]/.test(key)) throw new Error(`bad cache key ${key}`);
    // not path.join: its first call costs a warm compile more than the rest of the lookup
    const sep = this.dir === '' || this.dir.endsWith('/') ? '' : '/';
    return `${this.dir}${sep}${key}.${kind}`;
  }

  /**
   * The cached bytes of `kind` (a Wasm binary, or an image summary kept beside it), or null when
   * absent, unreadable, truncated, corrupt or larger than {@link MAX_ENTRY_BYTES} (such an entry
   * is removed), or when something other than a regular file stands at its name (a symlink, FIFO,
   * device or directory: left alone, see {@link readEntry}). Never blocks on what it finds.
   */
  get(key: string, kind: EntryKind = 'wasm'): Uint8Array | null {
    // flush() only when there is something to write: V8 compiles a function whole on its first
    // call, and a warm compile in a fresh process has nothing queued
    if (this.queued.size > 0) this.flush();
    const p = this.path(key, kind);
    const buf = readEntry(p, MAX_ENTRY_BYTES);
    if (buf === 'absent' || buf === 'foreign') return null;
    if (buf !== 'oversize' && buf.length >= HEADER) {
      // plain views: Buffer's own subarray is JavaScript, run for the first time here
      const head = new Uint8Array(buf.buffer, buf.byteOffset, HEADER);
      const body = new Uint8Array(buf.buffer, buf.byteOffset + HEADER, buf.length - HEADER);
      if (utf8(head) === header(body)) return body;
    }
    this.discard(key, kind, p);
    return null;
  }

  /** Remove a damaged entry of `kind` found at `p` (a module with its label). */
  private discard(key: string, kind: EntryKind, p: string): void {
    if (kind === 'wasm') this.delete(key);
    else removeFile(p);
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
    return this.replace(this.path(key, kind), Buffer.concat([Buffer.from(header(wasm)), wasm]));
  }

  /**
   * Put `bytes` at `p` as a new file renamed into place: whatever stood there (an older file, a
   * FIFO, a symlink) is replaced, never written through; a directory there makes it fail.
   * @returns whether it was written (errors are swallowed: a cache is optional)
   */
  private replace(p: string, bytes: Uint8Array | string): boolean {
    // a name nobody can guess, created exclusively: not a link or FIFO someone placed first
    const tmp = `${p}.tmp-${process.pid}-${randomBytes(6).toString('hex')}`;
    try {
      ensureDirectory(this.dir);
      writeFileSync(tmp, bytes, { flag: 'wx', mode: 0o600 });
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
    // a run from the cache usually finds its label written: reading it is cheaper than a write
    const found = readEntry(p, MAX_LABEL_BYTES);
    if (typeof found !== 'string' && utf8(found) === text) return;
    // the label only helps `cache ls`: not written is not an error
    this.replace(p, text);
  }

  /** Remove one entry (and its label), if present; a directory at either name is left alone. */
  delete(key: string): void {
    this.flush();
    removeFile(this.path(key));
    removeFile(`${this.path(key).slice(0, -'.wasm'.length)}.json`);
  }

  /**
   * Entries, newest first: the regular files named `<key>.wasm` (a link or anything else at such
   * a name is no entry, see {@link readEntry}), each with its label when that is a regular file
   * holding one.
   */
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
        const st = lstatSync(join(this.dir, n));
        if (!st.isFile()) continue;
        let label: CacheLabel | undefined;
        const text = readEntry(join(this.dir, `${m[1]}.json`), MAX_LABEL_BYTES);
        try {
          label = typeof text === 'string' ? undefined : (JSON.parse(utf8(text)) as CacheLabel);
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

  /**
   * Remove every entry (and stale temp files and labels): each file or link at a name of the
   * cache's, never a directory (left alone) or what a link points to.
   * @returns how many entries (`.wasm` names) were removed.
   */
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
      if (/^[0-9a-f]{64}\.((wasm|image|json)(\.tmp-.*)?)$/.test(name)) {
        if (removeFile(join(this.dir, name)) && name.endsWith('.wasm')) n++;
      }
    }
    return n;
  }
}

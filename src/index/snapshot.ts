/**
 * A snapshot of a loaded index, so that `berm-indexd` starts without parsing every JSON Lines file
 * again. The files stay the source of truth: the snapshot records each file's path, size,
 * modification time and CRC-32 as read. {@link readSnapshotIndex} reads the catalog alone; the
 * files are then checked against it, all at once ({@link loadWithSnapshot}) or by the service in
 * the background (./reconcile.ts), per file as ./file-states.ts does: a file that grew and whose
 * first bytes still have the recorded CRC was appended to (the format is append-only), so only its
 * new lines are read, and their entries come after the snapshot's; a new file is read whole. A file
 * that shrank, was rewritten or removed, a snapshot that is damaged, of another version or of
 * another directory: the directory is loaded from its files (./files.ts), as without a snapshot.
 * Garbage lines stay skipped and counted: the snapshot keeps the count and the first places.
 * Beside the snapshot, the service notes each file it appends to ({@link noteAppend}), so a start
 * reads those again at once.
 *
 * Layout: `BERMIDX1`, a u32 (little-endian) header length, the header as JSON (version, root,
 * counts, the CRC-32 of the body, and each section's byte offset and length in the body), then the
 * body from the next multiple of 8: file paths (UTF-8, NUL-separated), sizes and modification
 * times (float64), CRCs (uint32), the entries' lines (UTF-8) and the byte offsets splitting them (float64), their haystacks
 * (UTF-8) and the UTF-16 offsets splitting them (uint32), the keys and version ids (JSON), the
 * visible bits and the n-gram filter's segments (int32). Written to a temporary file and renamed.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ensureDirectory } from '../util/dirs.js';
import { Catalog } from './catalog.js';
import { SEGMENT_ENTRIES, SHORT_COLUMNS, TRI_COLUMNS } from './grams.js';
import { FileStates } from './file-states.js';
import { indexFiles, type LineCounts, type LoadedIndex } from './files.js';

const MAGIC = 'BERMIDX1';
const VERSION = 1;
const TRI_LEN = TRI_COLUMNS * (SEGMENT_ENTRIES >>> 5);
const SHORT_LEN = SHORT_COLUMNS * (SEGMENT_ENTRIES >>> 10);

interface Header {
  version: number;
  root: string;
  entries: number;
  keyCount: number;
  skipped: number;
  skippedAt: string[];
  takedowns: number;
  segments: number;
  bodyLength: number;
  /** body bytes read at start (the sections before 'ids') */
  eager: number;
  sections: Record<string, [number, number]>;
}

/** What {@link loadWithSnapshot} did. */
export interface SnapshotLoad extends LoadedIndex {
  /** 'used': the snapshot and the files agreed (new lines read on top); 'reloaded': read from the files */
  how: 'used' | 'reloaded';
  /** why the files were read instead (absent when the snapshot was used) */
  why?: string;
  /** whether the snapshot no longer matches the catalog (write a new one) */
  stale: boolean;
  /** close the snapshot file the catalog reads entries from (after the catalog's last use) */
  release?: () => void;
}

/** The snapshot file of the index directory `root` under berm's cache directory. */
export function defaultSnapshotFile(cacheDir: string, root: string): string {
  const id = createHash('sha256').update(path.resolve(root)).digest('hex').slice(0, 32);
  return path.join(cacheDir, 'index-snapshots', `${id}.snapshot`);
}

/** Bytes of a typed array. */
function bytesOf(a: Int32Array | Float64Array | Uint32Array): Buffer {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength);
}

/**
 * Write a snapshot of `loaded` (its catalog and the files it was read from) to `file`, atomically.
 * @throws Error when it cannot be written (the caller logs it: a snapshot is only a cache)
 */
export function writeSnapshot(file: string, root: string, loaded: LoadedIndex): void {
  const p = loaded.catalog.parts();
  const ids = typeof p.ids === 'function' ? p.ids() : p.ids;
  const t = loaded.table;
  const lineOfEntry = p.lines;
  const lineBufs = Array.from({ length: p.entries }, (_, i) =>
    Buffer.from(typeof lineOfEntry === 'function' ? lineOfEntry(i) : lineOfEntry[i]!),
  );
  const lineOff = new Float64Array(lineBufs.length + 1);
  for (let i = 0; i < lineBufs.length; i++) lineOff[i + 1] = lineOff[i]! + lineBufs[i]!.length;
  const lineBytes = Buffer.concat(lineBufs);
  const hayOff = new Uint32Array(p.hay.length + 1);
  for (let i = 0; i < p.hay.length; i++) hayOff[i + 1] = hayOff[i]! + p.hay[i]!.length;
  const tri = Buffer.alloc(p.tri.length * TRI_LEN * 4);
  const short = Buffer.alloc(p.short.length * SHORT_LEN * 4);
  p.tri.forEach((s, k) => bytesOf(s).copy(tri, k * TRI_LEN * 4));
  p.short.forEach((s, k) => bytesOf(s).copy(short, k * SHORT_LEN * 4));
  // read at start, then (from 'ids' on) read only when needed
  const parts: [string, Buffer][] = [
    ['paths', Buffer.from(t.paths.join('\0'))],
    ['size', bytesOf(Float64Array.from(t.size))],
    ['mtime', bytesOf(Float64Array.from(t.mtime))],
    ['crc', bytesOf(Uint32Array.from(t.crc))],
    ['hayOff', bytesOf(hayOff)],
    ['lineOff', bytesOf(lineOff)],
    ['visible', bytesOf(p.visible)],
    ['tri', tri],
    ['short', short],
    ['hay', Buffer.from(p.hay.join(''))],
    ['ids', Buffer.from(JSON.stringify([ids.keys, ids.versions]))],
    ['lines', lineBytes],
  ];
  const sections: Record<string, [number, number]> = {};
  const chunks: Buffer[] = [];
  let at = 0;
  let eager = 0;
  for (const [name, b] of parts) {
    if (name === 'ids') eager = at;
    sections[name] = [at, b.length];
    chunks.push(b);
    at += b.length;
    const pad = (8 - (at % 8)) % 8;
    if (pad > 0) chunks.push(Buffer.alloc(pad));
    at += pad;
  }
  const body = Buffer.concat(chunks);
  const header: Header = {
    version: VERSION,
    root: path.resolve(root),
    entries: p.hay.length,
    keyCount: p.keyCount,
    skipped: loaded.skipped,
    skippedAt: loaded.skippedAt,
    takedowns: loaded.takedowns,
    segments: p.tri.length,
    bodyLength: body.length,
    eager,
    sections,
  };
  const h = Buffer.from(JSON.stringify(header));
  const lead = Buffer.alloc(12);
  lead.write(MAGIC, 0, 'latin1');
  lead.writeUInt32LE(h.length, 8);
  const headPad = Buffer.alloc((8 - ((12 + h.length) % 8)) % 8);
  ensureDirectory(path.dirname(file));
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    fs.writeFileSync(tmp, Buffer.concat([lead, h, headPad, body]), { mode: 0o600 });
    fs.renameSync(tmp, file);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw e;
  }
}

/** A snapshot's header and the body's first `eager` bytes, the file kept open for the rest. */
interface OpenSnapshot {
  header: Header;
  body: Buffer;
  fd: number;
  /** the body's offset in the file */
  base: number;
}

/** The snapshot opened, or why it cannot be used. */
function openSnapshot(file: string, root: string): OpenSnapshot | { why: string } {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch (e) {
    return { why: `no snapshot (${(e as NodeJS.ErrnoException).code ?? e})` };
  }
  const fail = (why: string): { why: string } => {
    fs.closeSync(fd);
    return { why };
  };
  try {
    const size = fs.fstatSync(fd).size;
    const lead = Buffer.alloc(12);
    if (fs.readSync(fd, lead, 0, 12, 0) !== 12 || lead.toString('latin1', 0, 8) !== MAGIC)
      return fail('the snapshot is not one');
    const hl = lead.readUInt32LE(8);
    if (hl > 1 << 20) return fail('the snapshot header is damaged');
    const hb = Buffer.alloc(hl);
    if (fs.readSync(fd, hb, 0, hl, 12) !== hl) return fail('the snapshot is cut short');
    let header: Header;
    try {
      header = JSON.parse(hb.toString('utf8')) as Header;
    } catch {
      return fail('the snapshot header is damaged');
    }
    if (header.version !== VERSION) return fail(`the snapshot is of version ${header.version}`);
    if (header.root !== path.resolve(root)) return fail(`the snapshot is of ${header.root}`);
    const base = 12 + hl + ((8 - ((12 + hl) % 8)) % 8);
    if (size !== base + header.bodyLength || !(header.eager <= header.bodyLength))
      return fail('the snapshot is cut short or damaged');
    // a buffer of its own (not from the pool), so typed arrays can view it 8-aligned
    const body = Buffer.from(new ArrayBuffer(header.eager));
    let got = 0;
    while (got < body.length) {
      const n = fs.readSync(fd, body, got, body.length - got, base + got);
      if (n === 0) return fail('the snapshot is cut short');
      got += n;
    }
    return { header, body, fd, base };
  } catch (e) {
    return fail(`the snapshot cannot be read (${(e as NodeJS.ErrnoException).code ?? e})`);
  }
}

/** A catalog read from a snapshot alone (the files not yet checked against it). */
export interface SnapshotIndex {
  catalog: Catalog;
  /** the files' states as the snapshot recorded them */
  states: FileStates;
  counts: LineCounts;
  /** close the snapshot file the catalog reads entries from (after the catalog's last use) */
  release: () => void;
}

/**
 * Read the catalog a snapshot holds, without looking at the index files: the caller checks them
 * against {@link SnapshotIndex.states} (all at once, {@link loadWithSnapshot}, or in the
 * background, ./reconcile.ts).
 * @returns the catalog, or why the snapshot cannot be used
 */
export function readSnapshotIndex(root: string, file: string): SnapshotIndex | { why: string } {
  const snap = openSnapshot(file, root);
  if ('why' in snap) return snap;
  const { header, body, fd, base } = snap;
  let open = true;
  const release = (): void => {
    if (open) fs.closeSync(fd);
    open = false;
  };
  const damaged = (why: string): { why: string } => {
    release();
    return { why };
  };
  /** bytes [o, o + l) of the body, from the file */
  const lazy = (o: number, l: number): Buffer => {
    const b = Buffer.allocUnsafe(l);
    let got = 0;
    while (got < l) {
      const n = fs.readSync(fd, b, got, l - got, base + o + got);
      if (n === 0) throw new Error('the snapshot was cut short while in use');
      got += n;
    }
    return b;
  };
  const sec = (name: string, eager = true): [number, number] => {
    const s = header.sections[name];
    if (s === undefined || s[0] + s[1] > (eager ? body.length : header.bodyLength))
      throw new Error(`section ${name}`);
    return s;
  };
  const f64 = (name: string): Float64Array => {
    const [o, l] = sec(name);
    return new Float64Array(body.buffer, body.byteOffset + o, l / 8);
  };
  const i32 = (name: string, o = 0, l?: number): Int32Array => {
    const [so, sl] = sec(name);
    return new Int32Array(body.buffer, body.byteOffset + so + o * 4, l ?? sl / 4);
  };
  const text = (name: string): string => {
    const [o, l] = sec(name);
    return body.toString('utf8', o, o + l);
  };
  try {
    const size = f64('size');
    const mtime = f64('mtime');
    const [co, cl] = sec('crc');
    const crc = new Uint32Array(body.buffer, body.byteOffset + co, cl / 4);
    if (size.length !== crc.length || mtime.length !== crc.length) return damaged('the snapshot is damaged');
    // the paths are split when a file is first looked up (after the service listens)
    const [po, pl] = sec('paths');
    const states = FileStates.fromTable(() => {
      const paths = pl === 0 ? [] : body.toString('utf8', po, po + pl).split('\0');
      if (paths.length !== crc.length) throw new Error('the snapshot is damaged: its file table');
      return { paths, size: [...size], mtime: [...mtime], crc: [...crc] };
    }, crc.length);
    const n = header.entries;
    const [lo] = sec('lines', false);
    const lineOff = f64('lineOff');
    const lines = (i: number): string =>
      lazy(lo + lineOff[i]!, lineOff[i + 1]! - lineOff[i]!).toString('utf8');
    const hayText = text('hay');
    const [ho, hl] = sec('hayOff');
    const off = new Uint32Array(body.buffer, body.byteOffset + ho, hl / 4);
    if (lineOff.length !== n + 1 || off.length !== n + 1 || off[n] !== hayText.length)
      return damaged('the snapshot is damaged');
    const hay: string[] = new Array<string>(n);
    for (let i = 0; i < n; i++) hay[i] = hayText.slice(off[i], off[i + 1]);
    const tri: Int32Array[] = [];
    const short: Int32Array[] = [];
    for (let s = 0; s < header.segments; s++) {
      tri.push(i32('tri', s * TRI_LEN, TRI_LEN));
      short.push(i32('short', s * SHORT_LEN, SHORT_LEN));
    }
    const [io, il] = sec('ids', false);
    const catalog = new Catalog({
      entries: n,
      lines,
      hay,
      ids: () => {
        const [keys, versions] = JSON.parse(lazy(io, il).toString('utf8')) as [string[], string[]];
        return { keys, versions };
      },
      keyCount: header.keyCount,
      visible: Int32Array.from(i32('visible')),
      tri,
      short,
    });
    const counts: LineCounts = {
      skipped: header.skipped,
      skippedAt: [...header.skippedAt],
      takedowns: header.takedowns,
    };
    return { catalog, states, counts, release };
  } catch (e) {
    return damaged(`the snapshot is damaged (${(e as Error).message})`);
  }
}

/**
 * Load an index directory through the snapshot at `file` (see the module comment), checking every
 * file before it returns: the catalog is the snapshot's plus the lines appended since, or, when the
 * snapshot cannot be used, the directory read from its files.
 * @throws IndexReadError when the directory or a file cannot be read
 */
export function loadWithSnapshot(
  root: string,
  file: string,
  loadFiles: (root: string) => LoadedIndex,
): SnapshotLoad {
  const reload = (why: string): SnapshotLoad => ({ ...loadFiles(root), how: 'reloaded', why, stale: true });
  const snap = readSnapshotIndex(root, file);
  if ('why' in snap) return reload(snap.why);
  const { catalog, states, counts, release } = snap;
  try {
    const now = indexFiles(root);
    const prefix = path.join(root, path.sep);
    const seen = new Set<string>();
    let changed = false;
    for (const abs of now) {
      const rel = abs.slice(prefix.length).split(path.sep).join('/');
      seen.add(rel);
      const c = states.check(abs, rel, catalog, counts);
      if (c.kind === 'rewritten') {
        release();
        return reload(c.why);
      }
      if (c.kind !== 'same') changed = true;
    }
    for (const rel of states.paths())
      if (!seen.has(rel)) {
        release();
        return reload(`${rel} was removed`);
      }
    return {
      catalog,
      files: now.length,
      ...counts,
      table: states.toTable(),
      how: 'used',
      stale: changed,
      release,
    };
  } catch (e) {
    release();
    if ((e as Error).name === 'IndexReadError') throw e;
    return reload(`the snapshot is damaged (${(e as Error).message})`);
  }
}

/**
 * The file beside a snapshot that names the index files the service appended to since the snapshot
 * was written, one path (relative to the root) per line, so that a start reads those files again
 * at once instead of waiting for the background check. Only a cache: a name lost in a crash is
 * found by the check a moment later.
 */
function appendNotesFile(snapshotFile: string): string {
  return `${snapshotFile}.appended`;
}

/**
 * Note that the service is about to append to `rel` (call before the append).
 * @throws Error when the note cannot be written (the caller logs it)
 */
export function noteAppend(snapshotFile: string, rel: string): void {
  ensureDirectory(path.dirname(snapshotFile));
  fs.appendFileSync(appendNotesFile(snapshotFile), rel + '\n', { mode: 0o600 });
}

/** The paths noted by {@link noteAppend} since the snapshot was written (none when unreadable). */
export function readAppendNotes(snapshotFile: string): string[] {
  let text: string;
  try {
    text = fs.readFileSync(appendNotesFile(snapshotFile), 'utf8');
  } catch {
    return [];
  }
  const fine = (l: string): boolean =>
    l.endsWith('.json') &&
    !l.includes('\0') &&
    l.split('/').every((p) => p !== '' && p !== '.' && p !== '..');
  return [...new Set(text.split('\n').filter(fine))];
}

/** Forget the notes (a snapshot covering them was just written). */
export function clearAppendNotes(snapshotFile: string): void {
  fs.rmSync(appendNotesFile(snapshotFile), { force: true });
}

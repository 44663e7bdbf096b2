/**
 * An index on disk, in the reference implementation's layout: one JSON Lines file per harness at
 * `{root}/{registry}/{repository}.json` (any depth), one line appended per published version and
 * never rewritten. Reading skips and counts a line it cannot parse; writing appends one whole line
 * with a single `write` on a file opened for appending, then fsyncs it, so a reader sees whole lines
 * and an acknowledged publish is on disk.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as zlib from 'node:zlib';
import { ensureDirectory } from '../util/dirs.js';
import { Catalog } from './catalog.js';
import {
  entryKey,
  formatEntryLine,
  formatTakedownLine,
  parseIndexLine,
  type IndexEntry,
  type Takedown,
} from './entry.js';

/** The state of each file a catalog was read from (sorted by path), as a snapshot records it. */
export interface FileTable {
  /** paths relative to the index root, `/`-separated, in {@link indexFiles} order */
  paths: string[];
  /** bytes read */
  size: number[];
  /** modification time, ms */
  mtime: number[];
  /** CRC-32 of the bytes read */
  crc: number[];
}

/** What {@link loadIndexDirectory} read. */
export interface LoadedIndex {
  catalog: Catalog;
  /** `.json` files read */
  files: number;
  /** lines skipped because they were not an entry or a takedown */
  skipped: number;
  /** the first few skipped lines as `file:line` (for a log) */
  skippedAt: string[];
  /** takedown lines applied */
  takedowns: number;
  /** the files as read */
  table: FileTable;
}

/** Thrown when the index directory (or a file in it) cannot be read: the service answers 500. */
export class IndexReadError extends Error {
  override name = 'IndexReadError';
}

/** Every `.json` file under `root`, at any depth, sorted by path (skipping `.git`). */
export function indexFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    let names: fs.Dirent[];
    try {
      names = fs.readdirSync(dir, { withFileTypes: true });
    } catch (e) {
      throw new IndexReadError(
        `cannot read the index directory ${dir}: ${(e as NodeJS.ErrnoException).code ?? e}`,
      );
    }
    for (const d of names) {
      if (d.name === '.git') continue;
      const p = path.join(dir, d.name);
      if (d.isDirectory()) walk(p);
      else if (d.isFile() && d.name.endsWith('.json')) out.push(p);
    }
  };
  walk(root);
  return out.sort();
}

/** One index file's bytes and modification time. @throws IndexReadError */
export function readIndexFile(file: string): { bytes: Buffer; mtime: number } {
  try {
    const fd = fs.openSync(file, 'r');
    try {
      const st = fs.fstatSync(fd);
      let bytes = Buffer.allocUnsafe(st.size);
      let got = 0;
      for (;;) {
        if (got === bytes.length) {
          const more = Buffer.allocUnsafe(Math.max(4096, bytes.length));
          const n = fs.readSync(fd, more, 0, more.length, got);
          if (n === 0) break;
          bytes = Buffer.concat([bytes, more.subarray(0, n)]);
          got += n;
          continue;
        }
        const n = fs.readSync(fd, bytes, got, bytes.length - got, got);
        if (n === 0) break;
        got += n;
      }
      return { bytes: bytes.subarray(0, got), mtime: st.mtimeMs };
    } finally {
      fs.closeSync(fd);
    }
  } catch (e) {
    throw new IndexReadError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? e}`);
  }
}

/** Counts of {@link readLines}, added to as lines are read. */
export interface LineCounts {
  skipped: number;
  skippedAt: string[];
  takedowns: number;
}

/**
 * Add the lines of `text` (an index file's content from a line start) to `catalog`: entries in
 * order, takedown lines hiding the versions at their digest, anything else skipped and counted.
 * @param rel the file's path relative to the root, `/`-separated (names the key and the log)
 * @param firstLine the number of the first line of `text` in the file
 */
export function readLines(
  catalog: Catalog,
  text: string,
  rel: string,
  firstLine: number,
  counts: LineCounts,
): void {
  // the file names the key: `{root}/{key}.json`
  const fileKey = rel.slice(0, -'.json'.length);
  let lineNo = firstLine - 1;
  let at = 0;
  while (at < text.length) {
    let nl = text.indexOf('\n', at);
    if (nl < 0) nl = text.length;
    const line = text.slice(at, nl);
    at = nl + 1;
    lineNo++;
    if (line.trim() === '') continue;
    const parsed = parseIndexLine(line);
    if (parsed === null) {
      counts.skipped++;
      if (counts.skippedAt.length < 10) counts.skippedAt.push(`${rel}:${lineNo}`);
    } else if (parsed.kind === 'entry') {
      // an entry filed under another key (a hand edit) is grouped by its own reference
      const ref = parsed.entry.reference;
      const c = ref.charAt(fileKey.length);
      const filed = ref.startsWith(fileKey) && (c === ':' || c === '@') && !ref.includes('/', fileKey.length);
      catalog.add(parsed.entry, filed ? fileKey : undefined, line);
    } else {
      catalog.hideDigest(parsed.takedown.takedown);
      counts.takedowns++;
    }
  }
}

/** The `/`-separated path of `file` relative to `root`. */
export function relativeName(root: string, file: string): string {
  return path.relative(root, file).split(path.sep).join('/');
}

/**
 * Load an index directory into a {@link Catalog}: files in sorted path order (so keys in sorted
 * order), each file's lines in order; a takedown line hides the versions at its digest.
 * @throws IndexReadError when the directory or a file cannot be read
 */
export function loadIndexDirectory(root: string): LoadedIndex {
  const catalog = new Catalog();
  const files = indexFiles(root);
  const counts: LineCounts = { skipped: 0, skippedAt: [], takedowns: 0 };
  const table: FileTable = { paths: [], size: [], mtime: [], crc: [] };
  for (const file of files) {
    const { bytes, mtime } = readIndexFile(file);
    const rel = relativeName(root, file);
    table.paths.push(rel);
    table.size.push(bytes.length);
    table.mtime.push(mtime);
    table.crc.push(zlib.crc32(bytes));
    readLines(catalog, bytes.toString('utf8'), rel, 1, counts);
  }
  return { catalog, files: files.length, ...counts, table };
}

/** The file of the harness `key` names (`{root}/{key}.json`), refusing a key that leaves `root`. */
export function indexFileOf(root: string, key: string): string {
  const parts = key.split('/');
  if (parts.some((p) => p === '' || p === '.' || p === '..') || key.includes('\0')) {
    throw new Error(`the key ${JSON.stringify(key)} does not name a file under the index`);
  }
  return path.join(root, ...parts) + '.json';
}

/** Append one line (a newline is added) to `file`, creating it and its directories; fsynced. */
function appendLine(file: string, line: string): void {
  ensureDirectory(path.dirname(file));
  const fd = fs.openSync(file, 'a', 0o644);
  try {
    // a file whose last line lost its newline (a hand edit) must not swallow ours
    const size = fs.fstatSync(fd).size;
    let prefix = '';
    if (size > 0) {
      const last = Buffer.alloc(1);
      const rfd = fs.openSync(file, 'r');
      try {
        fs.readSync(rfd, last, 0, 1, size - 1);
      } finally {
        fs.closeSync(rfd);
      }
      if (last[0] !== 0x0a) prefix = '\n';
    }
    fs.writeSync(fd, prefix + line + '\n');
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Append an entry to its harness's file.
 * @returns the file written (absolute)
 */
export function appendEntry(root: string, entry: IndexEntry): string {
  const file = indexFileOf(root, entryKey(entry.reference));
  appendLine(file, formatEntryLine(entry));
  return file;
}

/**
 * Append a takedown line to the file of the harness it names.
 * @returns the file written
 */
export function appendTakedown(root: string, t: Takedown): string {
  const file = indexFileOf(root, entryKey(t.reference));
  appendLine(file, formatTakedownLine(t));
  return file;
}

/**
 * An index on disk, in the reference implementation's layout: one JSON Lines file per harness at
 * `{root}/{registry}/{repository}.json` (any depth), one line appended per published version and
 * never rewritten. Reading skips and counts a line it cannot parse; writing appends one whole line
 * with a single `write` on a file opened for appending, then fsyncs it, so a reader sees whole lines
 * and an acknowledged publish is on disk.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
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

/**
 * Load an index directory into a {@link Catalog}: files in sorted path order (so keys in sorted
 * order), each file's lines in order; a takedown line hides the versions at its digest.
 * @throws IndexReadError when the directory or a file cannot be read
 */
export function loadIndexDirectory(root: string): LoadedIndex {
  const catalog = new Catalog();
  const files = indexFiles(root);
  let skipped = 0;
  let takedowns = 0;
  const skippedAt: string[] = [];
  for (const file of files) {
    let text: string;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (e) {
      throw new IndexReadError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? e}`);
    }
    // the file names the key: `{root}/{key}.json`
    const fileKey = path.relative(root, file).slice(0, -'.json'.length).split(path.sep).join('/');
    let lineNo = 0;
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
        skipped++;
        if (skippedAt.length < 10) skippedAt.push(`${path.relative(root, file)}:${lineNo}`);
      } else if (parsed.kind === 'entry') {
        // an entry filed under another key (a hand edit) is grouped by its own reference
        const ref = parsed.entry.reference;
        const c = ref.charAt(fileKey.length);
        const filed =
          ref.startsWith(fileKey) && (c === ':' || c === '@') && !ref.includes('/', fileKey.length);
        catalog.add(parsed.entry, filed ? fileKey : undefined);
      } else {
        catalog.hideDigest(parsed.takedown.takedown);
        takedowns++;
      }
    }
  }
  return { catalog, files: files.length, skipped, skippedAt, takedowns };
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

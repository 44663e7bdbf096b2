/**
 * The state of every index file as a catalog last read it (size, modification time, CRC-32 of the
 * bytes read), by path relative to the index root, and the one comparison a start through a
 * snapshot makes per file: unchanged, appended to (only the new lines are read), new (read whole),
 * or rewritten (the catalog no longer matches the file and the directory is read again).
 *
 * The states are kept live: an append the service makes itself updates its file's state in the
 * same synchronous step as the catalog, so a check that runs while the service publishes never
 * reads one of its own lines twice.
 */
import * as fs from 'node:fs';
import * as zlib from 'node:zlib';
import type { Catalog } from './catalog.js';
import { readIndexFile, readLines, type FileTable, type LineCounts } from './files.js';

/** One file's state as read. */
export interface FileState {
  /** bytes read */
  size: number;
  /** modification time, ms */
  mtime: number;
  /** CRC-32 of the bytes read */
  crc: number;
}

/** What {@link FileStates.check} found. */
export type FileCheck =
  /** 'touched': the same bytes with another modification time (the state is updated) */
  | { kind: 'same' | 'touched' | 'appended' | 'new' }
  /** the file shrank or its first bytes changed: the catalog must be read again from the files */
  | { kind: 'rewritten'; why: string };

/** The states of an index's files (see the module comment). */
export class FileStates {
  private readonly map = new Map<string, FileState>();
  /** a table not yet put in the map (a snapshot's: most starts never look a file up before listening) */
  private pending: (() => FileTable) | null = null;
  private pendingSize = 0;

  /**
   * The states of a {@link FileTable} (a snapshot's, or a load's), or of a function giving it, called
   * on first need.
   * @param files how many files the table holds (when `t` is a function)
   */
  static fromTable(t: FileTable | (() => FileTable), files?: number): FileStates {
    const s = new FileStates();
    if (typeof t === 'function') {
      s.pending = t;
      s.pendingSize = files ?? 0;
    } else s.fill(t);
    return s;
  }

  private fill(t: FileTable): void {
    for (let i = 0; i < t.paths.length; i++)
      this.map.set(t.paths[i]!, { size: t.size[i]!, mtime: t.mtime[i]!, crc: t.crc[i]! });
  }

  private get states(): Map<string, FileState> {
    if (this.pending !== null) {
      const t = this.pending;
      this.pending = null;
      this.fill(t());
    }
    return this.map;
  }

  /** How many files. */
  get size(): number {
    return this.pending !== null ? this.pendingSize : this.map.size;
  }

  /** Whether `rel` was read. */
  has(rel: string): boolean {
    return this.states.has(rel);
  }

  /** The paths read, in no particular order. */
  paths(): IterableIterator<string> {
    return this.states.keys();
  }

  /** The states as a table sorted by path (the order a snapshot keeps). */
  toTable(): FileTable {
    const t: FileTable = { paths: [], size: [], mtime: [], crc: [] };
    for (const rel of [...this.states.keys()].sort()) {
      const s = this.states.get(rel)!;
      t.paths.push(rel);
      t.size.push(s.size);
      t.mtime.push(s.mtime);
      t.crc.push(s.crc);
    }
    return t;
  }

  /**
   * Compare the file `abs` (`rel` under the root) with its state and bring `catalog` up to it:
   * nothing when its size and modification time are unchanged; its new lines when it grew and its
   * first bytes still have the recorded CRC; all of it when it is new. A file that cannot be stat'ed
   * counts as rewritten (it is gone or unreadable: the caller reads the directory again).
   * @throws IndexReadError when the file exists but cannot be read
   */
  check(abs: string, rel: string, catalog: Catalog, counts: LineCounts): FileCheck {
    const known = this.states.get(rel);
    if (known !== undefined) {
      let st: fs.Stats;
      try {
        st = fs.statSync(abs);
      } catch {
        return { kind: 'rewritten', why: `${rel} was removed` };
      }
      if (st.size === known.size && st.mtimeMs === known.mtime) return { kind: 'same' };
    }
    const { bytes, mtime } = readIndexFile(abs);
    let from = 0;
    if (known !== undefined) {
      if (bytes.length < known.size || zlib.crc32(bytes.subarray(0, known.size)) !== known.crc)
        return { kind: 'rewritten', why: `${rel} was rewritten` };
      from = known.size;
    }
    // the number, in the file, of the first line after `from`
    let firstLine = 1;
    for (let j = bytes.indexOf(0x0a); j >= 0 && j < from; j = bytes.indexOf(0x0a, j + 1)) firstLine++;
    if (from < bytes.length) readLines(catalog, bytes.toString('utf8', from), rel, firstLine, counts);
    this.states.set(rel, { size: bytes.length, mtime, crc: zlib.crc32(bytes) });
    return { kind: known === undefined ? 'new' : bytes.length > from ? 'appended' : 'touched' };
  }

  /**
   * Record `rel`'s state after the service appended to it (the catalog already holds the line).
   * @throws IndexReadError when the file cannot be read back
   */
  recordAppend(abs: string, rel: string): void {
    const { bytes, mtime } = readIndexFile(abs);
    this.states.set(rel, { size: bytes.length, mtime, crc: zlib.crc32(bytes) });
  }
}

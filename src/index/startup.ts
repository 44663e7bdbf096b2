/**
 * What `berm-indexd` reads before it listens. Without a snapshot: every file (./files.ts). With a
 * usable snapshot: the snapshot (./snapshot.ts) and the files the service noted it appended to
 * since, nothing else, so a start costs the snapshot's size and not the directory's; the other
 * files are checked after the service listens (./reconcile.ts). With a snapshot that cannot be
 * used: every file, and a snapshot is written once the service listens.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Catalog } from './catalog.js';
import { FileStates } from './file-states.js';
import { loadIndexDirectory, type LineCounts } from './files.js';
import { readAppendNotes, readSnapshotIndex } from './snapshot.js';

/** A catalog and what it was read from. */
export interface HeldIndex {
  catalog: Catalog;
  /** the files' states the catalog matches */
  states: FileStates;
  counts: LineCounts;
  /** close the snapshot file a catalog read from a snapshot reads entries from */
  release?: () => void;
}

/** What {@link loadForStart} read. */
export interface StartLoad extends HeldIndex {
  /** 'snapshot': read from the snapshot (the files still to be checked); 'files': read from every file */
  how: 'snapshot' | 'files';
  /** why every file was read although a snapshot was asked for */
  why?: string;
  /** files read at start: every file, or the noted ones */
  filesRead: number;
  /** whether the snapshot does not cover the catalog (write one once the check is done) */
  stale: boolean;
}

/**
 * Read every file of the index directory.
 * @throws IndexReadError when the directory or a file cannot be read
 */
export function loadFromFiles(root: string): HeldIndex & { files: number } {
  const l = loadIndexDirectory(root);
  return {
    catalog: l.catalog,
    states: FileStates.fromTable(l.table),
    counts: { skipped: l.skipped, skippedAt: l.skippedAt, takedowns: l.takedowns },
    files: l.files,
  };
}

/**
 * Read what a start needs (see the module comment).
 * @param snapshot the snapshot file, or undefined to read every file (and keep no snapshot)
 * @throws IndexReadError when the directory or a file cannot be read
 */
export function loadForStart(root: string, snapshot: string | undefined): StartLoad {
  const fromFiles = (why: string | undefined): StartLoad => {
    const l = loadFromFiles(root);
    return { ...l, how: 'files', why, filesRead: l.files, stale: snapshot !== undefined };
  };
  if (snapshot === undefined) return fromFiles(undefined);
  const snap = readSnapshotIndex(root, snapshot);
  if ('why' in snap) return fromFiles(snap.why);
  const notes = readAppendNotes(snapshot);
  try {
    for (const rel of notes) {
      const abs = path.join(root, ...rel.split('/'));
      // a noted file that is gone, or is no longer a plain file (the walk skips links and the
      // like): removed (read everything) if the snapshot knew it, else nothing
      let plain = false;
      try {
        plain = fs.lstatSync(abs).isFile();
      } catch {
        plain = false;
      }
      if (!plain) {
        if (!snap.states.has(rel)) continue;
        snap.release();
        return fromFiles(`${rel} was removed`);
      }
      const c = snap.states.check(abs, rel, snap.catalog, snap.counts);
      if (c.kind === 'rewritten') {
        snap.release();
        return fromFiles(c.why);
      }
    }
  } catch (e) {
    snap.release();
    throw e;
  }
  return { ...snap, how: 'snapshot', filesRead: notes.length, stale: notes.length > 0 };
}

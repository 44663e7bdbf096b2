/**
 * The check of an index directory against a catalog read from its snapshot, made in the background
 * while the service already answers: `berm-indexd` listens as soon as the snapshot is read (and the
 * files it appended to itself since are read again, see ./snapshot.ts), then walks the directory a
 * slice of time at a time, comparing every file with the state the catalog was read at
 * (./file-states.ts). Lines another writer appended while the service was down (a hand edit, a git
 * pull) join the catalog as they are found; a file rewritten or removed ends the check with its
 * reason, and the caller reads the whole directory again.
 *
 * Each file's stat, comparison and reading happen in one synchronous step on the service's thread,
 * as its own publishes do, so the two never interleave on one file.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Catalog } from './catalog.js';
import type { FileStates } from './file-states.js';
import { IndexReadError, type LineCounts } from './files.js';

/** What {@link checkInBackground} found. */
export interface CheckResult {
  /** `.json` files found */
  files: number;
  /** files that had new lines */
  appended: number;
  /** files the catalog did not know */
  added: number;
  /** files with the same bytes and another modification time */
  touched: number;
  /** wall time of the whole check, ms */
  ms: number;
  /** set when a file was rewritten or removed: the catalog must be read again from the files */
  rewritten?: string;
  /** set when the check was stopped (the service closed) before it ended */
  stopped?: true;
}

/** Options of {@link checkInBackground}. */
export interface CheckOptions {
  /** the longest the check holds the thread at a time, ms (default 8) */
  sliceMs?: number;
  /** polled between slices: true ends the check */
  stopped?: () => boolean;
}

const yieldTurn = (): Promise<void> => new Promise((r) => setImmediate(r));

/**
 * Check every `.json` file under `root` (at any depth, skipping `.git`) against `states`, bringing
 * `catalog` and `counts` up to the files, a slice of time at a time (see the module comment).
 * @throws IndexReadError when a directory or a file cannot be read
 */
export async function checkInBackground(
  root: string,
  states: FileStates,
  catalog: Catalog,
  counts: LineCounts,
  o: CheckOptions = {},
): Promise<CheckResult> {
  const t0 = performance.now();
  const slice = o.sliceMs ?? 8;
  const r: CheckResult = { files: 0, appended: 0, added: 0, touched: 0, ms: 0 };
  const seen = new Set<string>();
  const dirs: string[] = [root];
  let sliceStart = performance.now();
  const end = (): CheckResult => {
    r.ms = performance.now() - t0;
    return r;
  };
  while (dirs.length > 0) {
    if (performance.now() - sliceStart >= slice) {
      await yieldTurn();
      if (o.stopped?.()) return { ...end(), stopped: true };
      sliceStart = performance.now();
    }
    const dir = dirs.pop()!;
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
      const abs = path.join(dir, d.name);
      if (d.isDirectory()) {
        dirs.push(abs);
        continue;
      }
      if (!d.isFile() || !d.name.endsWith('.json')) continue;
      const rel = path.relative(root, abs).split(path.sep).join('/');
      seen.add(rel);
      r.files++;
      const c = states.check(abs, rel, catalog, counts);
      if (c.kind === 'rewritten') return { ...end(), rewritten: c.why };
      if (c.kind === 'appended') r.appended++;
      else if (c.kind === 'new') r.added++;
      else if (c.kind === 'touched') r.touched++;
    }
  }
  // a file the catalog knows and the walk did not find: removed, unless it was created after the
  // walk passed its directory (a publish)
  for (const rel of states.paths()) {
    if (seen.has(rel)) continue;
    if (!fs.existsSync(path.join(root, ...rel.split('/'))))
      return { ...end(), rewritten: `${rel} was removed` };
  }
  return end();
}

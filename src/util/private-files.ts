/**
 * Files and folders only their owner may read: a daemon's state (its due-set, journal, keys,
 * images and cache) holds tool arguments, results and stored values, so it is created mode 0600
 * (files) and 0700 (folders) whatever the umask, and state left with wider modes by an older
 * version is narrowed when it is opened again.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** Mode of a state file: read and write for its owner only. */
export const PRIVATE_FILE_MODE = 0o600;
/** Mode of a state folder: its owner only. */
export const PRIVATE_DIR_MODE = 0o700;

/**
 * Make sure `file` exists with mode 0600 (created empty when missing; an existing one keeps its
 * bytes and is narrowed to 0600), so that a library that creates it on open (SQLite) finds it
 * private, and so do the files SQLite derives from it (`-wal`, `-shm` take the database's mode).
 * @throws Error from the file system (a missing folder, permission denied)
 */
export function privateFile(file: string): void {
  fs.closeSync(fs.openSync(file, 'a', PRIVATE_FILE_MODE));
  narrow(file, PRIVATE_FILE_MODE);
}

/**
 * Make sure `dir` exists (with its missing parents) with mode 0700; an existing one is narrowed.
 * @throws Error from the file system
 */
export function privateDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  narrow(dir, PRIVATE_DIR_MODE);
}

/**
 * Narrow a state folder and what lies directly in it: the folder and its subfolders to 0700, its
 * files to 0600 (symbolic links are left alone: their targets are not the daemon's to change).
 * Entries that vanish meanwhile are skipped. One `lstat` per entry: meant for a folder of a few
 * dozen state files, not a cache of thousands.
 * @throws Error from the file system when `dir` itself cannot be changed
 */
export function narrowFolder(dir: string): void {
  narrow(dir, PRIVATE_DIR_MODE);
  for (const name of fs.readdirSync(dir)) {
    const p = path.join(dir, name);
    let st: fs.Stats;
    try {
      st = fs.lstatSync(p);
    } catch {
      continue;
    }
    if (st.isDirectory()) narrow(p, PRIVATE_DIR_MODE, st);
    else if (st.isFile()) narrow(p, PRIVATE_FILE_MODE, st);
  }
}

function narrow(p: string, mode: number, st: fs.Stats = fs.statSync(p)): void {
  if ((st.mode & 0o777) !== mode) fs.chmodSync(p, mode);
}

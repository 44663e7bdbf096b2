/**
 * One process per state directory. bermd's `--root` and `berm worker --state` hold a due-set, a
 * deployment index, a journal and temporary files that only one process may own: a second
 * process on the same directory re-delivers the first one's in-flight claims as interrupted,
 * replaces the deployment index without the first one's deploys, and deletes its half-written
 * images as leftovers of a crash. The default root (`~/.local/state/bermd`) makes that easy to do
 * by accident: two bermd on two ports.
 *
 * The lock is SQLite's own file lock (better-sqlite3 through src/store/sqlite-driver.ts, `locking_mode = EXCLUSIVE` and an open
 * `BEGIN EXCLUSIVE` on `<dir>/state.lock`): POSIX advisory locks, which the kernel releases when
 * the process ends however it ends (SIGKILL included), so a crash never leaves a stale lock and
 * needs no pid check. `<dir>/state.lock.owner` names the holder for the refusal's message only.
 * `berm wake add|ls|rm --state` do not take it: they are meant to reach a running `berm worker`'s
 * due-set (SQLite transactions keep that safe).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { openSqlite, type SqliteDatabase } from '../store/sqlite-driver.js';
import { PRIVATE_FILE_MODE, privateDir, privateFile } from '../util/private-files.js';

/** File names under the state directory. */
export const LOCK_FILE = 'state.lock';
const OWNER_FILE = 'state.lock.owner';

/** Another process holds the state directory; the message names it and the fix. */
export class StateLockError extends Error {
  override name = 'StateLockError';
}

/** An exclusive hold on a state directory, kept until {@link StateLock.release} or the process ends. */
export class StateLock {
  private constructor(
    private db: SqliteDatabase | null,
    /** the state directory */
    readonly dir: string,
  ) {}

  /**
   * Take the state directory `dir` (created when missing) for this process.
   * @param who the holder as the refusal will name it, e.g. `bermd --addr 127.0.0.1:7777`
   * @param option the flag that named `dir` (`--root`, `--state`), for the message
   * @throws StateLockError when another live process holds it (names that process from
   *   `state.lock.owner` and the fix); other errors (permissions, a full disk) as thrown
   */
  static acquire(dir: string, who: string, option: string): StateLock {
    privateDir(dir);
    privateFile(path.join(dir, LOCK_FILE));
    const db = openSqlite(path.join(dir, LOCK_FILE), { timeout: 0 });
    try {
      db.pragma('locking_mode = EXCLUSIVE');
      db.exec('BEGIN EXCLUSIVE');
    } catch (e) {
      db.close();
      if ((e as { code?: string }).code !== 'SQLITE_BUSY') throw e;
      let owner = 'another process';
      try {
        owner = fs.readFileSync(path.join(dir, OWNER_FILE), 'utf8').trim() || owner;
      } catch {
        // the holder has not written its name yet: the generic wording stands
      }
      throw new StateLockError(
        `${option} ${dir} is in use by ${owner}: one process owns a state directory (its due-set, ` +
          `deployments and journal); stop that one first, or give this one another ${option}`,
      );
    }
    fs.writeFileSync(path.join(dir, OWNER_FILE), `${who} (pid ${process.pid})\n`, {
      mode: PRIVATE_FILE_MODE,
    });
    return new StateLock(db, dir);
  }

  /**
   * The pid of the live process holding `dir`, or null when none does. The lock is probed with a
   * read (SQLite answers SQLITE_BUSY while a holder keeps its exclusive transaction open): a
   * holder exists exactly while its process lives, and then `state.lock.owner` names its pid. A
   * pid file left by a killed process therefore never counts, however its pid was reused since.
   * The probe holds a shared lock for the duration of one read.
   */
  static holder(dir: string): number | null {
    let db: SqliteDatabase;
    try {
      db = openSqlite(path.join(dir, LOCK_FILE), { timeout: 0, readonly: true, fileMustExist: true });
    } catch {
      return null; // no lock file: nobody ever held the directory
    }
    let held = false;
    try {
      db.prepare('SELECT count(*) FROM sqlite_master').get();
    } catch (e) {
      if ((e as { code?: string }).code !== 'SQLITE_BUSY') throw e;
      held = true;
    } finally {
      db.close();
    }
    if (!held) return null;
    let owner: string;
    try {
      owner = fs.readFileSync(path.join(dir, OWNER_FILE), 'utf8');
    } catch {
      return null; // held, but its holder has not named itself yet
    }
    const m = /\(pid (\d+)\)\s*$/.exec(owner);
    return m ? Number(m[1]) : null;
  }

  /** Let the directory go (idempotent); the process ending does the same. */
  release(): void {
    if (this.db === null) return;
    try {
      fs.rmSync(path.join(this.dir, OWNER_FILE), { force: true });
    } finally {
      this.db.close();
      this.db = null;
    }
  }
}

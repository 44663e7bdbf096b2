/**
 * The protocol door's harness subscriptions in SQLite: the rows of harness_subscriptions
 * (sqlite-schema.ts). The SQLite store keeps them in state.sqlite with the rest of the runtime's
 * state ({@link SqliteSubscriptions} on its connection); a bus used without a runtime (the
 * endpoint's own tests, an embedder) may keep them in a file of its own
 * ({@link openSubscriptionFile}). The bus that uses them (src/protocol/events.ts) owns the rules
 * (limits, once, delivery); this module only reads and writes rows, on the thread that owns the
 * queue (one writer).
 *
 * A berm before the store kept them always kept them in `<state>/subscriptions.sqlite`:
 * {@link importSubscriptionFile} takes that file into the runtime's store once and renames it aside.
 */
import * as fs from 'node:fs';
import { privateFile } from '../util/private-files.js';
import { openSqlite, type SqliteDatabase } from './sqlite-driver.js';
import { createSubscriptionSchema } from './sqlite-schema.js';
import type { Authority } from '../contract/index.js';
import type { SubscriptionImport, SubscriptionRecord, SubscriptionStore } from './store.js';

/** One row of harness_subscriptions. `authority` is JSON; `once` 0 or 1; `created_at` ms. */
interface SubscriptionRow {
  id: number;
  source: string;
  harness: string;
  once: number;
  authority: string;
  created_at: number;
}

function record(r: SubscriptionRow): SubscriptionRecord {
  return {
    id: r.id,
    source: r.source,
    harness: r.harness,
    once: r.once !== 0,
    authority: JSON.parse(r.authority) as Authority,
    createdAt: r.created_at,
  };
}

/**
 * The subscription rows of one SQLite database (see the module comment). A subscription is
 * acknowledged on its row, so in state.sqlite (whose due-set commits with synchronous = NORMAL)
 * its writes commit with synchronous = FULL, as the deployments' do: one fsync each.
 */
export class SqliteSubscriptions implements SubscriptionStore {
  /**
   * Use the table harness_subscriptions of `db`, which the caller created (createSubscriptionSchema).
   * @param synced commit each write with synchronous = FULL, then set NORMAL back (state.sqlite)
   */
  constructor(
    protected readonly db: SqliteDatabase,
    private readonly synced = false,
  ) {}

  /** Run the write `f` (one transaction), synced when asked. */
  private write<T>(f: () => T): T {
    if (!this.synced) return f();
    this.db.pragma('synchronous = FULL');
    try {
      return f();
    } finally {
      this.db.pragma('synchronous = NORMAL');
    }
  }

  count(harness: string): number {
    return (
      this.db.prepare('SELECT COUNT(*) AS n FROM harness_subscriptions WHERE harness = ?').get(harness) as {
        n: number;
      }
    ).n;
  }

  add(s: Omit<SubscriptionRecord, 'id'>): number {
    const info = this.write(() =>
      this.db
        .prepare(
          'INSERT INTO harness_subscriptions (source, harness, once, authority, created_at) VALUES (?, ?, ?, ?, ?)',
        )
        .run(s.source, s.harness, s.once ? 1 : 0, JSON.stringify(s.authority), s.createdAt),
    );
    return Number(info.lastInsertRowid);
  }

  remove(id: number, harness?: string): boolean {
    const r = this.write(() =>
      harness === undefined
        ? this.db.prepare('DELETE FROM harness_subscriptions WHERE id = ?').run(id)
        : this.db.prepare('DELETE FROM harness_subscriptions WHERE id = ? AND harness = ?').run(id, harness),
    );
    return r.changes > 0;
  }

  list(harness?: string): SubscriptionRecord[] {
    const rows =
      harness === undefined
        ? this.db.prepare('SELECT * FROM harness_subscriptions ORDER BY id').all()
        : this.db.prepare('SELECT * FROM harness_subscriptions WHERE harness = ? ORDER BY id').all(harness);
    return (rows as SubscriptionRow[]).map(record);
  }

  bySource(source: string): SubscriptionRecord[] {
    const rows = this.db
      .prepare('SELECT * FROM harness_subscriptions WHERE source = ? ORDER BY id')
      .all(source);
    return (rows as SubscriptionRow[]).map(record);
  }

  importRecords(records: readonly SubscriptionRecord[]): SubscriptionImport {
    const done: SubscriptionImport = { kept: 0, renumbered: [], present: 0 };
    const equal = this.db.prepare(
      'SELECT 1 FROM harness_subscriptions WHERE source = ? AND harness = ? AND once = ? AND authority = ? AND created_at = ?',
    );
    const taken = this.db.prepare('SELECT 1 FROM harness_subscriptions WHERE id = ?');
    const put = this.db.prepare(
      'INSERT INTO harness_subscriptions (id, source, harness, once, authority, created_at) VALUES (?, ?, ?, ?, ?, ?)',
    );
    const all = this.db.transaction(() => {
      for (const r of records) {
        const row = [r.source, r.harness, r.once ? 1 : 0, JSON.stringify(r.authority), r.createdAt];
        if (equal.get(...row) !== undefined) done.present++;
        else if (taken.get(r.id) === undefined) {
          put.run(r.id, ...row);
          done.kept++;
        } else done.renumbered.push([r.id, Number(put.run(null, ...row).lastInsertRowid)]);
      }
    });
    // immediate: it reads before it writes (see SqliteTransaction in sqlite-driver.ts)
    this.write(() => all.immediate());
    return done;
  }
}

/** A {@link SqliteSubscriptions} over a file of its own, which it closes. */
export interface SubscriptionFile extends SubscriptionStore {
  /** Close the file. */
  close(): void;
}

/**
 * Open (creating when missing, owner-only, WAL) the subscriptions file `database` (":memory:" for
 * none), for a bus used without a runtime's store.
 * @throws better-sqlite3's errors (a missing folder, permissions, a corrupt file)
 */
export function openSubscriptionFile(database: string): SubscriptionFile {
  if (database !== ':memory:') privateFile(database);
  const db = openSqlite(database);
  try {
    db.pragma('journal_mode = WAL');
    createSubscriptionSchema(db);
  } catch (e) {
    db.close();
    throw e;
  }
  return new FileSubscriptions(db);
}

class FileSubscriptions extends SqliteSubscriptions implements SubscriptionFile {
  close(): void {
    this.db.close();
  }
}

/** What {@link importSubscriptionFile} did. */
export interface FileImport extends SubscriptionImport {
  /** where the file was renamed to */
  renamedTo: string;
}

/**
 * Import the subscriptions file `file` a berm before this one kept (`<state>/subscriptions.sqlite`)
 * into `store`, then rename it (and a WAL left beside it) to `<file>.imported`, so a boot imports it
 * once. Crashed between the import and the rename, the next boot imports it again and stores
 * nothing twice ({@link SubscriptionStore.importRecords}).
 * @returns what was imported, or null when there is no such file
 * @throws Error naming the file and the fix when it is not a subscriptions file (nothing is
 *   imported or renamed); the store's write error (nothing imported, the file stays)
 */
export function importSubscriptionFile(file: string, store: SubscriptionStore): FileImport | null {
  if (!fs.existsSync(file)) return null;
  let records: SubscriptionRecord[];
  try {
    const db = openSqlite(file, { fileMustExist: true });
    try {
      records = new SqliteSubscriptions(db).list();
    } finally {
      db.close(); // the last connection: SQLite moves the WAL into the file and removes it
    }
  } catch (e) {
    throw new Error(
      `${file}: cannot read the protocol door's subscriptions from it (${(e as Error).message}); ` +
        'fix: restore the file a berm before this one wrote there, or move it aside to start without its subscriptions',
    );
  }
  const done = store.importRecords(records);
  const renamedTo = `${file}.imported`;
  // SQLite finds a database's WAL by its name + "-wal": moved along, a WAL left keeps its pair
  for (const suffix of ['-wal', '-shm']) {
    if (fs.existsSync(file + suffix)) fs.renameSync(file + suffix, renamedTo + suffix);
  }
  fs.renameSync(file, renamedTo);
  return { ...done, renamedTo };
}

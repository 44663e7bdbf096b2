/**
 * The protocol door's harness subscriptions in SQLite (WAL), so they survive a restart: the rows
 * of harness_subscriptions (sqlite-schema.ts). The bus that uses them (src/protocol/events.ts)
 * owns the rules (limits, once, delivery); this module only reads and writes rows, on the thread
 * that owns the queue (one writer).
 */
import { privateFile } from '../util/private-files.js';
import { openSqlite, type SqliteDatabase } from './sqlite-driver.js';
import { createSubscriptionSchema } from './sqlite-schema.js';

/** One row of harness_subscriptions. `authority` is JSON; `once` 0 or 1; `created_at` ms. */
export interface SubscriptionRow {
  id: number;
  source: string;
  harness: string;
  once: number;
  authority: string;
  created_at: number;
}

/** The subscription rows of one SQLite file (see the module comment). */
export class SubscriptionTable {
  private readonly db: SqliteDatabase;

  /**
   * Open (creating when missing, owner-only) the file `database` (":memory:" for none).
   * @throws better-sqlite3's errors (a missing folder, permissions, a corrupt file)
   */
  constructor(database: string) {
    if (database !== ':memory:') privateFile(database);
    this.db = openSqlite(database);
    this.db.pragma('journal_mode = WAL');
    createSubscriptionSchema(this.db);
  }

  /** How many subscriptions `harness` holds. */
  count(harness: string): number {
    return (
      this.db.prepare('SELECT COUNT(*) AS n FROM harness_subscriptions WHERE harness = ?').get(harness) as {
        n: number;
      }
    ).n;
  }

  /** Insert a subscription; returns its id. `authority` is the JSON text of the subscriber's. */
  insert(source: string, harness: string, once: boolean, authority: string, createdAt: number): number {
    const info = this.db
      .prepare(
        'INSERT INTO harness_subscriptions (source, harness, once, authority, created_at) VALUES (?, ?, ?, ?, ?)',
      )
      .run(source, harness, once ? 1 : 0, authority, createdAt);
    return Number(info.lastInsertRowid);
  }

  /** Remove subscription `id` (only if it targets `harness`, when given). True when removed. */
  delete(id: number, harness?: string): boolean {
    const r =
      harness === undefined
        ? this.db.prepare('DELETE FROM harness_subscriptions WHERE id = ?').run(id)
        : this.db.prepare('DELETE FROM harness_subscriptions WHERE id = ? AND harness = ?').run(id, harness);
    return r.changes > 0;
  }

  /** Rows, of one harness when given, in id order. */
  list(harness?: string): SubscriptionRow[] {
    return (
      harness === undefined
        ? this.db.prepare('SELECT * FROM harness_subscriptions ORDER BY id').all()
        : this.db.prepare('SELECT * FROM harness_subscriptions WHERE harness = ? ORDER BY id').all(harness)
    ) as SubscriptionRow[];
  }

  /** Rows whose source is exactly `source`, in id order. */
  bySource(source: string): SubscriptionRow[] {
    return this.db
      .prepare('SELECT * FROM harness_subscriptions WHERE source = ? ORDER BY id')
      .all(source) as SubscriptionRow[];
  }

  /** Close the database. */
  close(): void {
    this.db.close();
  }
}

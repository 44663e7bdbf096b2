/**
 * The storage capability's keys in a SQLite file (better-sqlite3, WAL; synchronous, which suits a
 * guest blocked in its ecall). One connection per file per thread, opened on first use and kept;
 * the table is berm_kv of sqlite-schema.ts. Keys and values are bytes; every row is keyed by the
 * harness, which the caller takes from the invocation, never from the guest.
 */
import { openSqlite, type SqliteDatabase, type SqliteStatement } from './sqlite-driver.js';
import { createKvSchema } from './sqlite-schema.js';

/** The file name of a private in-memory database (one per thread). */
export const MEMORY_DATABASE = ':memory:';

/** One open key-value file (see {@link openKvFile}). */
export interface KvFile {
  /** the value of `key`, or undefined when absent */
  get(harness: string, key: Uint8Array): Uint8Array | undefined;
  /**
   * Write `key` unless the harness would then hold more than `quota` bytes of keys and values;
   * the check and the write are one transaction, so two writers cannot both squeeze under it.
   * @returns null when written, else `{ after }`: the bytes the harness would have held
   */
  setWithin(harness: string, key: Uint8Array, value: Uint8Array, quota: number): { after: number } | null;
  /** remove `key` (an absent key is no error) */
  delete(harness: string, key: Uint8Array): void;
}

interface Open {
  db: SqliteDatabase;
  get: SqliteStatement;
  set: SqliteStatement;
  del: SqliteStatement;
  used: SqliteStatement;
  old: SqliteStatement;
}

const files = new Map<string, Open>();
const buf = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

/**
 * The key-value file `file` ({@link MEMORY_DATABASE} for an in-memory one), opened with the busy
 * timeout `busyTimeoutMs` (ms) on first use and kept until {@link closeKvFiles}.
 * @throws better-sqlite3's errors (a missing folder, permissions, a corrupt file)
 */
export function openKvFile(file: string, busyTimeoutMs: number): KvFile {
  let s = files.get(file);
  if (!s) {
    const db = openSqlite(file, { timeout: busyTimeoutMs });
    if (file !== MEMORY_DATABASE) db.pragma('journal_mode = WAL');
    createKvSchema(db);
    s = {
      db,
      get: db.prepare('SELECT value FROM berm_kv WHERE harness = ? AND key = ?'),
      set: db.prepare(
        'INSERT INTO berm_kv (harness, key, value) VALUES (?, ?, ?) ON CONFLICT DO UPDATE SET value = excluded.value',
      ),
      del: db.prepare('DELETE FROM berm_kv WHERE harness = ? AND key = ?'),
      used: db.prepare(
        'SELECT COALESCE(SUM(length(key) + length(value)), 0) AS n FROM berm_kv WHERE harness = ?',
      ),
      old: db.prepare('SELECT length(key) + length(value) AS n FROM berm_kv WHERE harness = ? AND key = ?'),
    };
    files.set(file, s);
  }
  const o = s;
  return {
    get(harness, key) {
      const row = o.get.get(harness, buf(key)) as { value: Buffer } | undefined;
      return row ? new Uint8Array(row.value) : undefined;
    },
    setWithin(harness, key, value, quota) {
      // immediate: it reads the harness's bytes before it writes (see SqliteTransaction): another
      // writer of the file (a worker, a process, a checkpoint resetting the WAL) is waited for
      const write = o.db.transaction((): { after: number } | null => {
        const used = (o.used.get(harness) as { n: number }).n;
        const old = (o.old.get(harness, buf(key)) as { n: number } | undefined)?.n ?? 0;
        const after = used - old + key.length + value.length;
        if (after > quota) return { after };
        o.set.run(harness, buf(key), buf(value));
        return null;
      });
      return write.immediate();
    },
    delete(harness, key) {
      o.del.run(harness, buf(key));
    },
  };
}

/** Close every key-value file this thread opened (tests; orderly shutdown). */
export function closeKvFiles(): void {
  for (const s of files.values()) s.db.close();
  files.clear();
}

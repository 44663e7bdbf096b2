/**
 * The SQLite driver (better-sqlite3), loaded on first use and typed here once: the one module that
 * loads it. better-sqlite3 ships no type declarations and @types/better-sqlite3 is not a
 * dependency, so the small surface berm uses is declared below. Loading it lazily keeps it out of
 * processes that never open a database (the capability registry, a CLI tool call).
 */
import { createRequire } from 'node:module';

/** A prepared statement (better-sqlite3's Statement, the part berm uses). */
export interface SqliteStatement {
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  run(...params: unknown[]): { changes: number; lastInsertRowid: number | bigint };
  iterate(...params: unknown[]): IterableIterator<unknown>;
  raw(on?: boolean): SqliteStatement;
}

/**
 * A function that runs as one transaction (better-sqlite3's): called, inside BEGIN (deferred: the
 * write lock is taken by the first write); through `immediate`, inside BEGIN IMMEDIATE (the write
 * lock first, so what it reads stays as read until it commits). A deferred transaction that reads
 * before it writes cannot wait for the lock at that write (SQLite answers SQLITE_BUSY at once):
 * such a transaction is run immediate, and then waits up to the busy timeout for the lock.
 */
export type SqliteTransaction<A extends unknown[], R> = ((...args: A) => R) & { immediate(...args: A): R };

/** An open database (better-sqlite3's Database, the part berm uses). */
export interface SqliteDatabase {
  prepare(sql: string): SqliteStatement;
  exec(sql: string): void;
  pragma(sql: string): unknown;
  close(): void;
  transaction<A extends unknown[], R>(fn: (...args: A) => R): SqliteTransaction<A, R>;
}

/** Options of {@link openSqlite}, as better-sqlite3 takes them. */
export interface SqliteOpenOptions {
  /** busy timeout, ms: how long a statement waits for another connection's lock */
  timeout?: number;
  readonly?: boolean;
  /** refuse to create the file */
  fileMustExist?: boolean;
}

type DatabaseCtor = new (file: string, options?: SqliteOpenOptions) => SqliteDatabase;
let ctor: DatabaseCtor | null = null;

/**
 * Open the SQLite database `file` (":memory:" for a private in-memory one).
 * @throws better-sqlite3's errors as thrown (a missing folder, permissions, SQLITE_BUSY,
 *   SQLITE_CANTOPEN with `fileMustExist`); their `code` is SQLite's
 */
export function openSqlite(file: string, options?: SqliteOpenOptions): SqliteDatabase {
  ctor ??= createRequire(import.meta.url)('better-sqlite3') as DatabaseCtor;
  return new ctor(file, options);
}

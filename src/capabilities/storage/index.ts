/**
 * The storage capability: a key-value store in SQLite via better-sqlite3 (or PostgreSQL when the
 * database is a postgres:// URL: pg-kv.ts)
 * (synchronous, which suits a guest blocked in its ecall).
 *   berm.get    (key)        -> one field, the value; zero fields when the key is absent
 *   berm.set    (key, value) -> zero fields
 *   berm.delete (key)        -> zero fields (deleting an absent key is not an error)
 * Every row is keyed by the calling harness's declared name, taken from the context and never
 * from the guest, so one harness can never read or change another's keys. Note the wire
 * ambiguity: an empty value stages like an absent key (src/wire/fields.ts).
 */
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { runSync } from '../../sync/bridge.js';
import {
  arity,
  boundedTimeout,
  callDeadline,
  deadlinePassed,
  defineCapability,
  guarded,
  limitsOf,
  type Capability,
  type CapabilityContext,
  type CapabilityReply,
  type GrantEnv,
  type GrantProblem,
} from '../types.js';
import type { KvJob } from '../../store/pg-kv.js';

// better-sqlite3 ships no type declarations and @types/better-sqlite3 is not a dependency, so the
// small surface used here is typed locally.
interface Statement {
  get(...params: unknown[]): unknown;
  run(...params: unknown[]): { changes: number };
}
interface Database {
  prepare(sql: string): Statement;
  exec(sql: string): void;
  pragma(sql: string): unknown;
  close(): void;
  transaction<A extends unknown[], R>(fn: (...args: A) => R): (...args: A) => R;
}
type DatabaseCtor = new (file: string, options?: { timeout?: number }) => Database;
let sqliteCtor: DatabaseCtor | null = null;
/** better-sqlite3, loaded when a store is first opened (not with the capability registry). */
function sqlite(): DatabaseCtor {
  return (sqliteCtor ??= createRequire(import.meta.url)('better-sqlite3') as DatabaseCtor);
}

/**
 * True when `database` names a PostgreSQL database rather than a SQLite file. Here, not taken from
 * pg-kv.ts: importing that job module on the main thread would load the pg client with it.
 */
function isPostgresUrl(database: string): boolean {
  return /^postgres(ql)?:\/\//.test(database);
}

// A `database` that is a postgres:// URL keeps the keys in PostgreSQL (several daemons share
// them): each call goes through the synchronous bridge to the job module pg-kv.ts.
const PG_JOB = new URL(
  `../../store/pg-kv${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`,
  import.meta.url,
);

/**
 * Longest wait for PostgreSQL on one call, ms, and never past the call's deadline (CALL_DEADLINE);
 * past either the call is refused (the guest goes on).
 */
export const STORAGE_PG_TIMEOUT_MS = 10_000;

/**
 * One request to PostgreSQL through the synchronous bridge, bounded by {@link STORAGE_PG_TIMEOUT_MS}
 * and by the call's deadline: a database that does not answer in time (down, or a row or the
 * harness's quota lock held by another session) costs the call at most what is left of its
 * deadline, and the refusal says so (`the call's deadline passed while waiting for PostgreSQL`).
 * The job's signal aborts then and the job drops its connection, so the server rolls back a write
 * cut off mid-transaction.
 */
function pgCall(
  name: string,
  job: KvJob,
  ctx: CapabilityContext,
): CapabilityReply | { value: Uint8Array | null | { quotaAfter: number } } {
  const t0 = Date.now();
  const deadline = callDeadline(ctx);
  const r = runSync<Uint8Array | null | { quotaAfter: number }>(
    PG_JOB,
    'kv',
    job,
    boundedTimeout(ctx, STORAGE_PG_TIMEOUT_MS),
    deadline,
  );
  if (r.ok) return { value: r.value };
  return {
    refused: `${name}: ${deadlinePassed(deadline, t0, 'PostgreSQL', r.error) ?? `PostgreSQL: ${r.error}`}`,
  };
}

function pgUrl(ctx: CapabilityContext): string | null {
  const db = ctx.grant.database;
  return db !== undefined && isPostgresUrl(db) ? db : null;
}

/** Limits of the storage capability and their defaults (bytes, ms). */
export const STORAGE_LIMITS = Object.freeze({
  /** largest key */
  storageMaxKey: 1024,
  /** largest value */
  storageMaxValue: 1024 * 1024,
  /** total bytes of keys and values of one harness */
  storageQuota: 64 * 1024 * 1024,
  /** SQLite busy timeout */
  storageBusyTimeoutMs: 5_000,
});

/** Database file used when the grant names none: one in-memory database per process. */
export const MEMORY_DATABASE = ':memory:';

interface Store {
  db: Database;
  get: Statement;
  set: Statement;
  del: Statement;
  used: Statement;
  old: Statement;
}

const stores = new Map<string, Store>();

function open(file: string, busyTimeoutMs: number): Store {
  let s = stores.get(file);
  if (s) return s;
  const Sqlite = sqlite();
  const db = new Sqlite(file, { timeout: busyTimeoutMs });
  if (file !== MEMORY_DATABASE) db.pragma('journal_mode = WAL');
  db.exec(
    'CREATE TABLE IF NOT EXISTS berm_kv (harness TEXT NOT NULL, key BLOB NOT NULL, value BLOB NOT NULL, ' +
      'PRIMARY KEY (harness, key)) WITHOUT ROWID',
  );
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
  stores.set(file, s);
  return s;
}

/** Close every database opened by this module (tests; orderly shutdown). */
export function closeStores(): void {
  for (const s of stores.values()) s.db.close();
  stores.clear();
}

function storeOf(ctx: CapabilityContext): Store {
  return open(ctx.grant.database ?? MEMORY_DATABASE, limitsOf(ctx, STORAGE_LIMITS).storageBusyTimeoutMs);
}

function checkKey(name: string, key: Uint8Array, ctx: CapabilityContext): CapabilityReply | null {
  const max = limitsOf(ctx, STORAGE_LIMITS).storageMaxKey;
  if (key.length === 0) return { refused: `${name}: key is empty` };
  if (key.length > max) return { refused: `${name}: key is ${key.length} bytes; the limit is ${max}` };
  return null;
}

const buf = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

function get(fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply {
  const bad = arity('berm.get', fields, 'key', 1) ?? checkKey('berm.get', fields[0]!, ctx);
  if (bad) return bad;
  const url = pgUrl(ctx);
  if (url !== null) {
    const r = pgCall('berm.get', { url, op: 'get', harness: ctx.harness, key: fields[0]! }, ctx);
    if (!('value' in r)) return r;
    return { fields: r.value instanceof Uint8Array ? [r.value] : [] };
  }
  const row = storeOf(ctx).get.get(ctx.harness, buf(fields[0]!)) as { value: Buffer } | undefined;
  return { fields: row ? [new Uint8Array(row.value)] : [] };
}

function set(fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply {
  const bad = arity('berm.set', fields, 'key, value', 2) ?? checkKey('berm.set', fields[0]!, ctx);
  if (bad) return bad;
  const [key, value] = [fields[0]!, fields[1]!];
  const limits = limitsOf(ctx, STORAGE_LIMITS);
  if (value.length > limits.storageMaxValue) {
    return { refused: `berm.set: value is ${value.length} bytes; the limit is ${limits.storageMaxValue}` };
  }
  const url = pgUrl(ctx);
  if (url !== null) {
    const r = pgCall(
      'berm.set',
      {
        url,
        op: 'set',
        harness: ctx.harness,
        key,
        value,
        quota: limits.storageQuota,
      },
      ctx,
    );
    if (!('value' in r)) return r;
    if (r.value !== null && !(r.value instanceof Uint8Array)) {
      return {
        refused: `berm.set: ${ctx.harness} would store ${r.value.quotaAfter} bytes; the quota is ${limits.storageQuota}`,
      };
    }
    return { fields: [] };
  }
  const s = storeOf(ctx);
  // Quota check and write in one transaction so two writers cannot both squeeze under it.
  return s.db.transaction((): CapabilityReply => {
    const used = (s.used.get(ctx.harness) as { n: number }).n;
    const old = (s.old.get(ctx.harness, buf(key)) as { n: number } | undefined)?.n ?? 0;
    const after = used - old + key.length + value.length;
    if (after > limits.storageQuota) {
      return {
        refused: `berm.set: ${ctx.harness} would store ${after} bytes; the quota is ${limits.storageQuota}`,
      };
    }
    s.set.run(ctx.harness, buf(key), buf(value));
    return { fields: [] };
  })();
}

function del(fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply {
  const bad = arity('berm.delete', fields, 'key', 1) ?? checkKey('berm.delete', fields[0]!, ctx);
  if (bad) return bad;
  const url = pgUrl(ctx);
  if (url !== null) {
    const r = pgCall('berm.delete', { url, op: 'delete', harness: ctx.harness, key: fields[0]! }, ctx);
    return 'value' in r ? { fields: [] } : r;
  }
  storeOf(ctx).del.run(ctx.harness, buf(fields[0]!));
  return { fields: [] };
}

/**
 * Prepare a declared `database`: resolve it against the declaration's folder; with
 * `env.checkFiles`, refuse one whose folder does not exist (SQLite would fail every call) or that
 * names a directory.
 */
function prepareDatabase(values: Record<string, unknown>, env: GrantEnv) {
  if (values.database === undefined) return { grant: {}, problems: [] };
  if (isPostgresUrl(values.database as string)) return { grant: { database: values.database }, problems: [] };
  const database = path.resolve(env.dir, values.database as string);
  const problems: GrantProblem[] = [];
  if (env.checkFiles) {
    const folder = path.dirname(database);
    const kind = (p: string) => {
      try {
        return fs.statSync(p).isDirectory() ? 'dir' : 'other';
      } catch {
        return 'missing';
      }
    };
    if (kind(folder) !== 'dir') {
      problems.push({
        key: 'database',
        problem: `database folder ${folder} is not an existing directory`,
        fix: `create it (mkdir -p ${folder}) or correct the path`,
      });
    } else if (kind(database) === 'dir') {
      problems.push({
        key: 'database',
        problem: `database ${database} is a directory`,
        fix: 'name a file, e.g. database = "state/kv.sqlite"',
      });
    }
  }
  return { grant: { database }, problems };
}

/** The storage capability: see the module comment and docs/capabilities.md. */
export const storageCapability: Capability = defineCapability({
  name: 'storage',
  calls: {
    'berm.get': (f, c) => guarded('berm.get', () => get(f, c)),
    'berm.set': (f, c) => guarded('berm.set', () => set(f, c)),
    'berm.delete': (f, c) => guarded('berm.delete', () => del(f, c)),
  },
  grant: {
    // Optional: without it, one in-memory database per process.
    schema: { type: 'object', properties: { database: { type: 'string', minLength: 1 } } },
    fixes: { database: 'write database = "state/kv.sqlite" or remove it' },
    prepare: prepareDatabase,
  },
  limits: STORAGE_LIMITS,
});

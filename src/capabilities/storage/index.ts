/**
 * The storage capability: a key-value store in SQLite (src/store/sqlite-kv.ts) or PostgreSQL when
 * the database is a postgres:// URL (src/store/pg-kv.ts, through the synchronous bridge)
 * (synchronous, which suits a guest blocked in its ecall).
 *   berm.get    (key)        -> one field, the value; zero fields when the key is absent
 *   berm.set    (key, value) -> zero fields
 *   berm.delete (key)        -> zero fields (deleting an absent key is not an error)
 * Every row is keyed by the calling harness's declared name, taken from the context and never
 * from the guest, so one harness can never read or change another's keys. Note the wire
 * ambiguity: an empty value stages like an absent key (src/wire/fields.ts).
 */
import * as fs from 'node:fs';
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
import { MEMORY_DATABASE, closeKvFiles, openKvFile, type KvFile } from '../../store/sqlite-kv.js';

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
export { MEMORY_DATABASE };

/** Close every database opened by this module (tests; orderly shutdown). */
export function closeStores(): void {
  closeKvFiles();
}

function storeOf(ctx: CapabilityContext): KvFile {
  return openKvFile(
    ctx.grant.database ?? MEMORY_DATABASE,
    limitsOf(ctx, STORAGE_LIMITS).storageBusyTimeoutMs,
  );
}

function checkKey(name: string, key: Uint8Array, ctx: CapabilityContext): CapabilityReply | null {
  const max = limitsOf(ctx, STORAGE_LIMITS).storageMaxKey;
  if (key.length === 0) return { refused: `${name}: key is empty` };
  if (key.length > max) return { refused: `${name}: key is ${key.length} bytes; the limit is ${max}` };
  return null;
}

function get(fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply {
  const bad = arity('berm.get', fields, 'key', 1) ?? checkKey('berm.get', fields[0]!, ctx);
  if (bad) return bad;
  const url = pgUrl(ctx);
  if (url !== null) {
    const r = pgCall('berm.get', { url, op: 'get', harness: ctx.harness, key: fields[0]! }, ctx);
    if (!('value' in r)) return r;
    return { fields: r.value instanceof Uint8Array ? [r.value] : [] };
  }
  const value = storeOf(ctx).get(ctx.harness, fields[0]!);
  return { fields: value ? [value] : [] };
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
  // Quota check and write in one transaction so two writers cannot both squeeze under it.
  const over = storeOf(ctx).setWithin(ctx.harness, key, value, limits.storageQuota);
  if (over !== null) {
    return {
      refused: `berm.set: ${ctx.harness} would store ${over.after} bytes; the quota is ${limits.storageQuota}`,
    };
  }
  return { fields: [] };
}

function del(fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply {
  const bad = arity('berm.delete', fields, 'key', 1) ?? checkKey('berm.delete', fields[0]!, ctx);
  if (bad) return bad;
  const url = pgUrl(ctx);
  if (url !== null) {
    const r = pgCall('berm.delete', { url, op: 'delete', harness: ctx.harness, key: fields[0]! }, ctx);
    return 'value' in r ? { fields: [] } : r;
  }
  storeOf(ctx).delete(ctx.harness, fields[0]!);
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

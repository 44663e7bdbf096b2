/**
 * The storage capability (upstream berm issue 6): a key-value store in SQLite via better-sqlite3
 * (synchronous, which suits a guest blocked in its ecall).
 *   berm.get    (key)        -> one field, the value; zero fields when the key is absent
 *   berm.set    (key, value) -> zero fields
 *   berm.delete (key)        -> zero fields (deleting an absent key is not an error)
 * Every row is keyed by the calling harness's declared name, taken from the context and never
 * from the guest, so one harness can never read or change another's keys. Note the wire
 * ambiguity: an empty value stages like an absent key (src/wire/fields.ts).
 */
import { createRequire } from 'node:module';
import {
  arity,
  guarded,
  limitsOf,
  type Capability,
  type CapabilityContext,
  type CapabilityReply,
} from '../types.js';

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
const Sqlite = createRequire(import.meta.url)('better-sqlite3') as DatabaseCtor;

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
  return open(ctx.grant.database ?? MEMORY_DATABASE, limitsOf(ctx).storageBusyTimeoutMs);
}

function checkKey(name: string, key: Uint8Array, ctx: CapabilityContext): CapabilityReply | null {
  const max = limitsOf(ctx).storageMaxKey;
  if (key.length === 0) return { refused: `${name}: key is empty` };
  if (key.length > max) return { refused: `${name}: key is ${key.length} bytes; the limit is ${max}` };
  return null;
}

const buf = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

function get(fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply {
  const bad = arity('berm.get', fields, 'key', 1) ?? checkKey('berm.get', fields[0]!, ctx);
  if (bad) return bad;
  const row = storeOf(ctx).get.get(ctx.harness, buf(fields[0]!)) as { value: Buffer } | undefined;
  return { fields: row ? [new Uint8Array(row.value)] : [] };
}

function set(fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply {
  const bad = arity('berm.set', fields, 'key, value', 2) ?? checkKey('berm.set', fields[0]!, ctx);
  if (bad) return bad;
  const [key, value] = [fields[0]!, fields[1]!];
  const limits = limitsOf(ctx);
  if (value.length > limits.storageMaxValue) {
    return { refused: `berm.set: value is ${value.length} bytes; the limit is ${limits.storageMaxValue}` };
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
  storeOf(ctx).del.run(ctx.harness, buf(fields[0]!));
  return { fields: [] };
}

/** The storage capability: see the module comment and docs/capabilities.md. */
export const storageCapability: Capability = {
  name: 'storage',
  calls: {
    'berm.get': (f, c) => guarded('berm.get', () => get(f, c)),
    'berm.set': (f, c) => guarded('berm.set', () => set(f, c)),
    'berm.delete': (f, c) => guarded('berm.delete', () => del(f, c)),
  },
};

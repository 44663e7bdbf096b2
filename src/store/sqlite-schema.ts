/**
 * Every SQLite table berm keeps, declared here once (src/store/pg-schema.ts is the PostgreSQL
 * counterpart). Three files, each with its own tables:
 *
 * <state>/state.sqlite (the runtime's store, sqlite-store.ts), version {@link STATE_SCHEMA_VERSION}
 * in PRAGMA user_version:
 *   wakes        (seq INTEGER PRIMARY KEY AUTOINCREMENT, id UNIQUE, kind, harness, entry, when_ms,
 *                 payload, armed_by, chain, depth, armed_at, attempt, authority)
 *   claims       (the wake's columns) PRIMARY KEY (id, seq): fired, outcome not yet journaled
 *   deployments  (name PRIMARY KEY, sha256, elf, capabilities, grant_json, deployed_at): elf NULL
 *                when the image is a content-addressed file outside the database (schema 4)
 *   dead         (id PRIMARY KEY, the claim's columns, reason, last_error, attempts, dead_at): the
 *                dead-letter set (schema 3)
 *   reference_imports (name PRIMARY KEY, sha256): the upstream images imported into the
 *                deployments, by name (schema 5; a `deployments/reference-imports.json` before)
 *   harness_subscriptions (id, source, harness, once, authority, created_at), indexed by source:
 *                the protocol door's subscriptions (schema 6; a `subscriptions.sqlite` of the
 *                door's own before, with this table, imported once: subscriptions.ts)
 * a key-value file (the storage capability's `database`, and <state>/kv.sqlite):
 *   berm_kv      (harness, key, value) PRIMARY KEY (harness, key), WITHOUT ROWID
 * a subscriptions file of a bus used without a runtime's store: harness_subscriptions
 */
import type { SqliteDatabase } from './sqlite-driver.js';

/** Schema version of state.sqlite, kept in PRAGMA user_version; a newer one is refused. */
export const STATE_SCHEMA_VERSION = 6;

const STATE_TABLES = `
  CREATE TABLE IF NOT EXISTS wakes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, kind TEXT NOT NULL,
    harness TEXT NOT NULL, entry TEXT NOT NULL, when_ms REAL NOT NULL, payload TEXT NOT NULL,
    armed_by TEXT NOT NULL, chain TEXT, depth INTEGER NOT NULL, armed_at REAL NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0, authority TEXT);
  CREATE INDEX IF NOT EXISTS wakes_when ON wakes (when_ms, seq);
  CREATE INDEX IF NOT EXISTS wakes_armed_by ON wakes (armed_by);
  CREATE INDEX IF NOT EXISTS wakes_armed_by_harness ON wakes (armed_by, harness);
  CREATE TABLE IF NOT EXISTS claims (
    seq INTEGER NOT NULL, id TEXT NOT NULL, kind TEXT NOT NULL, harness TEXT NOT NULL,
    entry TEXT NOT NULL, when_ms REAL NOT NULL, payload TEXT NOT NULL, armed_by TEXT NOT NULL,
    chain TEXT, depth INTEGER NOT NULL, armed_at REAL NOT NULL, attempt INTEGER NOT NULL,
    authority TEXT, PRIMARY KEY (id, seq));
  CREATE TABLE IF NOT EXISTS deployments (
    name TEXT PRIMARY KEY, sha256 TEXT NOT NULL, elf BLOB, capabilities TEXT NOT NULL,
    grant_json TEXT NOT NULL, deployed_at REAL NOT NULL);
  CREATE TABLE IF NOT EXISTS dead (
    id TEXT PRIMARY KEY, seq INTEGER NOT NULL, kind TEXT NOT NULL, harness TEXT NOT NULL,
    entry TEXT NOT NULL, when_ms REAL NOT NULL, payload TEXT NOT NULL, armed_by TEXT NOT NULL,
    chain TEXT, depth INTEGER NOT NULL, armed_at REAL NOT NULL, attempt INTEGER NOT NULL,
    authority TEXT, reason TEXT NOT NULL, last_error TEXT NOT NULL, attempts INTEGER NOT NULL,
    dead_at REAL NOT NULL);
  CREATE TABLE IF NOT EXISTS reference_imports (name TEXT PRIMARY KEY, sha256 TEXT NOT NULL);
`;

/**
 * Create or migrate the tables of state.sqlite in `db` (`file` names it in the refusal).
 * @throws Error when `db` holds a newer schema (the message gives the fix); SQLite errors as thrown
 */
export function createStateSchema(db: SqliteDatabase, file: string): void {
  const version = Number((db.pragma('user_version') as { user_version: number }[])[0]?.user_version ?? 0);
  if (version > STATE_SCHEMA_VERSION) {
    throw new Error(
      `${file} has schema version ${version}, newer than this berm's ${STATE_SCHEMA_VERSION}; fix: run a newer berm or use another --state directory`,
    );
  }
  // schema 3 -> 4: a deployment's elf may be NULL (SQLite changes a column's constraint only by
  // copying the table: the old one is renamed, the current one created, the rows copied over)
  const deploymentCols = db.prepare('PRAGMA table_info(deployments)').all() as {
    name: string;
    notnull: number;
  }[];
  const elfRequired = deploymentCols.some((c) => c.name === 'elf' && c.notnull === 1);
  db.transaction(() => {
    if (elfRequired) db.exec('ALTER TABLE deployments RENAME TO deployments_schema3');
    db.exec(STATE_TABLES);
    if (elfRequired)
      db.exec('INSERT INTO deployments SELECT * FROM deployments_schema3; DROP TABLE deployments_schema3');
    // schema 5 -> 6: the protocol door's subscriptions (created when missing)
    createSubscriptionSchema(db);
  })();
  // schema 4 -> 5: the record of imported upstream images (STATE_TABLES creates it when missing)
  // schema 2 -> 3: the dead-letter set (the CREATE TABLE IF NOT EXISTS above)
  // schema 1 -> 2: wakes keep the arming invocation's authority
  for (const table of ['wakes', 'claims']) {
    const cols = db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[];
    if (!cols.some((c) => c.name === 'authority')) db.exec(`ALTER TABLE ${table} ADD COLUMN authority TEXT`);
  }
  db.pragma(`user_version = ${STATE_SCHEMA_VERSION}`);
}

/** Create the key-value table in `db` when missing (the storage capability's keys). */
export function createKvSchema(db: SqliteDatabase): void {
  db.exec(
    'CREATE TABLE IF NOT EXISTS berm_kv (harness TEXT NOT NULL, key BLOB NOT NULL, value BLOB NOT NULL, ' +
      'PRIMARY KEY (harness, key)) WITHOUT ROWID',
  );
}

/**
 * Create the protocol door's subscription table and its index in `db` when missing (in
 * state.sqlite, and in a subscriptions file of a bus used without a runtime's store).
 */
export function createSubscriptionSchema(db: SqliteDatabase): void {
  db.exec(`CREATE TABLE IF NOT EXISTS harness_subscriptions (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      source TEXT NOT NULL,
      harness TEXT NOT NULL,
      once INTEGER NOT NULL,
      authority TEXT NOT NULL,
      created_at INTEGER NOT NULL
    );
    CREATE INDEX IF NOT EXISTS harness_subscriptions_source ON harness_subscriptions(source);`);
}

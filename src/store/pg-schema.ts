/**
 * Every PostgreSQL table berm keeps, declared here once, with the migrations between schema
 * versions (src/store/sqlite-schema.ts is the SQLite counterpart).
 *
 * Tables (schema version {@link SCHEMA_VERSION}, kept in berm_schema):
 *   berm_wakes        pending wakes. seq (bigserial) orders armings; id is unique among pending
 *                     first deliveries (a partial unique index), so re-arming replaces; a
 *                     redelivery row (a claim whose lease expired) may share its id with the next
 *                     pending occurrence of the same schedule. Indexed by due order and by
 *                     armed_by (a harness's own wakes, counted for harnessPendingWakes).
 *   berm_claims       claimed wakes: running on `owner` until `lease_until` (ms, database clock).
 *                     An owner renews its leases; an expired claim goes back to berm_wakes as a
 *                     redelivery with a fresh seq and keeps its attempt count.
 *   berm_images       ELF bytes by sha256, stored once.
 *   berm_deployments  name -> sha256, grant, deployed_at.
 *   berm_kv           the storage capability's keys (same shape as its SQLite table).
 *   berm_journal      one row per finished invocation (the JSONL record as jsonb) and its daemon;
 *                     since schema 6 the record's write id (`wid`, unique), so a record written
 *                     again after its first write's answer was lost is stored once.
 *   berm_dead         the dead-letter set (schema 5): one row per wake id, the claim's columns,
 *                     why (reason, last_error), deliveries started, when it entered (dead_at).
 *   berm_reference_imports  the upstream images imported into the deployments (schema 7): name ->
 *                     sha256 of the bytes last imported under it (src/daemon/reference-root.ts).
 *   berm_subscriptions  the protocol door's event subscriptions (schema 8): id (bigserial),
 *                     source, harness, once, authority (jsonb), created_at (ms); indexed by source
 *                     and by harness. Every daemon sharing the database sees each one (a file of
 *                     each daemon's own before: pg-subscriptions.ts).
 *   berm_schema       the version, who wrote it and when (created by {@link migrate}).
 */
import type pg from 'pg';

/** The schema this berm writes. A database with a newer one is refused (see {@link migrate}). */
export const SCHEMA_VERSION = 8;

/** Key of the advisory lock held while the schema is created or migrated. */
const SCHEMA_LOCK = 0x6265726e;

/**
 * The storage capability's keys (same shape as its SQLite table); created by the first migration
 * and by the storage capability's job (pg-kv.ts) on a database no store has migrated.
 */
export const KV_TABLE = `CREATE TABLE IF NOT EXISTS berm_kv (
    harness text NOT NULL,
    key bytea NOT NULL,
    value bytea NOT NULL,
    PRIMARY KEY (harness, key))`;

/** Raised when the database's schema is newer than this berm's. */
export class SchemaVersionError extends Error {
  override name = 'SchemaVersionError';
}

/** One migration per version: migrations[v - 1] takes a database from version v - 1 to v. */
const MIGRATIONS: string[] = [
  `
  CREATE OR REPLACE FUNCTION berm_now_ms() RETURNS double precision
    LANGUAGE sql VOLATILE AS $$ SELECT extract(epoch FROM clock_timestamp()) * 1000 $$;
  CREATE TABLE berm_wakes (
    seq bigserial PRIMARY KEY,
    id text NOT NULL,
    redelivery boolean NOT NULL DEFAULT false,
    kind text NOT NULL,
    harness text NOT NULL,
    entry text NOT NULL,
    when_ms double precision NOT NULL,
    payload text NOT NULL,
    armed_by text NOT NULL,
    chain text,
    depth integer NOT NULL,
    armed_at double precision NOT NULL,
    attempt integer NOT NULL DEFAULT 0);
  CREATE UNIQUE INDEX berm_wakes_id ON berm_wakes (id) WHERE NOT redelivery;
  CREATE INDEX berm_wakes_when ON berm_wakes (when_ms, seq);
  CREATE TABLE berm_claims (
    seq bigint NOT NULL,
    id text NOT NULL,
    kind text NOT NULL,
    harness text NOT NULL,
    entry text NOT NULL,
    when_ms double precision NOT NULL,
    payload text NOT NULL,
    armed_by text NOT NULL,
    chain text,
    depth integer NOT NULL,
    armed_at double precision NOT NULL,
    attempt integer NOT NULL,
    owner text NOT NULL,
    lease_until double precision NOT NULL,
    PRIMARY KEY (id, seq));
  CREATE INDEX berm_claims_lease ON berm_claims (lease_until);
  CREATE INDEX berm_claims_owner ON berm_claims (owner);
  CREATE TABLE berm_images (
    sha256 text PRIMARY KEY,
    elf bytea NOT NULL,
    stored_at double precision NOT NULL);
  CREATE TABLE berm_deployments (
    name text PRIMARY KEY,
    sha256 text NOT NULL REFERENCES berm_images (sha256),
    capabilities jsonb NOT NULL,
    grant_json jsonb NOT NULL,
    deployed_at double precision NOT NULL);
  ${KV_TABLE};
  CREATE TABLE berm_journal (
    n bigserial PRIMARY KEY,
    daemon text NOT NULL,
    rec jsonb NOT NULL);
  `,
  // 1 -> 2: a wake keeps the authority (agent, session, sender) of the invocation that armed it,
  // as the SQLite store's schema 2 does; rows armed before have none (NULL)
  `
  ALTER TABLE berm_wakes ADD COLUMN authority jsonb;
  ALTER TABLE berm_claims ADD COLUMN authority jsonb;
  `,
  // 2 -> 3: the queue counts the wakes one harness armed (its harnessPendingWakes limit) on an
  // index range rather than a scan of the due-set
  `
  CREATE INDEX IF NOT EXISTS berm_wakes_armed_by ON berm_wakes (armed_by);
  `,
  // 3 -> 4: a claim's owner holds a session advisory lock while it lives, and the other daemons
  // take back the claims of an owner without one at once (pg-liveness.ts). A berm before it
  // takes no lock, so its claims would be taken from it: it must not share the database.
  `
  COMMENT ON TABLE berm_claims IS
    'owner holds session advisory lock (0x6265726f, hashtext(owner)) while it lives';
  `,
  // 4 -> 5: the dead-letter set: wakes whose every delivery ended through a host fault
  `
  CREATE TABLE berm_dead (
    id text PRIMARY KEY,
    seq bigint NOT NULL,
    kind text NOT NULL,
    harness text NOT NULL,
    entry text NOT NULL,
    when_ms double precision NOT NULL,
    payload text NOT NULL,
    armed_by text NOT NULL,
    chain text,
    depth integer NOT NULL,
    armed_at double precision NOT NULL,
    authority jsonb,
    attempt integer NOT NULL,
    reason text NOT NULL,
    last_error text NOT NULL,
    attempts integer NOT NULL,
    dead_at double precision NOT NULL,
    dead_by text NOT NULL);
  CREATE INDEX berm_dead_at ON berm_dead (dead_at, seq);
  `,
  // 5 -> 6: each journal record carries the write id its daemon gave it, unique: a write whose
  // answer was lost (the connection dropped after the commit, or between the record and the
  // claim it settles) is repeated on reconnection and must not store the record twice. Rows
  // written before have none (NULL, never equal to another)
  `
  ALTER TABLE berm_journal ADD COLUMN wid text;
  CREATE UNIQUE INDEX berm_journal_wid ON berm_journal (wid);
  `,
  // 6 -> 7: the record of imported upstream images, kept in the store as every other state (a
  // JSON file under the daemon's root before)
  `
  CREATE TABLE IF NOT EXISTS berm_reference_imports (
    name text PRIMARY KEY,
    sha256 text NOT NULL);
  `,
  // 7 -> 8: the protocol door's subscriptions, shared by every daemon (a SQLite file under each
  // daemon's state directory before, imported by its daemon at boot)
  `
  CREATE TABLE IF NOT EXISTS berm_subscriptions (
    id bigserial PRIMARY KEY,
    source text NOT NULL,
    harness text NOT NULL,
    once boolean NOT NULL,
    authority jsonb NOT NULL,
    created_at double precision NOT NULL);
  CREATE INDEX IF NOT EXISTS berm_subscriptions_source ON berm_subscriptions (source);
  CREATE INDEX IF NOT EXISTS berm_subscriptions_harness ON berm_subscriptions (harness);
  `,
];

/**
 * Create or migrate berm's schema in the database behind `pool`, under an advisory lock (several
 * daemons may start at once).
 * @param by who writes the schema (recorded in berm_schema)
 * @returns the version found before (0 for an empty database)
 * @throws SchemaVersionError when the database holds a newer schema (the message gives the fix);
 *   pg errors when the database cannot be reached or refuses the DDL
 */
export async function migrate(pool: pg.Pool, by: string, where: string): Promise<number> {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    await c.query('SELECT pg_advisory_xact_lock($1)', [SCHEMA_LOCK]);
    await c.query(
      `CREATE TABLE IF NOT EXISTS berm_schema (
         one boolean PRIMARY KEY DEFAULT true CHECK (one),
         version integer NOT NULL,
         written_by text NOT NULL,
         updated_at timestamptz NOT NULL DEFAULT now())`,
    );
    const r = await c.query<{ version: number }>('SELECT version FROM berm_schema');
    const found = r.rows[0]?.version ?? 0;
    if (found > SCHEMA_VERSION) {
      throw new SchemaVersionError(
        `${where} holds berm schema version ${found}, newer than this berm's ${SCHEMA_VERSION}: a newer berm wrote it. ` +
          `Fix: run a berm that knows schema ${found} on every daemon sharing this database, or point --store at another database`,
      );
    }
    for (let v = found + 1; v <= SCHEMA_VERSION; v++) await c.query(MIGRATIONS[v - 1]!);
    if (found < SCHEMA_VERSION) {
      await c.query(
        `INSERT INTO berm_schema (one, version, written_by) VALUES (true, $1, $2)
         ON CONFLICT (one) DO UPDATE SET version = EXCLUDED.version, written_by = EXCLUDED.written_by, updated_at = now()`,
        [SCHEMA_VERSION, by],
      );
    }
    await c.query('COMMIT');
    return found;
  } catch (e) {
    await c.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    c.release();
  }
}

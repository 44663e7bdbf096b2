/**
 * The PostgreSQL backend's SQL, asynchronous (pg 8): the schema and its version check, the shared
 * due-set (arm, claim under a lease with `FOR UPDATE SKIP LOCKED`, lease renewal and expiry),
 * deployments (image bytes once by digest), the storage capability's keys and the journal. The
 * synchronous store (pg-store.ts) runs these in a bridge worker; tests call them directly.
 * docs/scale-out.md describes the design.
 *
 * The tables and their migrations are declared in pg-schema.ts.
 *
 * Ordering: every statement that assigns a seq takes one transaction-scoped advisory lock first,
 * so seqs become visible in increasing order and a daemon that has seen every seq up to N can
 * pick up newer armings with `seq > N` without missing a slower concurrent transaction.
 *
 * Channels: NOTIFY berm_wakes (payload: the newest seq) after any arming or redelivery;
 * NOTIFY berm_deployments (payload: JSON {name, op: 'put' | 'remove', by}) after a deploy or
 * undeploy.
 */
import pg from 'pg';
import type { Authority } from '../contract/index.js';
import type { WakeRecord } from './store.js';

export { SCHEMA_VERSION, SchemaVersionError, migrate } from './pg-schema.js';

/** Channel of due-set changes. */
export const WAKES_CHANNEL = 'berm_wakes';
/** Channel of deployment changes. */
export const DEPLOYMENTS_CHANNEL = 'berm_deployments';

/** Key of the advisory lock that serialises seq assignment (any constant; "berm" in ASCII). */
export const SEQ_LOCK = 0x6265726d;

/** A pool or a client: anything that runs a query. */
export type Queryable = Pick<pg.Pool, 'query'>;

// ------------------------------------------------------------------ due-set

/** A wake as stored: the runtime's WakeRecord (src/store/store.ts), authority included. */
export type PgWake = WakeRecord;
/** A wake to arm. */
export type PgWakeSpec = Omit<PgWake, 'seq' | 'attempt'>;

/** A row of berm_wakes or berm_claims as pg returns it. */
export interface WakeRow {
  seq: string;
  id: string;
  kind: string;
  harness: string;
  entry: string;
  when_ms: number;
  payload: string;
  armed_by: string;
  chain: string | null;
  depth: number;
  armed_at: number;
  attempt: number;
  authority: Authority | null;
}

/** The record of a berm_wakes or berm_claims row. */
export function wake(r: WakeRow): PgWake {
  return {
    id: r.id,
    seq: Number(r.seq),
    kind: r.kind === 'call' ? 'call' : 'wake',
    harness: r.harness,
    entry: r.entry,
    when: r.when_ms,
    payload: r.payload,
    armedBy: r.armed_by,
    chain: r.chain,
    depth: r.depth,
    attempt: r.attempt,
    armedAt: r.armed_at,
    authority: r.authority ?? null,
  };
}

/** The wake columns of berm_wakes, berm_claims and berm_dead (seq and attempt apart). */
export const COLS = 'id, kind, harness, entry, when_ms, payload, armed_by, chain, depth, armed_at, authority';
/** `col = EXCLUDED.col` for each of {@link COLS} but id. */
export const UPDATE_COLS = COLS.split(', ')
  .filter((c) => c !== 'id')
  .map((c) => `${c} = EXCLUDED.${c}`)
  .join(', ');

/**
 * Arm wakes (re-arming a pending id replaces it: new seq, attempt 0) and notify the other
 * daemons, in one statement (the notification is sent at its commit, so an arming is never
 * committed without it). Duplicate ids in `specs`: the last one wins.
 * @returns the stored records in the order of `specs` (duplicates get the winner's record) and
 *   which ids replaced a pending wake
 */
export async function arm(
  db: Queryable,
  specs: readonly PgWakeSpec[],
): Promise<{ records: PgWake[]; replaced: Set<string> }> {
  const last = new Map<string, PgWakeSpec>();
  for (const s of specs) last.set(s.id, s);
  const u = [...last.values()];
  const r = await db.query<WakeRow & { replaced: boolean }>(
    `WITH l AS (SELECT pg_advisory_xact_lock(${SEQ_LOCK}) AS x),
     a AS (INSERT INTO berm_wakes (${COLS}, attempt)
       SELECT a.id, a.kind, a.harness, a.entry, a.when_ms, a.payload, a.armed_by, a.chain, a.depth, a.armed_at,
              a.authority, 0
       FROM l, unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::float8[], $6::text[], $7::text[],
                      $8::text[], $9::int[], $10::float8[], $11::jsonb[]) WITH ORDINALITY
            AS a(id, kind, harness, entry, when_ms, payload, armed_by, chain, depth, armed_at, authority, ord)
       ORDER BY a.ord
     ON CONFLICT (id) WHERE NOT redelivery DO UPDATE
       SET seq = nextval(pg_get_serial_sequence('berm_wakes', 'seq')), ${UPDATE_COLS}, attempt = 0
     RETURNING *, (xmax <> 0) AS replaced),
     n AS (SELECT pg_notify('${WAKES_CHANNEL}', max(seq)::text) FROM a HAVING count(*) > 0)
     SELECT a.* FROM a, n`,
    [
      u.map((s) => s.id),
      u.map((s) => s.kind),
      u.map((s) => s.harness),
      u.map((s) => s.entry),
      u.map((s) => s.when),
      u.map((s) => s.payload),
      u.map((s) => s.armedBy),
      u.map((s) => s.chain),
      u.map((s) => s.depth),
      u.map((s) => s.armedAt),
      u.map((s) => (s.authority ? JSON.stringify(s.authority) : null)),
    ],
  );
  const byId = new Map<string, PgWake>();
  const replaced = new Set<string>();
  for (const row of r.rows) {
    const w = wake(row);
    byId.set(w.id, w);
    if (row.replaced) replaced.add(w.id);
  }
  return { records: specs.map((s) => byId.get(s.id)!), replaced };
}

/**
 * Cancel the pending wake `id` (of `harness` when given), a pending redelivery of it included.
 * @returns whether anything was removed
 */
export async function cancel(db: Queryable, id: string, harness?: string): Promise<boolean> {
  const r = await db.query('DELETE FROM berm_wakes WHERE id = $1 AND ($2::text IS NULL OR harness = $2)', [
    id,
    harness ?? null,
  ]);
  return (r.rowCount ?? 0) > 0;
}

/** The pending (first-delivery) wake `id`, or undefined. */
export async function get(db: Queryable, id: string): Promise<PgWake | undefined> {
  const r = await db.query<WakeRow>('SELECT * FROM berm_wakes WHERE id = $1 AND NOT redelivery', [id]);
  return r.rows[0] ? wake(r.rows[0]) : undefined;
}

/**
 * Pending wakes by due instant (then seq), optionally of one harness, at most `limit`, ending at
 * the first whose payload brings the listed payloads' bytes to `maxBytes` (DueStore.list).
 */
export async function list(
  db: Queryable,
  options: { harness?: string; limit?: number; maxBytes?: number } = {},
): Promise<PgWake[]> {
  // The running sum is over octet_length, which a TOASTed payload answers from its header: only
  // the rows within the budget have their payloads read and sent.
  const r = await db.query<WakeRow>(
    `SELECT * FROM (
       SELECT *, sum(octet_length(payload)) OVER (ORDER BY when_ms, seq ROWS UNBOUNDED PRECEDING) AS upto
         FROM (SELECT * FROM berm_wakes WHERE ($1::text IS NULL OR harness = $1)
                ORDER BY when_ms, seq LIMIT $2) l) w
      WHERE $3::bigint IS NULL OR upto - octet_length(payload) < $3
      ORDER BY when_ms, seq`,
    [
      options.harness ?? null,
      options.limit !== undefined && options.limit >= 0 ? options.limit : null,
      options.maxBytes ?? null,
    ],
  );
  return r.rows.map(wake);
}

/** Number of pending wakes. */
export async function count(db: Queryable): Promise<number> {
  const r = await db.query<{ n: string }>('SELECT count(*) AS n FROM berm_wakes');
  return Number(r.rows[0]!.n);
}

/**
 * Number of pending wakes armed by `armedBy` (and, given `harness`, that wake `harness`), counted
 * up to `upTo` (see DueStore.countArmedBy). With a harness the armed_by index range is filtered by
 * harness: the operator's API arms (armed_by 'api'), at most harnessApiWakes per harness.
 */
export async function countArmedBy(
  db: Queryable,
  armedBy: string,
  upTo: number,
  harness?: string,
): Promise<number> {
  const r =
    harness === undefined
      ? await db.query<{ n: string }>(
          'SELECT count(*) AS n FROM (SELECT 1 FROM berm_wakes WHERE armed_by = $1 LIMIT $2) x',
          [armedBy, upTo],
        )
      : await db.query<{ n: string }>(
          'SELECT count(*) AS n FROM (SELECT 1 FROM berm_wakes WHERE armed_by = $1 AND harness = $2 LIMIT $3) x',
          [armedBy, harness, upTo],
        );
  return Number(r.rows[0]!.n);
}

/** (when, seq) of every pending wake with seq > afterSeq, in seq order. */
export async function index(db: Queryable, afterSeq: number): Promise<{ when: number[]; seq: number[] }> {
  const r = await db.query<[number, string]>({
    text: 'SELECT when_ms, seq FROM berm_wakes WHERE seq > $1 ORDER BY seq',
    values: [afterSeq],
    rowMode: 'array',
  });
  const when = new Array<number>(r.rows.length);
  const seq = new Array<number>(r.rows.length);
  for (let i = 0; i < r.rows.length; i++) {
    when[i] = r.rows[i]![0];
    seq[i] = Number(r.rows[i]![1]);
  }
  return { when, seq };
}

/**
 * (when, seq) of the first `limit` pending wakes in due order after `after` (from the earliest
 * when null): one range of the berm_wakes_when index (see DueStore.window).
 */
export async function window(
  db: Queryable,
  after: readonly [number, number] | null,
  limit: number,
): Promise<{ when: number[]; seq: number[] }> {
  const r = await db.query<[number, string]>(
    after === null
      ? {
          text: 'SELECT when_ms, seq FROM berm_wakes ORDER BY when_ms, seq LIMIT $1',
          values: [limit],
          rowMode: 'array',
        }
      : {
          text: `SELECT when_ms, seq FROM berm_wakes WHERE (when_ms, seq) > ($1::float8, $2::bigint)
                 ORDER BY when_ms, seq LIMIT $3`,
          values: [after[0], after[1], limit],
          rowMode: 'array',
        },
  );
  return { when: r.rows.map((x) => x[0]), seq: r.rows.map((x) => Number(x[1])) };
}

/** The highest seq of a pending wake, 0 when there is none. */
export async function lastSeq(db: Queryable): Promise<number> {
  const r = await db.query<{ n: string | null }>('SELECT max(seq) AS n FROM berm_wakes');
  return Number(r.rows[0]?.n ?? 0);
}

/**
 * Claim the pending arming `seq` for `owner` under a lease of `leaseMs` (database clock): in one
 * statement, take the row unless another daemon holds it (`FOR UPDATE SKIP LOCKED`), move it to
 * berm_claims with attempt + 1.
 * @param harnesses when given, only a wake of one of these harnesses is claimed (a daemon does
 *   not take a wake of a harness it has not deployed yet: another daemon runs it, or this one
 *   once the deployment arrives and the wake is re-announced)
 * @returns the claimed record, or null when the arming is gone (claimed elsewhere, cancelled,
 *   replaced), locked by a daemon claiming it right now, or of another harness
 */
export async function claim(
  db: Queryable,
  seq: number,
  owner: string,
  leaseMs: number,
  harnesses: readonly string[] | null = null,
): Promise<PgWake | null> {
  const r = await db.query<WakeRow>(
    `WITH w AS (
       DELETE FROM berm_wakes WHERE seq = (
         SELECT seq FROM berm_wakes WHERE seq = $1 AND ($4::text[] IS NULL OR harness = ANY($4))
         FOR UPDATE SKIP LOCKED)
       RETURNING *)
     INSERT INTO berm_claims (seq, ${COLS}, attempt, owner, lease_until)
       SELECT seq, ${COLS}, attempt + 1, $2, berm_now_ms() + $3 FROM w
     ON CONFLICT (id, seq) DO UPDATE
       SET attempt = EXCLUDED.attempt, owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until
     RETURNING *`,
    [seq, owner, leaseMs, harnesses],
  );
  return r.rows[0] ? wake(r.rows[0]) : null;
}

/**
 * Claim up to `limit` pending wakes due at `now` (ms, the daemons' clock), earliest first, for
 * `owner` under a lease of `leaseMs`, in one statement: rows another daemon is claiming right now
 * are skipped (`FOR UPDATE SKIP LOCKED`), so daemons draining the same due-set never wait on each
 * other nor fight over one row; each claimed row moves to berm_claims with attempt + 1.
 * @param harnesses when given, only wakes of these harnesses (see {@link claim})
 * @param from only rows at or after this (when, seq) in due order: the daemon's earliest heap
 *   entry. Rows before it are claimed elsewhere or will be adopted (an orphan); starting there
 *   keeps the index scan off the dead entries of rows already claimed.
 * @returns the claimed records by (when, seq); fewer than `limit` when no more are due and free
 */
export async function claimDue(
  db: Queryable,
  now: number,
  owner: string,
  leaseMs: number,
  harnesses: readonly string[] | null,
  limit: number,
  from: readonly [number, number] = [-Infinity, 0],
): Promise<PgWake[]> {
  const r = await db.query<WakeRow>(
    `WITH w AS (
       DELETE FROM berm_wakes WHERE seq = ANY(ARRAY(
         SELECT seq FROM berm_wakes WHERE when_ms <= $1 AND ($4::text[] IS NULL OR harness = ANY($4))
           AND (when_ms, seq) >= ($6::float8, $7::bigint)
         ORDER BY when_ms, seq LIMIT $5 FOR UPDATE SKIP LOCKED))
       RETURNING *)
     INSERT INTO berm_claims (seq, ${COLS}, attempt, owner, lease_until)
       SELECT seq, ${COLS}, attempt + 1, $2, berm_now_ms() + $3 FROM w
     ON CONFLICT (id, seq) DO UPDATE
       SET attempt = EXCLUDED.attempt, owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until
     RETURNING *`,
    [now, owner, leaseMs, harnesses, limit, from[0], from[1]],
  );
  return r.rows.map(wake).sort((a, b) => a.when - b.when || a.seq - b.seq);
}

/** Claims held by `owner` (their wakes run there or wait for a schedule's previous occurrence). */
export async function claimedBy(db: Queryable, owner: string): Promise<PgWake[]> {
  const r = await db.query<WakeRow>('SELECT * FROM berm_claims WHERE owner = $1 ORDER BY when_ms, seq', [
    owner,
  ]);
  return r.rows.map(wake);
}

/** Count one more delivery of a claim and take it for `owner`. @returns it, or null when gone. */
export async function reclaim(
  db: Queryable,
  id: string,
  seq: number,
  owner: string,
  leaseMs: number,
): Promise<PgWake | null> {
  const r = await db.query<WakeRow>(
    `UPDATE berm_claims SET attempt = attempt + 1, owner = $3, lease_until = berm_now_ms() + $4
     WHERE id = $1 AND seq = $2 RETURNING *`,
    [id, seq, owner, leaseMs],
  );
  return r.rows[0] ? wake(r.rows[0]) : null;
}

/** Forget claims whose outcome is journaled ([id, seq] pairs). */
export async function finish(db: Queryable, done: readonly [string, number][]): Promise<void> {
  if (done.length === 0) return;
  await db.query(
    'DELETE FROM berm_claims c USING unnest($1::text[], $2::bigint[]) AS d(id, seq) WHERE c.id = d.id AND c.seq = d.seq',
    [done.map((d) => d[0]), done.map((d) => d[1])],
  );
}

/**
 * Put a claim back as pending at `when` under its own seq (the releasing daemon's index still
 * holds it), with the attempt that did not start taken back. When the schedule was re-armed
 * meanwhile, the newer arming wins and this one is dropped.
 */
export async function release(db: Queryable, id: string, seq: number, when: number): Promise<void> {
  await db.query(
    `WITH c AS (DELETE FROM berm_claims WHERE id = $1 AND seq = $2 RETURNING *)
     INSERT INTO berm_wakes (seq, ${COLS}, redelivery, attempt)
       SELECT seq, id, kind, harness, entry, $3, payload, armed_by, chain, depth, armed_at, authority,
              attempt > 1, greatest(attempt - 1, 0) FROM c
     ON CONFLICT DO NOTHING`,
    [id, seq, when],
  );
}

/**
 * Renew the leases of the claims `held` ([id, seq] pairs) by daemon `owner` to now + `leaseMs`
 * (database clock). Only the claims the daemon holds in memory are renewed, never every row it
 * owns: a claim whose statement committed after the daemon gave up on it (a timed-out call) is
 * not known to it, so it must expire and be redelivered rather than be renewed for ever.
 * @returns how many leases were renewed
 */
export async function renew(
  db: Queryable,
  owner: string,
  leaseMs: number,
  held: readonly [string, number][],
): Promise<number> {
  if (held.length === 0) return 0;
  const r = await db.query(
    `UPDATE berm_claims c SET lease_until = berm_now_ms() + $2
     FROM unnest($3::text[], $4::bigint[]) AS h(id, seq)
     WHERE c.owner = $1 AND c.id = h.id AND c.seq = h.seq`,
    [owner, leaseMs, held.map((h) => h[0]), held.map((h) => h[1])],
  );
  return r.rowCount ?? 0;
}

/**
 * Move every expired claim (its daemon died, lost the database, or gave up on it) back to the
 * pending set as a redelivery with a fresh seq (attempt kept, so its next delivery counts
 * attempt + 1) and notify the other daemons, in one statement (the notification goes out at its
 * commit: never a moved claim without it). At most 10,000 per call, earliest due first.
 * @returns how many expired claims were put back
 */
export async function expire(db: Queryable): Promise<number> {
  return requeueClaims(db, 'c.lease_until < berm_now_ms()');
}

/**
 * Move the claims `c` that `where` selects (an SQL condition over `berm_claims c`) back to the
 * pending set as redeliveries, as {@link expire} does for expired ones: fresh seq, attempt kept,
 * one notification at commit, at most 10,000 per call, earliest due first. The liveness check
 * (pg-liveness.ts) selects the claims of owners whose session lock is gone.
 * @returns how many claims were put back
 */
export async function requeueClaims(db: Queryable, where: string): Promise<number> {
  const moved = await db.query<{ n: string }>(
    `WITH l AS (SELECT pg_advisory_xact_lock(${SEQ_LOCK}) AS x),
     dead AS (
       DELETE FROM berm_claims WHERE (id, seq) IN (
         SELECT c.id, c.seq FROM berm_claims c, l WHERE ${where}
         ORDER BY c.when_ms LIMIT 10000 FOR UPDATE OF c SKIP LOCKED)
       RETURNING *),
     back AS (
       INSERT INTO berm_wakes (${COLS}, redelivery, attempt)
         SELECT ${COLS}, true, attempt FROM dead ORDER BY when_ms
       RETURNING seq)
     SELECT count(*) AS n FROM back,
       (SELECT pg_notify('${WAKES_CHANNEL}', max(seq)::text) FROM back HAVING count(*) > 0) x`,
  );
  return Number(moved.rows[0]?.n ?? 0);
}

/**
 * (when, seq) of at most `limit` pending wakes due before `dueBefore` (ms, the daemons' clock),
 * earliest first, of `harnesses` (those the daemon runs; null: any): what an idle daemon takes
 * into its due heap once per lease period, so a wake
 * that no daemon holds in memory (its arming was skipped by the others while a claim that then
 * rolled back had it locked, or it was put back by a daemon that died) still fires.
 */
export async function overdue(
  db: Queryable,
  dueBefore: number,
  limit: number,
  harnesses: readonly string[] | null = null,
): Promise<{ when: number[]; seq: number[] }> {
  const r = await db.query<[number, string]>({
    text: `SELECT when_ms, seq FROM berm_wakes WHERE when_ms < $1 AND ($3::text[] IS NULL OR harness = ANY($3))
           ORDER BY when_ms, seq LIMIT $2`,
    values: [dueBefore, limit, harnesses],
    rowMode: 'array',
  });
  return { when: r.rows.map((x) => x[0]), seq: r.rows.map((x) => Number(x[1])) };
}

/**
 * Give every pending wake due before `dueBefore` (of `harness`, when given) a fresh seq and
 * notify, so every daemon's index takes it again: after a daemon lost the database mid-claim it
 * may have dropped its copy; after a harness is deployed, daemons that skipped its wakes take them.
 * @returns how many were re-announced
 */
export async function reannounce(db: Queryable, dueBefore: number, harness?: string): Promise<number> {
  const r = await db.query<{ n: string }>(
    `WITH l AS (SELECT pg_advisory_xact_lock(${SEQ_LOCK}) AS x),
     u AS (UPDATE berm_wakes SET seq = nextval(pg_get_serial_sequence('berm_wakes', 'seq'))
     WHERE seq IN (SELECT w.seq FROM berm_wakes w, l WHERE w.when_ms < $1
                     AND ($2::text IS NULL OR w.harness = $2)
                   ORDER BY w.when_ms FOR UPDATE OF w SKIP LOCKED)
     RETURNING seq)
     SELECT count(*) AS n FROM u, (SELECT pg_notify('${WAKES_CHANNEL}', max(seq)::text) FROM u HAVING count(*) > 0) x`,
    [dueBefore, harness ?? null],
  );
  return Number(r.rows[0]?.n ?? 0);
}

// ------------------------------------------------------------------ deployments

/** A deployment as stored (mirrors DeploymentRecord of store.ts). */
export interface PgDeployment {
  name: string;
  sha256: string;
  elf: Uint8Array;
  capabilities: string[];
  grant: Record<string, unknown>;
  deployedAt: number;
}

interface DeploymentRow {
  name: string;
  sha256: string;
  elf: Buffer;
  capabilities: string[];
  grant_json: Record<string, unknown>;
  deployed_at: number;
}

function deployment(r: DeploymentRow): PgDeployment {
  return {
    name: r.name,
    sha256: r.sha256,
    elf: new Uint8Array(r.elf.buffer, r.elf.byteOffset, r.elf.byteLength),
    capabilities: r.capabilities,
    grant: r.grant_json,
    deployedAt: r.deployed_at,
  };
}

/**
 * Record a deployment: the image is uploaded only when its digest is not stored yet; the name is
 * (re)pointed at it in the same transaction, then the other daemons are notified.
 * @param by the daemon (notification payload, so it can ignore its own)
 */
export async function putDeployment(pool: pg.Pool, d: PgDeployment, by: string): Promise<void> {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    const have = await c.query('SELECT 1 FROM berm_images WHERE sha256 = $1', [d.sha256]);
    if (have.rowCount === 0) {
      await c.query(
        'INSERT INTO berm_images (sha256, elf, stored_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
        [d.sha256, Buffer.from(d.elf.buffer, d.elf.byteOffset, d.elf.byteLength), Date.now()],
      );
    }
    await c.query(
      `INSERT INTO berm_deployments (name, sha256, capabilities, grant_json, deployed_at)
       VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, capabilities = EXCLUDED.capabilities,
         grant_json = EXCLUDED.grant_json, deployed_at = EXCLUDED.deployed_at`,
      [d.name, d.sha256, JSON.stringify(d.capabilities), JSON.stringify(d.grant), d.deployedAt],
    );
    await c.query(
      `DELETE FROM berm_images i WHERE NOT EXISTS (SELECT 1 FROM berm_deployments d WHERE d.sha256 = i.sha256)`,
    );
    await c.query('SELECT pg_notify($1, $2)', [
      DEPLOYMENTS_CHANNEL,
      JSON.stringify({ name: d.name, op: 'put', sha256: d.sha256, by }),
    ]);
    await c.query('COMMIT');
  } catch (e) {
    await c.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    c.release();
  }
}

/** Remove a deployment (and its image when no other name uses it), then notify. */
export async function removeDeployment(db: Queryable, name: string, by: string): Promise<boolean> {
  const r = await db.query<{ removed: string }>(
    `WITH d AS (DELETE FROM berm_deployments WHERE name = $1 RETURNING sha256),
     i AS (DELETE FROM berm_images WHERE sha256 IN (SELECT sha256 FROM d)
           AND NOT EXISTS (SELECT 1 FROM berm_deployments x WHERE x.sha256 = berm_images.sha256 AND x.name <> $1))
     SELECT count(*) AS removed, pg_notify($2, $3) FROM d`,
    [name, DEPLOYMENTS_CHANNEL, JSON.stringify({ name, op: 'remove', by })],
  );
  return Number(r.rows[0]?.removed ?? 0) > 0;
}

/** One deployment with its image, or undefined. */
export async function getDeployment(db: Queryable, name: string): Promise<PgDeployment | undefined> {
  const r = await db.query<DeploymentRow>(
    'SELECT d.*, i.elf FROM berm_deployments d JOIN berm_images i USING (sha256) WHERE d.name = $1',
    [name],
  );
  return r.rows[0] ? deployment(r.rows[0]) : undefined;
}

/** Every deployment with its image, by name. */
export async function listDeployments(db: Queryable): Promise<PgDeployment[]> {
  const r = await db.query<DeploymentRow>(
    'SELECT d.*, i.elf FROM berm_deployments d JOIN berm_images i USING (sha256) ORDER BY d.name',
  );
  return r.rows.map(deployment);
}

/** A deployment's record without its image: what a daemon compares with what it serves. */
export interface PgDeploymentDigest {
  name: string;
  /** lowercase hex sha256 of the image */
  sha256: string;
  capabilities: string[];
}

/** Every deployment's name, digest and capabilities, by name: one query, no image bytes. */
export async function listDeploymentDigests(db: Queryable): Promise<PgDeploymentDigest[]> {
  const r = await db.query<PgDeploymentDigest>(
    'SELECT name, sha256, capabilities FROM berm_deployments ORDER BY name',
  );
  return r.rows;
}

/** The record of imported upstream images, as [name, sha256] pairs. */
export async function listReferenceImports(db: Queryable): Promise<[string, string][]> {
  const r = await db.query<{ name: string; sha256: string }>(
    'SELECT name, sha256 FROM berm_reference_imports',
  );
  return r.rows.map((x) => [x.name, x.sha256]);
}

/** Record imports of upstream images ([name, sha256] pairs; one statement, replacing by name). */
export async function putReferenceImports(db: Queryable, imported: [string, string][]): Promise<void> {
  if (imported.length === 0) return;
  await db.query(
    `INSERT INTO berm_reference_imports (name, sha256)
     SELECT * FROM unnest($1::text[], $2::text[])
     ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256`,
    [imported.map((e) => e[0]), imported.map((e) => e[1])],
  );
}

// ------------------------------------------------------------------ journal

/**
 * A journal record as the PostgreSQL store writes it: the record and the write id its daemon gave
 * it when it was appended (a random UUID), kept with it until the write is confirmed.
 */
export interface JournalRow {
  wid: string;
  rec: object;
}

/**
 * Append journal records of daemon `by` (one statement). A record whose write id is stored
 * already is skipped: writing a batch again after its first write's answer was lost (a dropped
 * connection, a call given up on while its statement ran on) stores each record once.
 */
export async function appendJournal(db: Queryable, by: string, recs: readonly JournalRow[]): Promise<void> {
  if (recs.length === 0) return;
  await db.query(
    `INSERT INTO berm_journal (daemon, wid, rec)
     SELECT $1, w, r FROM unnest($2::text[], $3::jsonb[]) AS x(w, r)
     ON CONFLICT (wid) DO NOTHING`,
    [by, recs.map((r) => r.wid), recs.map((r) => JSON.stringify(r.rec))],
  );
}

/** Every journal record, oldest first, with the daemon that wrote it. */
export async function readJournal(db: Queryable): Promise<(Record<string, unknown> & { daemon: string })[]> {
  const r = await db.query<{ daemon: string; rec: Record<string, unknown> }>(
    'SELECT daemon, rec FROM berm_journal ORDER BY n',
  );
  return r.rows.map((x) => ({ ...x.rec, daemon: x.daemon }));
}

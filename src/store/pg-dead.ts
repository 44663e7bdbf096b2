/**
 * The PostgreSQL backend's SQL of the dead-letter set (berm_dead, schema 5: pg-sql.ts has the
 * schema): a claim moved in with the journal records held for it, listed, counted per harness,
 * armed again, dropped. Each move is one transaction, so an entry is never both pending and dead.
 */
import type pg from 'pg';
import type { DeadSpec, DeadWake, RetryDeadResult } from './store.js';
import {
  COLS,
  SEQ_LOCK,
  UPDATE_COLS,
  WAKES_CHANNEL,
  appendJournal,
  wake,
  type JournalRow,
  type Queryable,
  type WakeRow,
} from './pg-sql.js';

/** What the scheduler records with a dead-letter entry. */
export type PgDeadSpec = DeadSpec;

type DeadRow = WakeRow & { reason: string; last_error: string; attempts: number; dead_at: number };

/** A dead-letter entry as stored (src/runtime/store.ts DeadWake). */
export type PgDead = DeadWake;

function dead(r: DeadRow): PgDead {
  return {
    wake: wake(r),
    reason: r.reason === 'store-error' || r.reason === 'interrupted' ? r.reason : 'worker-lost',
    lastError: r.last_error,
    attempts: r.attempts,
    deadAt: r.dead_at,
  };
}

/**
 * Write the journal records `recs` of daemon `by`, then move the claim (id, seq) to the
 * dead-letter set (an entry of the same id is replaced), in one transaction.
 * @returns whether the claim was there to move
 */
export async function deadLetter(
  pool: pg.Pool,
  by: string,
  recs: readonly JournalRow[],
  id: string,
  seq: number,
  spec: DeadSpec,
): Promise<boolean> {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    await appendJournal(c, by, recs);
    const r = await c.query(
      `WITH d AS (DELETE FROM berm_claims WHERE id = $1 AND seq = $2 RETURNING *)
       INSERT INTO berm_dead (seq, ${COLS}, attempt, reason, last_error, attempts, dead_at, dead_by)
         SELECT seq, ${COLS}, attempt, $3, $4, $5, $6, $7 FROM d
       ON CONFLICT (id) DO UPDATE SET seq = EXCLUDED.seq, ${UPDATE_COLS}, attempt = EXCLUDED.attempt,
         reason = EXCLUDED.reason, last_error = EXCLUDED.last_error, attempts = EXCLUDED.attempts,
         dead_at = EXCLUDED.dead_at, dead_by = EXCLUDED.dead_by`,
      [id, seq, spec.reason, spec.lastError, spec.attempts, spec.deadAt, by],
    );
    await c.query('COMMIT');
    return (r.rowCount ?? 0) > 0;
  } catch (e) {
    await c.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    c.release();
  }
}

/** Dead-letter entries, oldest first, optionally of one harness, at most `limit`. */
export async function deadList(
  db: Queryable,
  options: { harness?: string; limit?: number },
): Promise<PgDead[]> {
  const r = await db.query<DeadRow>(
    `SELECT * FROM berm_dead WHERE $1::text IS NULL OR harness = $1 ORDER BY dead_at, seq LIMIT $2`,
    [options.harness ?? null, options.limit ?? null],
  );
  return r.rows.map(dead);
}

/** Dead-letter entries per harness. */
export async function deadCounts(db: Queryable): Promise<Record<string, number>> {
  const r = await db.query<{ harness: string; n: string }>(
    'SELECT harness, count(*) AS n FROM berm_dead GROUP BY harness',
  );
  const out: Record<string, number> = {};
  for (const x of r.rows) out[x.harness] = Number(x.n);
  return out;
}

/**
 * Take entry `id` out of the dead-letter set and arm it again due at `when` with attempt 0, and
 * notify the other daemons, in one statement; nothing changes while a pending first delivery
 * holds the id (`conflict`).
 */
export async function retryDead(db: Queryable, id: string, when: number): Promise<RetryDeadResult> {
  const r = await db.query<WakeRow>(
    `WITH l AS (SELECT pg_advisory_xact_lock(${SEQ_LOCK}) AS x),
     d AS (DELETE FROM berm_dead WHERE id = $1
             AND NOT EXISTS (SELECT 1 FROM berm_wakes WHERE id = $1 AND NOT redelivery)
           RETURNING *),
     a AS (INSERT INTO berm_wakes (${COLS}, attempt)
             SELECT id, kind, harness, entry, $2, payload, armed_by, chain, depth, armed_at, authority, 0
             FROM d, l
           RETURNING *),
     n AS (SELECT pg_notify('${WAKES_CHANNEL}', max(seq)::text) FROM a HAVING count(*) > 0)
     SELECT a.* FROM a, n`,
    [id, when],
  );
  if (r.rows[0]) return { status: 'armed', record: wake(r.rows[0]) };
  const there = await db.query('SELECT 1 FROM berm_dead WHERE id = $1', [id]);
  return (there.rowCount ?? 0) > 0 ? { status: 'conflict' } : { status: 'missing' };
}

/** Remove entry `id` of the dead-letter set. @returns it, or null */
export async function dropDead(db: Queryable, id: string): Promise<PgDead | null> {
  const r = await db.query<DeadRow>('DELETE FROM berm_dead WHERE id = $1 RETURNING *', [id]);
  return r.rows[0] ? dead(r.rows[0]) : null;
}

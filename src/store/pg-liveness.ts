/**
 * Liveness of the daemons sharing one PostgreSQL due-set: a daemon that dies loses its claims at
 * once, not after its lease.
 *
 * Each daemon holds a session-level advisory lock, key (OWNER_LOCK_CLASS, hashtext(owner)), on
 * its LISTEN connection, taken before it claims anything. PostgreSQL releases a session lock when
 * the session ends, which it sees at once when the daemon's process dies (SIGKILL, a crash: the
 * kernel closes the socket) and after the TCP keepalive when its host vanishes. Every
 * {@link LIVENESS_INTERVAL_MS} each daemon looks for claims whose owner holds no such lock and puts
 * them back into the pending set as redeliveries (attempt kept; the next delivery counts attempt +
 * 1), notifying the others in the same statement, exactly as lease expiry does. A daemon that hangs
 * without dying keeps its session, and so its lock: its claims come back through lease expiry, the
 * lease renewal being its heartbeat (renewed every third of the lease by its event loop).
 *
 * A daemon that loses its LISTEN connection while it lives (the database restarted, the network
 * cut) loses the lock too, so its running claims are redelivered elsewhere at once: at-least-once,
 * each repeat journaled with its attempt number, as when its lease expires during an outage. It
 * claims nothing until it holds the lock again.
 *
 * A daemon that dies in the middle of its claim statement leaves no claim: the rows it had locked
 * roll back to pending, but the others skipped them (SKIP LOCKED) and dropped them from their due
 * heaps. So when an owner's lock disappears, each daemon adopts the overdue wakes of its harnesses
 * into its heap at once rather than at its next look for orphans (once per lease period).
 *
 * Two owners whose names hash alike share a key: the dead one's claims then wait for their lease
 * (the safe direction: never taken from a live daemon).
 */
import type pg from 'pg';
import { requeueClaims, type Queryable } from './pg-sql.js';

/** First key of the owners' session locks ("bero" in ASCII; the second key is hashtext(owner)). */
export const OWNER_LOCK_CLASS = 0x6265726f;

/** How often a daemon looks for claims of dead owners, ms. */
export const LIVENESS_INTERVAL_MS = 200;

/** The claims of owners that hold no session lock in this database, as a WHERE condition on `c`. */
const OWNER_GONE = `NOT EXISTS (
  SELECT 1 FROM pg_locks k
  WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 2
    AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND k.classid = ${OWNER_LOCK_CLASS}::oid AND k.objid = hashtext(c.owner)::oid)`;

/**
 * Take `owner`'s session lock on `client` (a connection kept open for the process's life).
 * @returns false when another session holds the same key (an owner whose name hashes alike, or
 *   this owner's previous session not yet ended): this daemon's claims then rely on their lease
 * @throws pg errors when the query fails
 */
export async function holdOwnerLock(client: pg.Client, owner: string): Promise<boolean> {
  const r = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, hashtext($2)) AS ok', [
    OWNER_LOCK_CLASS,
    owner,
  ]);
  return r.rows[0]?.ok === true;
}

/**
 * Put every claim whose owner holds no session lock back into the pending set as a redelivery
 * with a fresh seq (attempt kept) and notify, in one statement; a cheap read first, so the
 * seq lock is taken only when there is something to move. At most 10,000 per call.
 * @returns how many claims were put back, the owners they came from, and the owner lock keys
 *   held now (second keys, as unsigned 32-bit numbers): a key that was held at the previous call
 *   and is not now is a daemon gone, whose claim statement may have died holding row locks the
 *   others skipped
 */
export async function takeBackFromGone(
  db: Queryable,
): Promise<{ moved: number; owners: string[]; held: Set<number> }> {
  const r = await db.query<{ gone: string[] | null; held: string[] | null }>(
    `SELECT (SELECT array_agg(DISTINCT c.owner) FROM berm_claims c WHERE ${OWNER_GONE}) AS gone,
            (SELECT array_agg(k.objid::int8) FROM pg_locks k
              WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 2
                AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                AND k.classid = ${OWNER_LOCK_CLASS}::oid) AS held`,
  );
  const owners = r.rows[0]?.gone ?? [];
  const held = new Set((r.rows[0]?.held ?? []).map(Number));
  if (owners.length === 0) return { moved: 0, owners, held };
  return { moved: await requeueClaims(db, OWNER_GONE), owners, held };
}

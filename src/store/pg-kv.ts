/**
 * The storage capability's keys in PostgreSQL (several daemons share them): a job module of the
 * synchronous bridge (src/sync/bridge.ts), so a guest blocked in its ecall gets the answer of an
 * asynchronous pg query. The bridge worker of each calling thread keeps one small pool per URL.
 * Table berm_kv has the shape of the SQLite table (harness, key, value); the quota check and the
 * write run in one transaction under an advisory lock on the harness, so two daemons cannot both
 * squeeze under the quota.
 */
import pg from 'pg';
import { KV_TABLE } from './pg-schema.js';

const pools = new Map<string, Promise<pg.Pool>>();

/** True when `database` names a PostgreSQL database rather than a SQLite file. */
export function isPostgresUrl(database: string): boolean {
  return /^postgres(ql)?:\/\//.test(database);
}

function pool(url: string): Promise<pg.Pool> {
  let p = pools.get(url);
  if (!p) {
    p = (async () => {
      const pl = new pg.Pool({ connectionString: url, max: 2, connectionTimeoutMillis: 5000 });
      pl.on('error', () => {});
      await pl.query(KV_TABLE);
      return pl;
    })();
    p.catch(() => pools.delete(url));
    pools.set(url, p);
  }
  return p;
}

/** A request of the storage capability. Keys and values are bytes. */
export type KvJob =
  | { url: string; op: 'get'; harness: string; key: Uint8Array }
  | { url: string; op: 'set'; harness: string; key: Uint8Array; value: Uint8Array; quota: number }
  | { url: string; op: 'delete'; harness: string; key: Uint8Array };

/**
 * Run one request (bridge entry point).
 * @returns get: the value or null; set: null, or `{quotaAfter}` (bytes the harness would store)
 *   when the quota refuses the write; delete: null
 * @param signal aborts at the call's deadline or the store's timeout: the connection is closed
 *   then, so the job ends at once and the server rolls back what it left open
 * @throws pg errors (connection refused, timeout, the connection closed by the signal): the
 *   capability refuses the call with them
 */
export async function kv(
  job: KvJob,
  signal: AbortSignal,
): Promise<Uint8Array | null | { quotaAfter: number }> {
  const p = await pool(job.url);
  signal.throwIfAborted();
  const key = Buffer.from(job.key.buffer, job.key.byteOffset, job.key.byteLength);
  const c = await p.connect();
  // The caller gives up at the call's deadline (the signal): close the connection at once, so a
  // query waiting on a lock or a slow server ends now, and the server, finding the connection
  // gone, rolls back a transaction this job left open. (Client.end would wait for the server's
  // reply to its Terminate message, which a backend waiting on a lock does not read.)
  let dropped = false;
  const drop = () => {
    dropped = true;
    c.on('error', () => {}); // the closed connection's error goes to the query waiting on it
    (c as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
  };
  signal.addEventListener('abort', drop, { once: true });
  try {
    signal.throwIfAborted();
    switch (job.op) {
      case 'get': {
        const r = await c.query<{ value: Buffer }>(
          'SELECT value FROM berm_kv WHERE harness = $1 AND key = $2',
          [job.harness, key],
        );
        const v = r.rows[0]?.value;
        return v ? new Uint8Array(v) : null;
      }
      case 'delete':
        await c.query('DELETE FROM berm_kv WHERE harness = $1 AND key = $2', [job.harness, key]);
        return null;
      case 'set': {
        const value = Buffer.from(job.value.buffer, job.value.byteOffset, job.value.byteLength);
        try {
          await c.query('BEGIN');
          await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`berm_kv:${job.harness}`]);
          const used = await c.query<{ used: string; old: string }>(
            `SELECT COALESCE(SUM(length(key) + length(value)), 0) AS used,
                    COALESCE(SUM(length(key) + length(value)) FILTER (WHERE key = $2), 0) AS old
             FROM berm_kv WHERE harness = $1`,
            [job.harness, key],
          );
          const after = Number(used.rows[0]!.used) - Number(used.rows[0]!.old) + key.length + value.length;
          if (after > job.quota) {
            await c.query('ROLLBACK');
            return { quotaAfter: after };
          }
          await c.query(
            'INSERT INTO berm_kv (harness, key, value) VALUES ($1, $2, $3) ON CONFLICT (harness, key) DO UPDATE SET value = EXCLUDED.value',
            [job.harness, key, value],
          );
          await c.query('COMMIT');
          return null;
        } catch (e) {
          if (!dropped) await c.query('ROLLBACK').catch(() => {});
          throw e;
        }
      }
    }
    throw new Error(`unknown storage operation ${(job as { op: string }).op}`);
  } finally {
    signal.removeEventListener('abort', drop);
    // a dropped connection leaves the pool with its client
    c.release(dropped ? new Error('the call gave up on this connection') : undefined);
  }
}

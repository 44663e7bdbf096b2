/**
 * The protocol door's subscriptions in PostgreSQL (table berm_subscriptions, pg-schema.ts), shared
 * by every daemon of the database: a subscription made through one daemon's door is listed,
 * removed and delivered through any other's. Two halves: the queries, run by the synchronous
 * bridge's job module (pg-job.ts, op `subscriptions`), and {@link pgSubscriptions}, the store's
 * synchronous {@link SubscriptionStore} over them.
 *
 * A `once` subscription is removed when one daemon's queue accepted a delivery of it; two daemons
 * publishing its source at the same moment may both deliver it before either removes it
 * (at-least-once, as a delivery whose removal failed).
 */
import type pg from 'pg';
import type { Authority } from '../contract/index.js';
import type { Queryable } from './pg-sql.js';
import type { SubscriptionImport, SubscriptionRecord, SubscriptionStore } from './store.js';

/** The operations of {@link runSubscriptions} (the methods of SubscriptionStore). */
export type SubscriptionOp = 'count' | 'add' | 'remove' | 'list' | 'bySource' | 'importRecords';

interface Row {
  id: string;
  source: string;
  harness: string;
  once: boolean;
  authority: Authority;
  created_at: number;
}

const record = (r: Row): SubscriptionRecord => ({
  id: Number(r.id),
  source: r.source,
  harness: r.harness,
  once: r.once,
  authority: r.authority,
  createdAt: r.created_at,
});

async function list(db: Queryable, where: string, value: string | undefined): Promise<SubscriptionRecord[]> {
  const r = await db.query<Row>(
    `SELECT * FROM berm_subscriptions ${value === undefined ? '' : `WHERE ${where} = $1`} ORDER BY id`,
    value === undefined ? [] : [value],
  );
  return r.rows.map(record);
}

/**
 * Import in one transaction, holding off other writers of the table (SHARE ROW EXCLUSIVE) so the
 * id sequence can be moved past the ids kept: bigserial does not see ids given explicitly.
 */
async function importRecords(
  pool: pg.Pool,
  records: readonly SubscriptionRecord[],
): Promise<SubscriptionImport> {
  const done: SubscriptionImport = { kept: 0, renumbered: [], present: 0 };
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    await c.query('LOCK TABLE berm_subscriptions IN SHARE ROW EXCLUSIVE MODE');
    for (const r of records) {
      const row = [r.source, r.harness, r.once, JSON.stringify(r.authority), r.createdAt];
      const equal = await c.query(
        `SELECT 1 FROM berm_subscriptions WHERE source = $1 AND harness = $2 AND once = $3
           AND authority = $4::jsonb AND created_at = $5`,
        row,
      );
      if (equal.rowCount !== 0) {
        done.present++;
        continue;
      }
      const kept = await c.query(
        `INSERT INTO berm_subscriptions (id, source, harness, once, authority, created_at)
         VALUES ($6, $1, $2, $3, $4::jsonb, $5) ON CONFLICT (id) DO NOTHING`,
        [...row, r.id],
      );
      if (kept.rowCount === 1) {
        done.kept++;
        continue;
      }
      const fresh = await c.query<{ id: string }>(
        `INSERT INTO berm_subscriptions (source, harness, once, authority, created_at)
         VALUES ($1, $2, $3, $4::jsonb, $5) RETURNING id`,
        row,
      );
      done.renumbered.push([r.id, Number(fresh.rows[0]!.id)]);
    }
    // the next id drawn must come after every id kept
    await c.query(
      `SELECT setval('berm_subscriptions_id_seq', m.top)
         FROM (SELECT max(id) AS top FROM berm_subscriptions) m, berm_subscriptions_id_seq s
        WHERE m.top >= CASE WHEN s.is_called THEN s.last_value + 1 ELSE s.last_value END`,
    );
    await c.query('COMMIT');
    return done;
  } catch (e) {
    await c.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    c.release();
  }
}

/**
 * Run one subscription operation against `pool` (the bridge job's side).
 * @param args the SubscriptionStore method's arguments
 * @throws whatever the query throws (the bridge turns it into `{ok: false, error}`)
 */
export async function runSubscriptions(pool: pg.Pool, op: SubscriptionOp, args: unknown[]): Promise<unknown> {
  switch (op) {
    case 'count': {
      const r = await pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM berm_subscriptions WHERE harness = $1',
        [args[0]],
      );
      return r.rows[0]!.n;
    }
    case 'add': {
      const s = args[0] as Omit<SubscriptionRecord, 'id'>;
      const r = await pool.query<{ id: string }>(
        `INSERT INTO berm_subscriptions (source, harness, once, authority, created_at)
         VALUES ($1, $2, $3, $4::jsonb, $5) RETURNING id`,
        [s.source, s.harness, s.once, JSON.stringify(s.authority), s.createdAt],
      );
      return Number(r.rows[0]!.id);
    }
    case 'remove': {
      const [id, harness] = args as [number, string | undefined];
      const r =
        harness === undefined
          ? await pool.query('DELETE FROM berm_subscriptions WHERE id = $1', [id])
          : await pool.query('DELETE FROM berm_subscriptions WHERE id = $1 AND harness = $2', [id, harness]);
      return r.rowCount === 1;
    }
    case 'list':
      return list(pool, 'harness', args[0] as string | undefined);
    case 'bySource':
      return list(pool, 'source', args[0] as string);
    case 'importRecords':
      return importRecords(pool, args[0] as SubscriptionRecord[]);
  }
}

/**
 * The PostgreSQL {@link SubscriptionStore}: each method one blocking round trip through `call`
 * (PgStore's bridge call, which throws PgStoreError when the database is away).
 */
export function pgSubscriptions(call: <T>(op: SubscriptionOp, ...args: unknown[]) => T): SubscriptionStore {
  return {
    count: (harness) => call<number>('count', harness),
    add: (spec) => call<number>('add', spec),
    remove: (id, harness) => call<boolean>('remove', id, harness),
    list: (harness) => call<SubscriptionRecord[]>('list', harness),
    bySource: (source) => call<SubscriptionRecord[]>('bySource', source),
    importRecords: (records) => call<SubscriptionImport>('importRecords', records),
  };
}

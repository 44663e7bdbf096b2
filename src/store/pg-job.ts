/**
 * The PostgreSQL backend's operations as a job module of the synchronous bridge
 * (src/sync/bridge.ts): the bridge worker imports this module once and keeps one small
 * connection pool per database URL, so the synchronous store (pg-store.ts) blocks only for the
 * round trip of each call.
 */
import pg from 'pg';
import * as sql from './pg-sql.js';
import * as dead from './pg-dead.js';
import { runSubscriptions, type SubscriptionOp } from './pg-subscriptions.js';

const pools = new Map<string, pg.Pool>();

/** The bridge worker's pool for `url` (created on first use; a broken connection is dropped). */
function pool(url: string): pg.Pool {
  let p = pools.get(url);
  if (!p) {
    p = new pg.Pool({
      connectionString: url,
      max: 2,
      connectionTimeoutMillis: 5000,
      idleTimeoutMillis: 30_000,
    });
    // an idle client that loses its connection must not take the worker down; the next query reconnects
    p.on('error', () => {});
    pools.set(url, p);
  }
  return p;
}

/** One operation: `op` names a function of pg-sql.ts, `args` its arguments after the pool. */
export interface PgJob {
  url: string;
  op:
    | 'arm'
    | 'cancel'
    | 'get'
    | 'list'
    | 'count'
    | 'countArmedBy'
    | 'index'
    | 'window'
    | 'lastSeq'
    | 'claim'
    | 'claimDue'
    | 'claimedBy'
    | 'reclaim'
    | 'finish'
    | 'release'
    | 'putDeployment'
    | 'removeDeployment'
    | 'getDeployment'
    | 'listDeployments'
    | 'listReferenceImports'
    | 'putReferenceImports'
    | 'appendJournal'
    | 'flush'
    | 'deadLetter'
    | 'deadList'
    | 'deadCounts'
    | 'retryDead'
    | 'dropDead'
    /** args: the SubscriptionOp, then its arguments */
    | 'subscriptions';
  args: unknown[];
}

/**
 * Run one job (bridge entry point).
 * @throws whatever the query throws (the bridge turns it into `{ok: false, error}`)
 */
export async function run(job: PgJob, signal: AbortSignal): Promise<unknown> {
  const p = pool(job.url);
  const work = (async (): Promise<unknown> => {
    const a = job.args;
    switch (job.op) {
      case 'arm': {
        const r = await sql.arm(p, a[0] as sql.PgWakeSpec[]);
        return { records: r.records, replaced: [...r.replaced] };
      }
      case 'cancel':
        return sql.cancel(p, a[0] as string, a[1] as string | undefined);
      case 'get':
        return (await sql.get(p, a[0] as string)) ?? null;
      case 'list':
        return sql.list(p, a[0] as { harness?: string; limit?: number; maxBytes?: number });
      case 'count':
        return sql.count(p);
      case 'countArmedBy':
        return sql.countArmedBy(p, a[0] as string, a[1] as number, a[2] as string | undefined);
      case 'index': {
        const r = await sql.index(p, a[0] as number);
        return { when: Float64Array.from(r.when), seq: Float64Array.from(r.seq) };
      }
      case 'window': {
        const r = await sql.window(p, a[0] as [number, number] | null, a[1] as number);
        return { when: Float64Array.from(r.when), seq: Float64Array.from(r.seq) };
      }
      case 'lastSeq':
        return sql.lastSeq(p);
      case 'claim':
        return sql.claim(p, a[0] as number, a[1] as string, a[2] as number, a[3] as string[] | null);
      case 'claimDue':
        return sql.claimDue(
          p,
          a[0] as number,
          a[1] as string,
          a[2] as number,
          a[3] as string[] | null,
          a[4] as number,
          a[5] as [number, number],
        );
      case 'claimedBy':
        return sql.claimedBy(p, a[0] as string);
      case 'reclaim':
        return sql.reclaim(p, a[0] as string, a[1] as number, a[2] as string, a[3] as number);
      case 'finish':
        return sql.finish(p, a[0] as [string, number][]);
      case 'release':
        return sql.release(p, a[0] as string, a[1] as number, a[2] as number);
      case 'putDeployment':
        return sql.putDeployment(p, a[0] as sql.PgDeployment, a[1] as string);
      case 'removeDeployment':
        return sql.removeDeployment(p, a[0] as string, a[1] as string);
      case 'getDeployment':
        return (await sql.getDeployment(p, a[0] as string)) ?? null;
      case 'listDeployments':
        return sql.listDeployments(p);
      case 'listReferenceImports':
        return sql.listReferenceImports(p);
      case 'putReferenceImports':
        return sql.putReferenceImports(p, a[0] as [string, string][]);
      case 'appendJournal':
        return sql.appendJournal(p, a[0] as string, a[1] as sql.JournalRow[]);
      case 'deadLetter':
        return dead.deadLetter(
          p,
          a[0] as string,
          a[1] as sql.JournalRow[],
          a[2] as string,
          a[3] as number,
          a[4] as dead.PgDeadSpec,
        );
      case 'deadList':
        return dead.deadList(p, a[0] as { harness?: string; limit?: number });
      case 'deadCounts':
        return dead.deadCounts(p);
      case 'retryDead':
        return dead.retryDead(p, a[0] as string, a[1] as number);
      case 'dropDead':
        return dead.dropDead(p, a[0] as string);
      case 'subscriptions':
        return runSubscriptions(p, a[0] as SubscriptionOp, a.slice(1));
      case 'flush': {
        // journal records then finished claims, in that order (at-least-once: never the reverse)
        await sql.appendJournal(p, a[0] as string, a[1] as sql.JournalRow[]);
        await sql.finish(p, a[2] as [string, number][]);
        return null;
      }
    }
  })();
  return await new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}

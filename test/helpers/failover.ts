// Failover of a claimed wake between bermd sharing one PostgreSQL (test/pg-failover.test.ts and
// make bench's failover section): arm a wake whose guest spins, find the daemon that claimed it
// (the claim's owner names its pid), SIGKILL that daemon, and time until another daemon holds
// the claim (attempt 2): the kill-to-refire time. The killed daemon is started again.
import pg from 'pg';
import { http, startBermd, stopBermd, type Bermd, type BermdOptions } from './cluster.js';
import { sleep } from './wait.js';

/** The claim of wake `id`, or null. */
export async function claimOf(db: pg.Client, id: string): Promise<{ owner: string; attempt: number } | null> {
  const r = await db.query<{ owner: string; attempt: number }>(
    'SELECT owner, attempt FROM berm_claims WHERE id = $1 ORDER BY seq DESC LIMIT 1',
    [id],
  );
  return r.rows[0] ?? null;
}

/** The pid in a store owner name (`host:pid:random`, src/store/pg-store.ts). */
export function ownerPid(owner: string): number {
  const parts = owner.split(':');
  return Number(parts[parts.length - 2]);
}

/** What one round measured. */
export interface FailoverRound {
  /** SIGKILL of the claiming daemon to the claim held by another daemon, ms */
  refireMs: number;
  killedOwner: string;
  newOwner: string;
  /** the attempt the new claim counts */
  attempt: number;
}

/**
 * One failover: arm wake `id` (payload "spin": the queue guest spins until the wake's deadline) on
 * harness `qg`, wait until it is claimed, SIGKILL the claiming daemon, poll (every 2 ms) until
 * another daemon claims it. With `restart`, `nodes[i]` is replaced by a restarted daemon (opts(i)).
 * @throws Error when a step does not happen within `boundMs` (the message says which)
 */
export async function failoverRound(
  db: pg.Client,
  nodes: Bermd[],
  opts: (i: number) => BermdOptions,
  id: string,
  boundMs = 30_000,
  restart = true,
): Promise<FailoverRound> {
  const live = nodes.find((b) => b.proc.exitCode === null && b.proc.signalCode === null);
  if (live === undefined) throw new Error('no daemon left to arm on');
  const a = await http(`${live.url}/wakes`, 'POST', { harness: 'qg', id, delay_ms: 0, payload: 'spin' });
  if (a.status !== 201) throw new Error(`arm ${id}: ${a.status} ${JSON.stringify(a.body)}`);
  let first: { owner: string; attempt: number } | null = null;
  for (const end = Date.now() + boundMs; first === null; await sleep(5)) {
    if (Date.now() > end) throw new Error(`${id} was not claimed within ${boundMs} ms`);
    first = await claimOf(db, id);
  }
  const i = nodes.findIndex((b) => b.proc.pid === ownerPid(first.owner));
  if (i < 0) throw new Error(`${id} is claimed by ${first.owner}, none of the daemons`);
  nodes[i]!.proc.kill('SIGKILL');
  const t0 = performance.now();
  let next: { owner: string; attempt: number } | null = null;
  for (const end = Date.now() + boundMs; ; await sleep(2)) {
    next = await claimOf(db, id);
    if (next !== null && next.owner !== first.owner) break;
    if (Date.now() > end) throw new Error(`${id} was not claimed again within ${boundMs} ms of the kill`);
  }
  const refireMs = performance.now() - t0;
  await stopBermd(nodes[i]!);
  if (restart) nodes[i] = await startBermd(opts(i));
  return { refireMs, killedOwner: first.owner, newOwner: next.owner, attempt: next.attempt };
}

/**
 * bermd on a shared PostgreSQL store (docs/scale-out.md): the deployments of every daemon follow
 * the database, wakes armed on any daemon reach every daemon's due heap, and invocations are
 * refused cleanly while the database is away.
 *
 * - A deploy or undeploy acknowledged here was recorded in the database (the runtime's store: the
 *   one record of every daemon's deployments; src/daemon/deployments.ts writes it before the
 *   acknowledgement, a write that fails is a failed request) and is announced; the image files
 *   under --root are this daemon's local copies.
 * - A deploy announced by another daemon is read from the database and deployed here through the
 *   same path as an upload (this daemon's declaration decides the grant; the image compiles on
 *   this daemon's workers and cache), so MCP clients of every daemon get list_changed.
 * - At boot the database is the source of truth: the daemon restores what it records (one read of
 *   each record with its bytes, src/daemon/deployments.ts load), and the changes other daemons
 *   announce from the moment the backend exists (before that read) are held and applied once the
 *   restore is done, so none made meanwhile is missed and nothing is read twice.
 * - Announcements sent while this daemon's LISTEN connection was down are lost to it: once it
 *   listens again, the records (names and digests, no bytes) are compared with what it serves and
 *   holds, and the differences applied as their announcements would have been; a record it holds
 *   without serving it (its restore failed) is deployed again, as at boot.
 */
import type { DueFollower, PgStore } from '../store/pg-store.js';
import type { InvokeOutcome } from '../contract/index.js';
import type { BermRuntime } from '../runtime/index.js';
import type { Backend } from './backend.js';
import type { Deployments } from './deployments.js';
import { QueueBackend } from './queue-backend.js';

/** What {@link followCluster} needs of the runtime behind the backend (BermRuntime has it). */
export type Rescannable = DueFollower;

/**
 * The backend of a daemon on a shared store: the queue's backend with invocations refused (not
 * run, not lost) while the database is away — their journal record could not be written — and
 * {@link Backend.join} keeping deployments and the due heap in step with the other daemons.
 */
export class ClusterBackend extends QueueBackend {
  private readonly following: ClusterFollower;

  /**
   * Starts holding the deployment changes other daemons announce (see {@link followCluster}), so
   * it is constructed before the store's deployments are read.
   * @param runtime the queue, on `store`
   * @param store the shared PostgreSQL store the runtime was opened on
   * @param log one line per event worth the operator's attention (a deployment that failed to follow)
   */
  constructor(
    runtime: BermRuntime,
    private readonly store: PgStore,
    log: (line: string) => void,
  ) {
    super(runtime);
    this.following = followCluster(store, runtime, log);
  }

  /**
   * As {@link QueueBackend.invoke}, but while the store is unreachable the call is refused with
   * `store-unavailable` (nothing runs).
   */
  override async invoke(...args: Parameters<Backend['invoke']>): Promise<InvokeOutcome> {
    if (!this.store.available) {
      return {
        status: 'error',
        code: 'store-unavailable',
        message: `the shared store is unreachable (${this.store.problem ?? 'unknown'}); retry when PostgreSQL is back`,
      };
    }
    return super.invoke(...args);
  }

  /** Follow the other daemons: see {@link followCluster}. */
  join(deployments: Deployments): Promise<string[]> {
    return this.following.join(deployments);
  }
}

/** The deployment changes of the other daemons, held from {@link followCluster} until `join`. */
export interface ClusterFollower {
  /**
   * Apply the changes held so far to `deployments` (restored from the store's records, read after
   * {@link followCluster} was called), then every later one as it comes, and follow the due heap
   * of the other daemons. Call once; resolves when the held changes are applied.
   * @returns the held changes that could not be applied, one line each (later ones are logged)
   */
  join(deployments: Deployments): Promise<string[]>;
}

/**
 * Start holding the deployment changes the other daemons announce on `store`. Called before the
 * store's deployments are read for the restore, so each record is read once at boot: a change
 * made before that read is in it, one made after is held here, and one made in between is in
 * both (its record is then read again and left as it is when the restore published that digest).
 * A change is applied without being written back: the database holds it already.
 */
export function followCluster(
  store: PgStore,
  runtime: Rescannable,
  log: (line: string) => void,
): ClusterFollower {
  let target: Deployments | null = null;
  /** failures of the changes held until join, then null (later failures are logged) */
  let held: string[] | null = [];
  // a change is applied from the record as it is when the name's turn comes (Deployments.follow),
  // not as announced: a put and a remove are the same step, and a deploy or undeploy acknowledged
  // here after the change was made is never undone by it. A record held without being served (its
  // restore failed) goes with its name: its copy and its image
  const apply = (d: Deployments, c: { name: string; op: 'put' | 'remove'; by: string }): Promise<void> =>
    d.follow(c.name).then(undefined, (e: unknown) => {
      const line = `deployment ${c.name} from ${c.by} not applied: ${(e as Error).message}`;
      if (held !== null) held.push(line);
      else log(line);
    });
  /**
   * The changes announced while the store's listener was down (never delivered): each record this
   * daemon does not serve with its digest (a new or changed record, or one its boot or an earlier
   * change could not put in place: retried as boot retries it) is applied as announced (its bytes
   * read then), and each name held here without a record, served or not, is removed.
   */
  const catchUp = async (d: Deployments): Promise<void> => {
    let recs: { name: string; sha256: string }[];
    try {
      recs = await store.deploymentDigests();
    } catch (e) {
      log(`deployments not compared with the store yet (again once it answers): ${(e as Error).message}`);
      return;
    }
    const by = 'a daemon, while this one was not listening';
    const inStore = new Set<string>();
    for (const r of recs) {
      inStore.add(r.name);
      if (d.get(r.name)?.digest !== r.sha256) await apply(d, { name: r.name, op: 'put', by });
    }
    for (const name of d.heldNames()) if (!inStore.has(name)) await apply(d, { name, op: 'remove', by });
  };
  // changes apply in order, one at a time, once join released them
  let release!: () => void;
  let chain = new Promise<void>((r) => (release = r));
  store.on('deployment', (c: { name: string; op: 'put' | 'remove'; by: string }) => {
    chain = chain.then(() => apply(target!, c));
  });
  // the listener is back after a drop: the catch-up takes its turn among the announced changes
  // (the ones announced from now on follow it, each applied from the record as it is then)
  store.on('relisten', () => {
    chain = chain.then(() => catchUp(target!));
  });
  return {
    async join(deployments: Deployments): Promise<string[]> {
      target = deployments;
      store.follow(runtime);
      runtime.rescan();
      release();
      await chain;
      const problems = held ?? [];
      held = null;
      return problems;
    },
  };
}

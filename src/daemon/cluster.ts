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
 * - At boot the database is the source of truth: the daemon restores what it records, then what
 *   it holds and this daemon lacks (or holds with another digest) is deployed, what this daemon
 *   holds and it lacks is removed.
 */
import type { DueFollower, PgStore } from '../store/pg-store.js';
import { untilStoreAnswers } from '../store/store-fault.js';
import type { InvokeOutcome } from '../contract/index.js';
import type { BermRuntime } from '../runtime/index.js';
import type { Backend } from './backend.js';
import type { Deployments } from './deployments.js';
import { QueueBackend } from './queue-backend.js';

/** What {@link joinCluster} needs of the runtime behind the backend (BermRuntime has it). */
export type Rescannable = DueFollower;

/**
 * The backend of a daemon on a shared store: the queue's backend with invocations refused (not
 * run, not lost) while the database is away — their journal record could not be written — and
 * {@link Backend.join} keeping deployments and the due heap in step with the other daemons.
 */
export class ClusterBackend extends QueueBackend {
  /**
   * @param runtime the queue, on `store`
   * @param store the shared PostgreSQL store the runtime was opened on
   * @param log one line per event worth the operator's attention (a deployment that failed to follow)
   */
  constructor(
    runtime: BermRuntime,
    private readonly store: PgStore,
    private readonly log: (line: string) => void,
  ) {
    super(runtime);
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

  /** Follow the other daemons: see {@link joinCluster}. */
  join(deployments: Deployments): Promise<string[]> {
    return joinCluster(deployments, this.store, this.runtime, this.log);
  }
}

/**
 * Bring `deployments` in line with the database, then keep it (and the runtime's due heap) in
 * step with the other daemons.
 * @returns problems met at boot, one line each (an image that no longer deploys here)
 */
export async function joinCluster(
  deployments: Deployments,
  store: PgStore,
  runtime: Rescannable,
  log: (line: string) => void,
): Promise<string[]> {
  const problems: string[] = [];

  // changes another daemon made: the database holds them already, so they are applied here
  // without being written back
  const applyPut = async (name: string): Promise<void> => {
    const rec = store.deployments.get(name);
    if (!rec) return;
    if (deployments.get(name)?.digest === rec.sha256) return;
    // the shared store holds every record's bytes (holdsImages)
    if (rec.elf === null) throw new Error(`the shared store holds no image for ${name}`);
    await deployments.deploy(name, rec.elf, { recordedAt: rec.deployedAt });
  };
  const applyRemove = async (name: string): Promise<void> => {
    if (!deployments.get(name)) return;
    await deployments.undeploy(name, { recorded: true });
  };

  // listen before reading the database, so no change made meanwhile is missed; apply changes only
  // after the boot sync (in order, one at a time)
  let release!: () => void;
  let chain = new Promise<void>((r) => (release = r));
  store.on('deployment', (c: { name: string; op: 'put' | 'remove'; by: string }) => {
    chain = chain
      .then(() => (c.op === 'put' ? applyPut(c.name) : applyRemove(c.name)))
      .catch((e: unknown) => log(`deployment ${c.name} from ${c.by} not applied: ${(e as Error).message}`));
  });
  store.follow(runtime);
  runtime.rescan();

  // the database may be away for a moment (restarted while this daemon started): the daemon
  // listens already and answers 503 until its deployments are in place, so it waits for the
  // database rather than exit
  const records = await untilStoreAnswers(
    () => store.deployments.list(),
    (why, wait) => log(`the shared store's deployments cannot be read yet (${why}); again in ${wait} ms`),
  );
  const shared = new Set<string>();
  for (const rec of records) {
    shared.add(rec.name);
    try {
      await applyPut(rec.name);
    } catch (e) {
      problems.push(
        `harness ${rec.name} (sha256 ${rec.sha256}) from the shared store: ${(e as Error).message}`,
      );
    }
  }
  for (const d of deployments.list()) if (!shared.has(d.name)) await applyRemove(d.name);

  release();
  return problems;
}

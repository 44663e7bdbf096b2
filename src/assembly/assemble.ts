/**
 * The runtime as bermd and the foreground queue (`berm worker`) run it, assembled in one place so
 * the two cannot diverge: the store (SQLite under the state directory, or PostgreSQL shared with
 * other processes), the queue (BermRuntime) with its limits and workers, the protocol door's
 * capabilities linked in every worker, and the door attached (the harness event bus, its service
 * for guests, and, when asked, berm's protocol endpoint).
 *
 * What stays with the caller: following a shared store (bermd mirrors deployments, berm worker
 * only wakes), deploying harnesses, and starting the queue.
 */
import * as path from 'node:path';
import { PgStore, isPostgresStore } from '../store/pg-store.js';
import { attachProtocol, type AttachedProtocol } from '../protocol/attach.js';
import { PROTOCOL_SERVICE } from '../protocol/groups.js';
import { PROTOCOL_MODULE } from '../protocol/index.js';
import { BermRuntime, type LimitSource, type RuntimeLimits } from '../runtime/index.js';

/** What {@link assembleRuntime} builds the runtime from. */
export interface RuntimeSettings {
  /** who runs it, for messages ('bermd', 'berm worker') */
  who: string;
  /**
   * the state directory: the SQLite store (without `store`); a subscriptions.sqlite an older berm
   * kept there for the protocol door is imported into the store once (renamed .imported)
   */
  state: string;
  /** a postgres:// URL of a store shared with other processes, or null for SQLite under `state` */
  store: string | null;
  /** with `store`: the lease of a claimed wake, ms (default the store's, 10,000) */
  leaseMs?: number;
  /** the Wasm cache directory, or null for none */
  cacheDir: string | null;
  /** worker threads (default: the number of cores + 1, runtime/limits.ts defaultPoolSize) */
  workers?: number;
  /** resident bytes of the instance slots the workers keep, all together (default the runtime's) */
  instanceMemory?: number;
  /** overrides of the queue's limits, with where each came from (flag, env, file) */
  limits: Partial<RuntimeLimits>;
  limitSources: Partial<Record<keyof RuntimeLimits, LimitSource>>;
  /** guest memory size, bytes (default the engine's) */
  memorySize?: number;
  /** the runtime's, the store's and the door's log lines */
  log: (line: string) => void;
  /** host:port of berm's protocol endpoint (the agent daemon's side), or null for none */
  protocolEndpoint?: string | null;
}

/** A runtime assembled by {@link assembleRuntime}, not started. */
export interface AssembledRuntime {
  runtime: BermRuntime;
  /** the shared store when `store` was given (the runtime's store), else null */
  shared: PgStore | null;
  door: AttachedProtocol;
  /** close the door, then the runtime (its drain up to `drainMs`) and its store */
  close(drainMs?: number): Promise<void>;
}

/** A setting the runtime cannot be assembled with; the message names it (`--store: ...`). */
export class AssemblyError extends Error {
  override name = 'AssemblyError';
}

/**
 * Open the store, create the queue with the protocol door's capabilities in its workers, and
 * attach the door. No guest runs; the caller deploys and calls `runtime.start()`.
 * @throws AssemblyError for a store that is not a postgres:// URL or cannot be opened, and for
 *   bad limits or worker counts; whatever opening the door throws (the runtime is closed first)
 */
export async function assembleRuntime(s: RuntimeSettings): Promise<AssembledRuntime> {
  let shared: PgStore | null = null;
  if (s.store !== null) {
    if (!isPostgresStore(s.store))
      throw new AssemblyError(
        `--store ${s.store}: give a postgres:// URL (or leave it out for SQLite under the state directory)`,
      );
    try {
      shared = await PgStore.open(s.store, {
        ...(s.leaseMs !== undefined ? { leaseMs: s.leaseMs } : {}),
        log: s.log,
      });
    } catch (e) {
      throw new AssemblyError(`--store: ${(e as Error).message}`);
    }
  }
  let runtime: BermRuntime;
  try {
    runtime = await BermRuntime.create({
      state: s.state,
      ...(shared ? { store: shared } : {}),
      cacheDir: s.cacheDir,
      ...(s.workers !== undefined ? { poolSize: s.workers } : {}),
      ...(s.instanceMemory !== undefined ? { instanceMemory: s.instanceMemory } : {}),
      limits: s.limits,
      limitSources: s.limitSources,
      ...(s.memorySize !== undefined ? { memorySize: s.memorySize } : {}),
      log: s.log,
      // the workers link the protocol:* capabilities (the agent daemon: $BERM_AGENT_DAEMON)
      workerModules: [PROTOCOL_MODULE],
    });
  } catch (e) {
    shared?.close();
    if (e instanceof RangeError) throw new AssemblyError(e.message);
    throw e;
  }
  let door: AttachedProtocol;
  try {
    door = await attachProtocol(runtime, {
      // the door's subscriptions are in the runtime's store; this is the file of an older berm
      database: path.join(s.state, 'subscriptions.sqlite'),
      ...(s.protocolEndpoint ? { endpoint: s.protocolEndpoint } : {}),
      log: s.log,
      // the endpoint listens from here on, the caller starts the queue once its harnesses are
      // deployed: until then a harness may be missing only for now
      notReady: () => (runtime.delivering ? null : `${s.who} is restoring its deployments; retry shortly`),
    });
  } catch (e) {
    await runtime.close(0);
    throw e;
  }
  runtime.registerService(PROTOCOL_SERVICE, (harness, chain, request) => door.serve(harness, chain, request));
  return {
    runtime,
    shared,
    door,
    async close(drainMs?: number) {
      await door.close();
      await runtime.close(drainMs);
    },
  };
}

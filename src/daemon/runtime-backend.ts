/**
 * The runtime bermd runs on: the runtime as assembleRuntime builds it (src/assembly: the queue
 * with its worker pool, due-set and journal, its state directly under --root, the protocol door
 * attached: subscriptions in the runtime's store (a <root>/subscriptions.sqlite of an older
 * berm imported once), deliveries as notify triggers, the door's service for guests, and, with --protocol-endpoint, berm's endpoint for the agent-daemon
 * side). With --store postgres://... the state is in PostgreSQL, shared with other daemons
 * (src/store/pg-store.ts, src/daemon/cluster.ts, docs/scale-out.md).
 */
import { AssemblyError, assembleRuntime, type AssembledRuntime } from '../assembly/assemble.js';
import { ClusterBackend } from './cluster.js';
import { BootError, type BackendFactory } from './daemon.js';
import { QueueBackend } from './queue-backend.js';

/** Build bermd's runtime: the assembled runtime with state under ctx.root, as a Backend. */
export const createRuntimeBackend: BackendFactory = async (ctx) => {
  let assembled: AssembledRuntime;
  try {
    assembled = await assembleRuntime({
      who: 'bermd',
      state: ctx.root,
      store: ctx.store,
      leaseMs: ctx.leaseMs,
      cacheDir: ctx.cacheDir,
      workers: ctx.workers,
      instanceMemory: ctx.instanceMemory,
      limits: ctx.limits,
      limitSources: ctx.limitSources,
      log: ctx.log,
      protocolEndpoint: ctx.protocolEndpoint,
    });
  } catch (e) {
    if (e instanceof AssemblyError) throw new BootError(e.message);
    throw e;
  }
  const { shared, door } = assembled;
  if (shared) ctx.log(`store ${shared.description}`);
  const backend = shared
    ? new ClusterBackend(assembled.runtime, shared, ctx.log)
    : new QueueBackend(assembled.runtime);
  backend.onClose(() => door.close());
  if (ctx.protocolEndpoint !== null) ctx.log(`protocol endpoint on ${ctx.protocolEndpoint}`);
  return backend;
};

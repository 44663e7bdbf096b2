/**
 * The runtime bermd runs on: the queue (src/runtime) with its worker pool, due-set and journal,
 * its state directly under --root, and the protocol door attached to it (src/protocol/attach.ts):
 * the harness event bus (subscriptions in <root>/subscriptions.sqlite, deliveries as notify
 * triggers), the door's service for guests, and, with --protocol-endpoint, berm's endpoint for the
 * agent-daemon side arming wakes in the same due-set. With --store postgres://... the state is in
 * PostgreSQL, shared with other daemons (src/cluster, src/daemon/cluster.ts, docs/scale-out.md).
 */
import * as path from 'node:path';
import { attachProtocol } from '../protocol/attach.js';
import { PROTOCOL_SERVICE } from '../protocol/groups.js';
import { PROTOCOL_MODULE } from '../protocol/index.js';
import { PgStore } from '../cluster/pg-store.js';
import { clusterBackend } from './cluster.js';
import { BootError, type BackendFactory } from './daemon.js';
import { QueueBackend } from './queue-backend.js';

/** Build bermd's runtime: the queue's BermRuntime with state under ctx.root, the door attached. */
export const createRuntimeBackend: BackendFactory = async (ctx) => {
  let shared: PgStore | null = null;
  if (ctx.store !== null) {
    try {
      shared = await PgStore.open(ctx.store, { leaseMs: ctx.leaseMs, log: ctx.log });
    } catch (e) {
      throw new BootError(`--store: ${(e as Error).message}`);
    }
    ctx.log(`store ${shared.description}`);
  }
  let backend: QueueBackend;
  try {
    backend = await QueueBackend.create({
      root: ctx.root,
      cacheDir: ctx.cacheDir,
      workers: ctx.workers,
      limits: ctx.limits,
      limitSources: ctx.limitSources,
      log: ctx.log,
      // the workers link the protocol:* capabilities (the agent daemon: $BERM_AGENT_DAEMON)
      workerModules: [PROTOCOL_MODULE],
      ...(shared ? { store: shared } : {}),
    });
  } catch (e) {
    shared?.close();
    throw e;
  }
  try {
    const rt = backend.runtime;
    const door = await attachProtocol(rt, {
      database: path.join(ctx.root, 'subscriptions.sqlite'),
      ...(ctx.protocolEndpoint !== null ? { endpoint: ctx.protocolEndpoint } : {}),
      log: ctx.log,
      // the endpoint listens from here on, the daemon starts the queue once its deployments are
      // restored (and follow a shared store): until then a harness may be missing only for now
      notReady: () => (rt.delivering ? null : 'bermd is restoring its deployments; retry shortly'),
    });
    backend.runtime.registerService(PROTOCOL_SERVICE, (harness, chain, request) =>
      door.serve(harness, chain, request),
    );
    backend.onClose(() => door.close());
    if (ctx.protocolEndpoint !== null) ctx.log(`protocol endpoint on ${ctx.protocolEndpoint}`);
  } catch (e) {
    await backend.close(0);
    throw e;
  }
  return shared ? clusterBackend(backend, shared, ctx.log) : backend;
};

/**
 * The runtime bermd runs on: the queue (src/runtime) with its worker pool, due-set and journal,
 * its state directly under --root.
 */
import type { BackendFactory } from './daemon.js';
import { QueueBackend } from './queue-backend.js';

/** Build bermd's runtime: the queue's BermRuntime with state under ctx.root. */
export const createRuntimeBackend: BackendFactory = (ctx) =>
  QueueBackend.create({
    root: ctx.root,
    cacheDir: ctx.cacheDir,
    workers: ctx.workers,
    limits: ctx.limits,
    limitSources: ctx.limitSources,
    log: ctx.log,
  });

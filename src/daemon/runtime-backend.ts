/**
 * The runtime bermd runs on. Until the queue's runtime is wired in, this is the inline backend.
 */
import type { BackendFactory } from './daemon.js';
import { InlineBackend } from './inline-backend.js';

/** Build bermd's runtime under `root` . */
export const createRuntimeBackend: BackendFactory = async (ctx) => new InlineBackend(ctx.cacheDir);

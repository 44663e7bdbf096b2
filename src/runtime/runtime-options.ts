/**
 * The runtime's options and what {@link BermRuntime.create} makes of them before anything starts:
 * the pool size, the queue's limits with where each came from, the store (SQLite under the state
 * directory unless one is given), the Wasm cache directory and each worker's configuration.
 */
import * as path from 'node:path';
import type { CapabilityLimits } from '../capabilities/types.js';
import { defaultInstanceMemory, workerShare } from './instance-budget.js';
import {
  checkLimits,
  defaultLimits,
  defaultPoolSize,
  type LimitSource,
  type RuntimeLimits,
} from './limits.js';
import type { PoolOptions } from './pool.js';
import { SqliteStore } from '../store/sqlite-store.js';
import type { RuntimeStore } from '../store/store.js';

/** Options of {@link BermRuntime.create}. */
export interface RuntimeOptions {
  /** state directory of the SQLite store (default store); ignored when `store` is given */
  state?: string;
  /**
   * a storage backend (default: SqliteStore.open(state) with its WAL checkpoints on a thread of
   * their own, off the queue's)
   */
  store?: RuntimeStore;
  /** workers (default {@link defaultPoolSize}: one per core plus one) */
  poolSize?: number;
  /** overrides of the queue's limits */
  limits?: Partial<RuntimeLimits>;
  /** where each overridden limit came from, for the boot log (default 'option') */
  limitSources?: Partial<Record<keyof RuntimeLimits, LimitSource>>;
  /** overrides of the capabilities' limits (maxCallDepth is always the queue's chainDepth) */
  capabilityLimits?: Partial<CapabilityLimits>;
  /** engine options of the workers */
  memorySize?: number;
  optimizeLevel?: number;
  /** Wasm cache directory (default: <state>/cache when a state dir is given, else none) */
  cacheDir?: string | null;
  /** the runtime's own log lines (spills, replaced workers); default: none */
  log?: (line: string) => void;
  /**
   * Modules (file URLs or specifiers) every worker imports before it takes work: a module that
   * registers capabilities (registerCapability) must run in the workers too, since each thread
   * has its own registry. The protocol door's registration module is one.
   */
  workerModules?: (string | URL)[];
  /**
   * longest a guest waits for this thread to answer a host call (schedule, services), ms (default
   * 30,000; the thread answers in microseconds unless something blocks it); past it, or past the
   * invocation's chain deadline if that comes first, the call answers an error
   */
  hostReplyTimeoutMs?: number;
  /**
   * resident bytes of the instance slots the workers keep between invocations, all together
   * (default defaultInstanceMemory(): a quarter of the machine's memory; instance-budget.ts)
   */
  instanceMemory?: number;
  /**
   * entries of the store's (when, seq) index the due heap reads at a time (default DUE_WINDOW,
   * 16,384; wake-scheduler.ts): at start it holds this many of the pending wakes, not all of them,
   * and reads as many more each time its last one comes within a second of due
   */
  dueWindow?: number;
}

/** Options resolved: every default filled in, every value checked. */
export interface ResolvedOptions {
  options: RuntimeOptions;
  poolSize: number;
  limits: RuntimeLimits;
  sources: Record<keyof RuntimeLimits, LimitSource>;
  store: RuntimeStore;
}

/**
 * Check `options` and fill in the defaults: the pool size (one worker per core plus one), the limits
 * (defaultLimits over the overrides, each source 'default' or the one given, 'option' when none
 * is), the store (SQLite under `state`, opened here) and the cache directory (`<state>/cache`).
 * @throws RangeError for a bad pool size, instance memory, due window or limit, or neither a state directory
 *   nor a store; whatever opening the store throws.
 */
export function resolveOptions(options: RuntimeOptions): ResolvedOptions {
  const poolSize = options.poolSize ?? defaultPoolSize();
  if (!Number.isSafeInteger(poolSize) || poolSize < 1)
    throw new RangeError(`pool size must be a positive integer, got ${poolSize}`);
  const im = options.instanceMemory;
  if (im !== undefined && !(Number.isSafeInteger(im) && im > 0))
    throw new RangeError(`instance memory must be a positive number of bytes, got ${im}`);
  const dw = options.dueWindow;
  if (dw !== undefined && !(Number.isSafeInteger(dw) && dw > 0))
    throw new RangeError(`due window must be a positive integer, got ${dw}`);
  const limits = { ...defaultLimits(poolSize), ...options.limits };
  checkLimits(limits);
  const sources = {} as Record<keyof RuntimeLimits, LimitSource>;
  for (const k of Object.keys(limits) as (keyof RuntimeLimits)[]) {
    sources[k] = options.limits?.[k] !== undefined ? (options.limitSources?.[k] ?? 'option') : 'default';
  }
  let store = options.store;
  if (!store) {
    if (options.state === undefined) throw new RangeError('a state directory or a store is required');
    store = SqliteStore.open(options.state, {
      journalRotateBytes: limits.journalRotateBytes,
      journalKeep: limits.journalKeep,
      // the queue's thread commits on this store between guest runs: it must never checkpoint
      checkpoints: 'background',
    });
  }
  const opts = { ...options };
  if (opts.cacheDir === undefined && options.state !== undefined)
    opts.cacheDir = path.join(options.state, 'cache');
  return { options: opts, poolSize, limits, sources, store };
}

/**
 * Each worker's configuration: the engine options, the cache, the capabilities' limits (their
 * call depth is the queue's `chainDepth`), the storage capability's default database, the modules
 * to import and the worker's share of the instance memory.
 */
export function workerConfig(
  options: RuntimeOptions,
  store: RuntimeStore,
  limits: RuntimeLimits,
  poolSize: number,
): PoolOptions['config'] {
  const share = workerShare(options.instanceMemory ?? defaultInstanceMemory(), poolSize);
  return {
    ...(options.memorySize !== undefined ? { memorySize: options.memorySize } : {}),
    ...(options.optimizeLevel !== undefined ? { optimizeLevel: options.optimizeLevel } : {}),
    cacheDir: options.cacheDir ?? null,
    capabilityLimits: { ...options.capabilityLimits, maxCallDepth: limits.chainDepth },
    defaultDatabase: store.keys.databaseFile,
    modules: (options.workerModules ?? []).map(String),
    ...(options.hostReplyTimeoutMs !== undefined ? { hostReplyTimeoutMs: options.hostReplyTimeoutMs } : {}),
    instanceMemory: share.bytes,
    instanceSlots: share.slots,
  };
}

/**
 * The runtime layer's public surface: the queue (three triggers, limits, worker pool, chains),
 * the due-set, the journal and the storage seam. Daemon, protocol door and scale-out build on
 * these names; docs/runtime-queue.md describes the design and the delivery semantics.
 *
 *   const rt = await BermRuntime.create({ state: dir, poolSize: 2, limits: { timeoutMs: 5000 } });
 *   await rt.deploy('echo', elfBytes, { capabilities: ['clock'] });
 *   const o = await rt.invoke('echo', 'echo', '{"x":1}');       // Outcome
 *   rt.arm({ harness: 'ticker', delayMs: 1000, payload: 'hi' }); // WakeRecord
 *   rt.on('invocation', (rec: JournalRecord) => ...);            // one per finished invocation
 *   await rt.close();
 *
 * Events of BermRuntime: 'invocation' (JournalRecord, Outcome | null), 'wake' ({id, harness,
 * scheduledAt, firedAt, lateMs, attempt}), 'spill' ({count, lateMs}), 'armed' (WakeRecord),
 * 'cancelled' ({id, harness}), 'deploy' (DeployedHarness), 'undeploy' (name), 'log' (line).
 */
export { StateLock, StateLockError } from './state-lock.js';
export {
  ArmError,
  wakeSpec,
  type ArmSpec,
  BermRuntime,
  type CancelSignal,
  ON_NOTIFY,
  ON_WAKE,
  type DeployedHarness,
  type InvocationInfo,
  type InvokeOptions,
  type Outcome,
  type QueueService,
  type RuntimeOptions,
  type Trigger,
} from './runtime.js';
export {
  checkLimits,
  defaultLimits,
  LimitError,
  TokenBucket,
  type LimitName,
  type LimitSource,
  type OverrunPolicy,
  type RuntimeLimits,
} from './limits.js';
export type { ChainSpec, TrapInfo } from './worker-messages.js';
export type { Authority, RuntimeStats } from '../contract/index.js';
export type {
  DeadReason,
  DeadWake,
  RetryDeadResult,
  DeploymentRecord,
  DeploymentStore,
  DueStore,
  Journal,
  JournalRecord,
  KeyStore,
  RuntimeStore,
  WakeKind,
  WakeListOptions,
  WakeRecord,
  WakeSpec,
} from '../store/store.js';
export { LIST_WAKES_MAX_BYTES } from '../store/store.js';
export { deadWakeInfo, dropDeadEntry, wakeInfo } from './dead-letter.js';
export { SqliteStore, type SqliteStoreOptions } from '../store/sqlite-store.js';
export { JsonlJournal, readJournal } from '../store/journal.js';
export { DueHeap } from './dueset.js';
export { OutOfGas } from './executor.js';
export { workerEntry } from './pool.js';
export {
  Runtime,
  RuntimeError,
  type LoadedHarness,
  type RuntimeOptions as DeclaredRuntimeOptions,
} from './declared.js';

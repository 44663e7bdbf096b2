/**
 * What the queue works on and what it answers: the triggers, a queued job, the outcome of an
 * invocation and the facts kept about it. Shared by the runtime's components (dispatcher.ts,
 * wake-scheduler.ts) and its façade (runtime.ts).
 */
import type { Authority } from '../contract/index.js';
import { LimitError } from './limits.js';
import type { ChainSpec, RunResult, TrapInfo } from './worker-messages.js';
import type { WakeRecord } from '../store/store.js';

/** Entry a wake runs. */
export const ON_WAKE = 'on_wake';
/** Entry a notification runs. */
export const ON_NOTIFY = 'on_notify';

/** The trigger that started an invocation (`event`: a WebSocket connection's, ./connections.ts). */
export type Trigger = 'call' | 'wake' | 'notify' | 'event';

/** Facts about one finished invocation, on every outcome. */
export interface InvocationInfo {
  trigger: Trigger;
  harness: string;
  entry: string;
  chain: string;
  depth: number;
  /** ms since epoch */
  start: number;
  /** ms the run took (queue wait excluded) */
  ms: number;
  /** ms it waited in the queue, and for its worker to finish earlier work */
  waitMs: number;
  /** fuel drawn by the chain during this run */
  fuel: number;
}

/**
 * What an invocation came to.
 * - ok / failed: the guest's berm.done / berm.fail (failed is the tool's own failure, for a model)
 * - trapped: the guest trapped (trap name, message, pc, symbol)
 * - refused: a limit of the queue refused it; nothing ran
 * - cancelled: its caller went away (an HTTP client disconnected, an MCP session ended) before
 *   the reply: dropped from the queue, or its run interrupted
 * - error: it could not run: unknown harness or tool, bad arguments, a harness that broke the
 *   ABI, or its worker was lost (stuck in a host call past its deadline); or (`store-unavailable`)
 *   it ran but its journal record could not be written, so its result is not acknowledged (the
 *   record is kept in memory and written when the store is back, if the process lives)
 */
export type Outcome = (
  | { status: 'ok'; result: string; logs: string[] }
  | { status: 'failed'; message: string; logs: string[] }
  | { status: 'trapped'; trap: TrapInfo; logs: string[] }
  | { status: 'refused'; error: LimitError }
  | { status: 'cancelled'; message: string; logs: string[] }
  | {
      status: 'error';
      code:
        | 'unknown-harness'
        | 'unknown-tool'
        | 'bad-args'
        | 'harness'
        | 'worker-lost'
        | 'internal'
        | 'store-unavailable';
      message: string;
      logs: string[];
    }
) & { info: InvocationInfo | null };

/** Options of BermRuntime.invoke. */
export interface InvokeOptions {
  /** each berm.log line as it happens (streamed from the worker) */
  onLog?: (line: string) => void;
  /** who the invocation acts for; inherited by its chain and the work it enqueues */
  authority?: Authority;
  /** the trigger it is journaled under (default call; `event` for a connection's events) */
  trigger?: 'call' | 'event';
  /**
   * aborted when nobody waits for the outcome any more (the HTTP client disconnected, the MCP
   * session ended): the invocation is dropped if still queued, interrupted if running, and
   * journaled `cancelled`; its reason (a string) is the record's detail. An AbortSignal will do.
   */
  signal?: CancelSignal;
}

/**
 * What the queue reads of a caller's cancellation: whether it has happened, why, and one listener
 * for when it does. An AbortSignal has this shape; so does the daemon's per-request hook, which
 * costs nothing until its client leaves (an AbortController per call does: an EventTarget, its
 * listener list and the signal's bookkeeping, on every call that is never cancelled).
 */
export interface CancelSignal {
  /** true once cancelled */
  readonly aborted: boolean;
  /** why (a string, journaled as the cancelled record's detail), once aborted */
  readonly reason: unknown;
  /** call `listener` once when cancelled (never when already cancelled: check `aborted` first) */
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  /** forget `listener` (the outcome came first) */
  removeEventListener(type: 'abort', listener: () => void): void;
}

/** One guest start waiting in the queue or running in a worker. */
export interface Job {
  trigger: Trigger;
  harness: string;
  kind: 'tool' | 'export';
  entry: string;
  args: string | Uint8Array;
  chain: ChainSpec;
  /**
   * the chain starts here: its deadline is timeoutMs after the guest's start in its worker (not
   * after the launch: the worker may first finish earlier work)
   */
  fresh: boolean;
  enqueuedAt: number;
  resolve: (o: Outcome) => void;
  onLog?: (line: string) => void;
  wake?: WakeRecord;
  scheduleKey?: string;
  /**
   * The invocation's instant (ms since the epoch) when it was fixed before the launch: the `now`
   * of a wake's record. Otherwise the launch takes Date.now(). The guest's delays count from it.
   */
  now?: number;
  /** builds the arguments at launch from the invocation's instant (a notify record's `now`) */
  argsAt?: (now: number) => string;
  /** aborted when nobody waits for the outcome any more (InvokeOptions.signal) */
  signal?: CancelSignal;
  /** the run's interrupt flag (its worker's, Int32 at 0) while it runs */
  interrupt?: Int32Array;
  /** why the run was cancelled, once its signal aborted while it ran */
  cancelled?: string;
}

/** The runtime's counters, shared by its components and read by BermRuntime.stats. */
export interface Counters {
  /** finished invocations by `trigger:status` */
  invocations: Record<string, number>;
  spills: number;
  overrunSkips: number;
  redeliveries: number;
  /** wakes moved to the dead-letter set */
  deadLettered: number;
  /** invocations cancelled because their caller went away: dropped from the queue, or interrupted */
  cancelled: { queued: number; running: number };
  /** deployments whose module came from the cache, or was translated */
  cached: number;
  translated: number;
}

/** An outcome of an invocation that could not run: `code` and why, no logs, no info. */
export function errorOutcome(code: Extract<Outcome, { status: 'error' }>['code'], message: string): Outcome {
  return { status: 'error', code, message, logs: [], info: null };
}

/** An outcome of an invocation a limit refused (nothing ran). */
export function refused(error: LimitError): Outcome {
  return { status: 'refused', error, info: null };
}

/** The outcome of a worker's run result, with its logs and facts. */
export function fromRun(r: RunResult, logs: string[], info: InvocationInfo): Outcome {
  switch (r.status) {
    case 'ok':
      return { status: 'ok', result: r.result, logs, info };
    case 'failed':
      return { status: 'failed', message: r.message, logs, info };
    case 'trapped':
      return { status: 'trapped', trap: r.trap, logs, info };
    case 'error':
      return { status: 'error', code: r.code, message: r.message, logs, info };
  }
}

/**
 * What the journal and the caller learn of `j`'s run: started at `start` (ms since the epoch),
 * `ms` running, `waitMs` queued, `fuel` taken. A job that ended without running passes 0 for the
 * last three.
 */
export function invocationInfo(
  j: Pick<Job, 'trigger' | 'harness' | 'entry' | 'chain'>,
  start: number,
  ms: number,
  waitMs: number,
  fuel: number,
): InvocationInfo {
  return {
    trigger: j.trigger,
    harness: j.harness,
    entry: j.entry,
    chain: j.chain.id,
    depth: j.chain.depth,
    start,
    ms,
    waitMs,
    fuel,
  };
}

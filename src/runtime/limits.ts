/**
 * The queue's limits: the one place where concurrency, rate, single-in-flight, chain depth and
 * gas are decided, for every trigger alike. Every refusal is a {@link LimitError} naming
 * the limit and its value, so a caller can tell "queue full" from "rate" from "depth".
 */

import { availableParallelism } from 'node:os';
import { WS_DEFAULT_LIMITS } from '../capabilities/ws/limits.js';

/** How a schedule's next occurrence is handled while the previous one is still running. */
export type OverrunPolicy = 'skip' | 'defer';

/** Every limit of the queue. Times in milliseconds, sizes in bytes. */
export interface RuntimeLimits {
  /** invocations running at once, over all harnesses (default: the pool size) */
  concurrency: number;
  /**
   * invocations of one harness running at once (default: one fewer than the pool, at least 1):
   * one harness cannot fill the pool, so a worker is left for every other harness's work
   */
  harnessConcurrency: number;
  /** sustained starts per second of one harness (token bucket refill; default 1000) */
  harnessRate: number;
  /** token bucket size: starts of one harness allowed in a burst (default 1000) */
  harnessBurst: number;
  /** triggers waiting for a worker, over all harnesses; beyond it a call is refused (default 10,000) */
  queueDepth: number;
  /** triggers of one harness waiting for a worker; beyond it that harness's call is refused (default 1,000) */
  harnessQueueDepth: number;
  /** deepest chain: berm.call and work a harness enqueues add one; a top-level trigger is 0 (default 4) */
  chainDepth: number;
  /** wall-clock budget of a whole chain from its first start (default 30,000) */
  timeoutMs: number;
  /**
   * extra time a worker stuck in a host call gets past the chain's deadline before it is replaced
   * (default 5,000: host calls end by the deadline, but the capability bridge adds its own grace
   * of 2 s, src/sync/bridge.ts)
   */
  graceMs: number;
  /** instruction budget of a whole chain (default Infinity: only the deadline bounds it) */
  fuel: number;
  /** invocations in one chain, the top-level one included (default 64) */
  chainInvocations: number;
  /** what happens to a wake due while the previous occurrence of the same wake id still runs (default skip) */
  overrun: OverrunPolicy;
  /** largest wake payload (default 64 KiB) */
  maxPayloadBytes: number;
  /** wakes pending in the due-set at once (default 10,000,000) */
  maxPendingWakes: number;
  /**
   * wakes pending at once that one harness armed itself (berm.wake.arm, the protocol door's
   * schedule_wake, berm.call.after; default 10,000): one harness cannot fill the due-set. Wakes
   * the operator arms (API, CLI) do not count
   */
  harnessPendingWakes: number;
  /**
   * wakes of one harness pending at once that were armed through bermd's API (POST /wakes,
   * armedBy `api`; default 10,000): whoever holds the API's token cannot fill the due-set for one
   * harness either. The CLI on the store's machine (armedBy `cli`) is not counted
   */
  harnessApiWakes: number;
  /** longest delay a wake may be armed for (default 10 years) */
  maxDelayMs: number;
  /** journal file size at which it is rotated (default 64 MiB) */
  journalRotateBytes: number;
  /** rotated journal files kept (default 4) */
  journalKeep: number;
  /**
   * deliveries of a wake whose guest started and whose worker was then lost (a host fault: the
   * worker crashed or was replaced, stuck in a host call) before the last one is journaled
   * `worker-lost` (default 3); a guest's own failure is never retried
   */
  wakeAttempts: number;
  /** wait before the second such delivery, doubled for each later one (default 1,000) */
  wakeRetryMs: number;
  /** how long close() waits for in-flight work before interrupting it (default 10,000) */
  drainMs: number;
  /** ws: largest WebSocket frame, either direction (default 1 MiB; src/capabilities/ws) */
  wsMaxFrameBytes: number;
  /** ws: connections one harness holds open at once (default 16) */
  wsHarnessConnections: number;
  /** ws: connections the process holds open at once, over all harnesses (default 1,024) */
  wsConnections: number;
  /** ws: frames one connection may have waiting to go out; a send beyond is refused (default 256) */
  wsQueueFrames: number;
}

/** Where a limit's value came from, for the boot log. */
export type LimitSource = 'default' | 'file' | 'flag' | 'env' | 'option';

/**
 * The default worker pool: one worker per core, plus one. harnessConcurrency keeps one worker of
 * the pool back from any single harness, so the extra worker is that reserve: a lone harness
 * still runs a guest on every core (its throughput is what a pool of one per core gives), and a
 * call of another harness always finds a worker even while every core spins on one harness's
 * calls (it then shares the cores with them, time-sliced, instead of waiting for their deadline).
 * @returns a worker count >= 2
 */
export function defaultPoolSize(): number {
  return availableParallelism() + 1;
}

/**
 * Defaults of {@link RuntimeLimits} for a pool of `poolSize` workers. harnessConcurrency is one
 * fewer than the pool (at least 1): one harness alone cannot take every worker, so another
 * harness's call starts as soon as it reaches the front of the round-robin; with one worker
 * there is nothing to keep back and the round-robin alone shares it.
 */
export function defaultLimits(poolSize: number): RuntimeLimits {
  return {
    concurrency: poolSize,
    harnessConcurrency: Math.max(1, poolSize - 1),
    harnessRate: 1000,
    harnessBurst: 1000,
    queueDepth: 10_000,
    harnessQueueDepth: 1_000,
    chainDepth: 4,
    timeoutMs: 30_000,
    graceMs: 5_000,
    fuel: Infinity,
    chainInvocations: 64,
    overrun: 'skip',
    maxPayloadBytes: 64 * 1024,
    maxPendingWakes: 10_000_000,
    harnessPendingWakes: 10_000,
    harnessApiWakes: 10_000,
    maxDelayMs: 10 * 365 * 24 * 3600 * 1000,
    journalRotateBytes: 64 * 1024 * 1024,
    journalKeep: 4,
    wakeAttempts: 3,
    wakeRetryMs: 1000,
    drainMs: 10_000,
    ...WS_DEFAULT_LIMITS,
  };
}

/**
 * Check a limits object (every numeric field positive; counts integral; overrun skip|defer).
 * @throws RangeError naming the field and the bad value.
 */
export function checkLimits(l: RuntimeLimits): void {
  const ints: (keyof RuntimeLimits)[] = [
    'concurrency',
    'harnessConcurrency',
    'harnessBurst',
    'queueDepth',
    'harnessQueueDepth',
    'chainInvocations',
    'maxPayloadBytes',
    'maxPendingWakes',
    'harnessPendingWakes',
    'harnessApiWakes',
    'journalRotateBytes',
    'journalKeep',
    'wakeAttempts',
    'wsMaxFrameBytes',
    'wsHarnessConnections',
    'wsConnections',
    'wsQueueFrames',
  ];
  for (const k of ints) {
    const v = l[k] as number;
    if (!Number.isSafeInteger(v) || v < 1)
      throw new RangeError(`limit ${k} must be a positive integer, got ${v}`);
  }
  if (!Number.isSafeInteger(l.chainDepth) || l.chainDepth < 0)
    throw new RangeError(`limit chainDepth must be an integer >= 0, got ${l.chainDepth}`);
  for (const k of [
    'harnessRate',
    'timeoutMs',
    'graceMs',
    'drainMs',
    'maxDelayMs',
    'fuel',
    'wakeRetryMs',
  ] as const) {
    const v = l[k];
    if (typeof v !== 'number' || Number.isNaN(v) || v <= 0)
      throw new RangeError(`limit ${k} must be > 0, got ${v}`);
  }
  if (l.overrun !== 'skip' && l.overrun !== 'defer')
    throw new RangeError(`limit overrun must be "skip" or "defer", got ${JSON.stringify(l.overrun)}`);
}

/** Name of a limit as refusals and the boot log spell it. */
export type LimitName =
  | 'concurrency'
  | 'harnessConcurrency'
  | 'harnessRate'
  | 'queueDepth'
  | 'harnessQueueDepth'
  | 'chainDepth'
  | 'chainInvocations'
  | 'overrun'
  | 'maxPayloadBytes'
  | 'maxPendingWakes'
  | 'harnessPendingWakes'
  | 'harnessApiWakes'
  | 'maxDelayMs'
  | 'closed';

/**
 * A refusal by a limit of the queue: nothing ran. `limit` names it, `value` is its configured value.
 */
export class LimitError extends Error {
  override name = 'LimitError';
  constructor(
    readonly limit: LimitName,
    readonly value: number | string,
    detail: string,
  ) {
    super(`refused by limit ${limit} = ${value}: ${detail}`);
  }
}

/**
 * A token bucket (rate `rate` tokens per second, at most `burst` held), the classic traffic
 * shaper (e.g. RFC 2697's single-rate meter without colours). Time in milliseconds.
 */
export class TokenBucket {
  private tokens: number;
  private last: number;
  constructor(
    private readonly rate: number,
    private readonly burst: number,
    now: number,
  ) {
    this.tokens = burst;
    this.last = now;
  }
  /**
   * Add the tokens earned since the last refill. `now` is the wall clock: when it stepped back, the
   * step counts as no time elapsed (refilling resumes from `now`), not as a debt that would hold
   * the harness back for as long as the step.
   */
  private refill(now: number): void {
    if (now > this.last) {
      this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) * this.rate) / 1000);
      this.last = now;
    } else if (now < this.last) this.last = now;
  }
  /** Take one token if there is one. */
  take(now: number): boolean {
    this.refill(now);
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
  /** Milliseconds until a token is available (0 when one is). */
  waitMs(now: number): number {
    this.refill(now);
    return this.tokens >= 1 ? 0 : Math.ceil(((1 - this.tokens) * 1000) / this.rate);
  }
}

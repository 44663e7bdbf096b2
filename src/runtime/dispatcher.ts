/**
 * The dispatcher: the queue of triggers waiting to start, the invocations running in the worker
 * pool, and the limits that decide when one may start (overall and per-harness concurrency, the
 * per-harness rate, the queue's depth overall and per harness). It launches a job in a worker,
 * journals its outcome and answers its caller; due wakes reach it through the wake scheduler
 * (wake-scheduler.ts), which it asks to drain whenever room frees.
 *
 * Fair share: the queue is one FIFO per harness, served round-robin over the harnesses that have
 * work waiting (the one served moves to the back), and one harness runs at most
 * harnessConcurrency invocations (by default one fewer than the pool): a harness whose calls spin
 * delays its own calls, not another harness's.
 */
import { randomUUID } from 'node:crypto';
import type { Authority } from '../contract/index.js';
import { LimitError, TokenBucket, type RuntimeLimits } from './limits.js';
import {
  fromRun,
  invocationInfo,
  refused,
  type CancelSignal,
  type Counters,
  type Job,
  type Outcome,
} from './outcome.js';
import type { WorkerPool } from './pool.js';
import type { ChainSpec } from './worker-messages.js';
import type { JournalRecord, RuntimeStore } from '../store/store.js';

/** What the dispatcher asks of the wake scheduler and of the runtime around it. */
export interface DispatchHooks {
  /** start due wakes while there is room (called after the queue had its turn) */
  drainDue(): void;
  /**
   * a wake's worker was lost before the guest started, or after it started with attempts left:
   * deliver it again, after `delayMs`
   */
  unstarted(j: Job, why: string, delayMs: number): void;
  /**
   * a wake's run ended (`journalError`: why its record could not be written, null when it was):
   * finish its claim, or deliver it again after a backoff (true: its schedule stays held), or move
   * it to the dead-letter set
   */
  settle(j: Job, o: Outcome, journalError: string | null): boolean;
  /** a wake's run ended and is not delivered again: its schedule may run its deferred occurrence */
  finished(j: Job): void;
  /** emit a runtime event */
  emit(event: string, ...args: unknown[]): void;
  /** a runtime log line */
  log(line: string): void;
}

/** The queue, what runs, and the limits on starting. */
export class Dispatcher {
  /**
   * triggers waiting to start: one FIFO per harness that has any, in round-robin order (the
   * harness served last is at the end)
   */
  private readonly waiting = new Map<string, Job[]>();
  /** triggers waiting, over all harnesses */
  queued = 0;
  /** the invocations running in the workers */
  readonly running = new Set<Job>();
  private readonly perHarness = new Map<string, number>();
  /** harnesses running as many invocations as harnessConcurrency allows (or more) */
  private atLimit = 0;
  private readonly buckets = new Map<string, TokenBucket>();
  /** launched invocations whose outcome is not yet answered (close() waits for 0) */
  pending = 0;
  /** the runtime is shutting down: nothing new is accepted */
  closed = false;
  /** close() ran out of its drain time and interrupted what still ran (those wakes stay claimed) */
  interrupting = false;
  private dispatching = false;

  constructor(
    private readonly limits: Readonly<RuntimeLimits>,
    private readonly pool: WorkerPool,
    private readonly store: RuntimeStore,
    private readonly counters: Counters,
    private readonly hooks: DispatchHooks,
  ) {}

  /** A new chain (depth 0, the limits' fuel and invocations), acting for `authority`. */
  freshChain(authority?: Authority): ChainSpec {
    const l = this.limits;
    const fuel = Number.isFinite(l.fuel) ? l.fuel : Number.MAX_SAFE_INTEGER;
    const chain: ChainSpec = {
      id: randomUUID(),
      depth: 0,
      deadline: 0,
      fuelLeft: fuel,
      fuelBudget: fuel,
      invocationsLeft: l.chainInvocations,
      maxDepth: l.chainDepth,
    };
    if (authority) chain.authority = authority;
    return chain;
  }

  /** The chain of work enqueued from inside `parent`: one deeper, with what it has left. */
  childChain(parent: ChainSpec): ChainSpec | LimitError {
    if (parent.depth + 1 > this.limits.chainDepth) {
      return new LimitError(
        'chainDepth',
        this.limits.chainDepth,
        `work enqueued at depth ${parent.depth + 1} of chain ${parent.id}`,
      );
    }
    return {
      ...parent,
      depth: parent.depth + 1,
      deadline: 0,
      invocationsLeft: Math.max(0, parent.invocationsLeft - 1),
    };
  }

  /**
   * Queue a trigger. Answers `refused` at once when the runtime is closed, the queue (or the
   * harness's share of it) is full or the harness is over its rate; `cancelled` when its signal
   * aborts before it ends; else when the job has run.
   */
  submit(j: Omit<Job, 'enqueuedAt' | 'resolve'>): Promise<Outcome> {
    if (j.signal?.aborted)
      return Promise.resolve(this.dropped({ ...j, enqueuedAt: Date.now(), resolve: () => {} }));
    if (this.closed)
      return Promise.resolve(refused(new LimitError('closed', 'closed', 'the runtime is shutting down')));
    if (this.queued >= this.limits.queueDepth) {
      return Promise.resolve(
        refused(
          new LimitError('queueDepth', this.limits.queueDepth, `${this.queued} triggers are already waiting`),
        ),
      );
    }
    const mine = this.waiting.get(j.harness);
    if (mine !== undefined && mine.length >= this.limits.harnessQueueDepth) {
      return Promise.resolve(
        refused(
          new LimitError(
            'harnessQueueDepth',
            this.limits.harnessQueueDepth,
            `${mine.length} triggers of harness ${j.harness} are already waiting`,
          ),
        ),
      );
    }
    if (!this.bucket(j.harness).take(Date.now())) {
      return Promise.resolve(
        refused(
          new LimitError(
            'harnessRate',
            this.limits.harnessRate,
            `harness ${j.harness} started more than ${this.limits.harnessRate}/s (burst ${this.limits.harnessBurst})`,
          ),
        ),
      );
    }
    return new Promise((resolve) => {
      const job = queued(j, Date.now(), resolve);
      if (j.signal) {
        const signal = j.signal;
        const onAbort = () => this.cancel(job, reasonOf(signal));
        signal.addEventListener('abort', onAbort, { once: true });
        job.resolve = (o) => {
          signal.removeEventListener('abort', onAbort);
          resolve(o);
        };
      }
      if (mine !== undefined) mine.push(job);
      else this.waiting.set(j.harness, [job]);
      this.queued++;
      this.dispatch();
    });
  }

  /**
   * Nobody waits for `j`'s outcome any more: drop it if it is still queued (journaled
   * `cancelled`, answered at once), else raise its run's interrupt (the run ends as `cancelled`
   * at the guest's next poll, or with what it came to if it ended first).
   */
  cancel(j: Job, why: string): void {
    const mine = this.waiting.get(j.harness);
    const at = mine ? mine.indexOf(j) : -1;
    if (at >= 0) {
      mine!.splice(at, 1);
      if (mine!.length === 0) this.waiting.delete(j.harness);
      this.queued--;
      j.resolve(this.dropped(j, why));
      return;
    }
    if (j.interrupt && j.cancelled === undefined) {
      j.cancelled = why;
      Atomics.store(j.interrupt, 0, 1);
    }
  }

  /** Journal `j`, which never started, as cancelled; its outcome. */
  private dropped(j: Job, why = reasonOf(j.signal)): Outcome {
    this.counters.cancelled.queued++;
    const now = Date.now();
    const info = invocationInfo(j, now, 0, now - j.enqueuedAt, 0);
    return this.finish(j, {
      status: 'cancelled',
      message: `${why}; it was dropped before it started`,
      logs: [],
      info,
    });
  }

  /** The rate bucket of `harness` (made on first use). */
  bucket(harness: string): TokenBucket {
    let b = this.buckets.get(harness);
    if (!b) {
      b = new TokenBucket(this.limits.harnessRate, this.limits.harnessBurst, Date.now());
      this.buckets.set(harness, b);
    }
    return b;
  }

  /** Whether an invocation of `harness` may start now (rate aside): room overall and for it. */
  canStart(harness: string): boolean {
    return (
      this.running.size < this.limits.concurrency &&
      this.pool.idle() > 0 &&
      (this.perHarness.get(harness) ?? 0) < this.limits.harnessConcurrency
    );
  }

  /**
   * Whether a due wake may start now (rate aside), given `harnesses` deployed: there is room
   * overall and fewer than that many harnesses are at their concurrency limit, or none is deployed
   * (a wake of a harness not deployed is journaled as such, which needs room only). A harness that
   * still runs after it was undeployed counts against the deployed ones until it ends (this errs
   * on waiting for a finishing invocation, which dispatches, never on starting).
   */
  mayStartAny(harnesses: number): boolean {
    return (
      this.running.size < this.limits.concurrency &&
      this.pool.idle() > 0 &&
      (harnesses === 0 || this.atLimit < harnesses)
    );
  }

  /** Count one more (`delta` 1) or one fewer (-1) running invocation of `harness`. */
  private countRunning(harness: string, delta: 1 | -1): void {
    const before = this.perHarness.get(harness) ?? 0;
    const after = Math.max(0, before + delta);
    this.perHarness.set(harness, after);
    const limit = this.limits.harnessConcurrency;
    if (before < limit && after >= limit) this.atLimit++;
    else if (before >= limit && after < limit) this.atLimit--;
  }

  /** Whether `harness` runs as many invocations as its concurrency limit allows. */
  atConcurrency(harness: string): boolean {
    return (this.perHarness.get(harness) ?? 0) >= this.limits.harnessConcurrency;
  }

  /** Free capacity for wakes right now. */
  capacity(): number {
    return Math.min(this.limits.concurrency - this.running.size, this.pool.idle());
  }

  /**
   * Start what may start: queued triggers first — round-robin over the harnesses with work
   * waiting, the oldest trigger of each, skipping a harness at its concurrency limit — then due
   * wakes.
   */
  dispatch(): void {
    if (this.dispatching) return;
    this.dispatching = true;
    try {
      const room = () => this.running.size < this.limits.concurrency && this.pool.idle() > 0;
      let started = true;
      while (started && this.queued > 0 && room()) {
        started = false;
        // one trigger per harness per round; a harness served goes to the back of the order
        for (const h of [...this.waiting.keys()]) {
          if (!room()) break;
          if (!this.canStart(h)) continue;
          const mine = this.waiting.get(h)!;
          const j = mine.shift()!;
          this.waiting.delete(h);
          if (mine.length > 0) this.waiting.set(h, mine);
          this.queued--;
          this.launch(j);
          started = true;
        }
      }
      if (!this.closed) this.hooks.drainDue();
    } finally {
      this.dispatching = false;
    }
  }

  /** Run `j` in a worker now; journal and answer its outcome when it ends. */
  launch(j: Job): void {
    const startedAt = j.now ?? Date.now();
    this.running.add(j);
    this.countRunning(j.harness, 1);
    const t0 = performance.now();
    this.pending++;
    const run = this.pool.run(
      {
        harness: j.harness,
        kind: j.kind,
        entry: j.entry,
        args: j.argsAt ? j.argsAt(startedAt) : j.args,
        chain: j.chain,
        ...(j.fresh ? { timeoutMs: this.limits.timeoutMs } : {}),
        now: startedAt,
        ...(j.onLog ? { onLog: j.onLog } : {}),
      },
      this.limits.graceMs,
    );
    j.interrupt = run.interrupt;
    void run.done.then((r) => {
      this.running.delete(j);
      // the flag is the worker's: from here on it may be another run's
      delete j.interrupt;
      this.countRunning(j.harness, -1);
      // a lost worker is a host fault: the wake is delivered again, at once when nothing of it
      // ran, else after a backoff while it has attempts left (the last is journaled worker-lost)
      if (r.lost && j.wake && (!r.started || j.wake.attempt < this.limits.wakeAttempts)) {
        const delayMs = r.started ? this.limits.wakeRetryMs * 2 ** (j.wake.attempt - 1) : 0;
        this.hooks.unstarted(j, r.started ? `${r.message}; the guest had started` : r.message, delayMs);
        this.pending--;
        this.hooks.emit('idle-check');
        this.dispatch();
        return;
      }
      const info = invocationInfo(
        j,
        startedAt,
        // the guest's run, from its start in the worker; the wait for the worker is queue wait
        performance.now() - t0 - r.waitMs,
        startedAt - j.enqueuedAt + r.waitMs,
        // a lost worker's guest: the fuel it had taken (to the fuel slice), not 0
        r.fuelUsed,
      );
      let outcome: Outcome = r.lost
        ? { status: 'error', code: 'worker-lost', message: r.message, logs: [], info }
        : fromRun(r.result, r.logs, info);
      // the interrupt raised for a caller that went away (not a deadline, not the shutdown's)
      if (
        j.cancelled !== undefined &&
        outcome.status === 'trapped' &&
        outcome.trap.name === 'Interrupted' &&
        !this.interrupting
      ) {
        this.counters.cancelled.running++;
        outcome = {
          status: 'cancelled',
          message: `${j.cancelled}; its run was interrupted`,
          logs: outcome.logs,
          info,
        };
      }
      const answer = this.finish(j, outcome);
      this.pending--;
      j.resolve(answer);
      this.hooks.emit('idle-check');
      this.dispatch();
    });
  }

  /**
   * Journal an ended invocation and forget its wake's claim. Returns what its caller is answered:
   * `o`, or, when the journal record could not be written, an error `store-unavailable` (nothing is
   * acknowledged that is not durable; a wake keeps its claim and is delivered again).
   */
  finish(j: Job, o: Outcome): Outcome {
    const key = `${j.trigger}:${o.status}`;
    this.counters.invocations[key] = (this.counters.invocations[key] ?? 0) + 1;
    const info = o.info!;
    const rec: JournalRecord = {
      trigger: j.trigger,
      harness: j.harness,
      entry: j.entry,
      chain: info.chain,
      depth: info.depth,
      start: info.start,
      ms: Math.round(info.ms * 1000) / 1000,
      outcome: o.status,
      fuel: info.fuel,
    };
    if (j.wake) {
      rec.wake = j.wake.id;
      rec.attempt = j.wake.attempt;
      rec.scheduledAt = j.wake.when;
    }
    const detail =
      o.status === 'failed'
        ? o.message
        : o.status === 'trapped'
          ? `${o.trap.name}: ${o.trap.message}`
          : o.status === 'error'
            ? o.message
            : o.status === 'refused'
              ? o.error.message
              : o.status === 'cancelled'
                ? o.message
                : undefined;
    if (detail !== undefined) rec.detail = detail.length > 500 ? detail.slice(0, 500) + '...' : detail;
    // only the interrupt of close() keeps the claim: a wake whose own deadline passed during the
    // drain has run to its end like any other, and is finished
    const shutdownInterrupt = this.interrupting && o.status === 'trapped' && o.trap.name === 'Interrupted';
    // journal first, then forget the claim: a kill in between re-delivers (at-least-once)
    let answer = o;
    let journalError: string | null = null;
    try {
      this.store.journal.append(rec);
    } catch (e) {
      journalError = (e as Error).message;
      this.hooks.log(`journal record of ${j.harness}.${j.entry} not written: ${(e as Error).message}`);
      answer = {
        status: 'error',
        code: 'store-unavailable',
        message: `it ran, but its journal record could not be written (${(e as Error).message}); the result is not acknowledged: retry when the store is back`,
        logs: 'logs' in o ? o.logs : [],
        info: o.info,
      };
    }
    // the wake scheduler finishes the claim, or retries the wake, or moves it to the dead-letter set
    const retrying = j.wake && !shutdownInterrupt ? this.hooks.settle(j, o, journalError) : false;
    this.hooks.emit('invocation', rec, o);
    if (!retrying) this.hooks.finished(j);
    return answer;
  }

  /**
   * Refuse every queued trigger (the runtime shuts down before they start), once `closed` is set.
   */
  refuseQueued(): void {
    const all = [...this.waiting.values()].flat();
    this.waiting.clear();
    this.queued = 0;
    for (const j of all)
      j.resolve(refused(new LimitError('closed', 'closed', 'the runtime shut down before it started')));
  }
}

/**
 * A queued job from what {@link Dispatcher.submit} was given: every field of {@link Job} set, in
 * one order, so the dispatcher's reads of a job see one object shape whichever trigger made it.
 */
function queued(
  j: Omit<Job, 'enqueuedAt' | 'resolve'>,
  enqueuedAt: number,
  resolve: (o: Outcome) => void,
): Job {
  return {
    trigger: j.trigger,
    harness: j.harness,
    kind: j.kind,
    entry: j.entry,
    args: j.args,
    chain: j.chain,
    fresh: j.fresh,
    enqueuedAt,
    resolve,
    onLog: j.onLog,
    wake: j.wake,
    scheduleKey: j.scheduleKey,
    now: j.now,
    argsAt: j.argsAt,
    signal: j.signal,
    interrupt: undefined,
    cancelled: undefined,
  };
}

/** The reason a caller's signal was aborted with, as text (a default when it gave none). */
function reasonOf(signal: CancelSignal | undefined): string {
  const r: unknown = signal?.reason;
  return typeof r === 'string' ? r : 'the caller went away before the reply';
}

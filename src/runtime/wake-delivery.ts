/**
 * Delivery of claimed wakes: starting each on the dispatcher (or journaling why it cannot run),
 * at most one occurrence of a schedule at a time, and settling each claim once its outcome is
 * known — finished, delivered again after a host fault, or moved to the dead-letter set. The wake
 * scheduler (wake-scheduler.ts) decides what is due and claims it; this is what happens next.
 *
 * Overrun (docs/wakes.md): an occurrence falling due while the previous one of its schedule still
 * runs is deferred behind it (`overrun = defer`, or when the running one armed it: a recurring
 * schedule's continuation) or skipped and journaled (`overrun = skip`). Retries: a delivery that
 * ends through a host fault (its worker lost after the guest started, its journal record not
 * written) is delivered again after a backoff while its attempt is below `wakeAttempts`, holding
 * its schedule meanwhile; one that is out of attempts, or whose attempt is already past them when
 * it is delivered (its process died during each delivery), is dead-lettered instead of running.
 */
import type { Dispatcher } from './dispatcher.js';
import { buryWake } from './dead-letter.js';
import type { RuntimeLimits } from './limits.js';
import { ON_WAKE, invocationInfo, type Counters, type Job, type Outcome } from './outcome.js';
import type { HarnessRegistry } from './registry.js';
import type { ChainSpec } from './worker-messages.js';
import type { JournalRecord, RuntimeStore, WakeRecord } from '../store/store.js';

/** What wake delivery reaches: the queue's parts and the wake scheduler's re-delivery queue. */
export interface WakeDeliveryDeps {
  limits: Readonly<RuntimeLimits>;
  store: RuntimeStore;
  counters: Counters;
  dispatcher: Dispatcher;
  registry: HarnessRegistry;
  emit(event: string, ...args: unknown[]): void;
  log(line: string): void;
  /** one of the wakes `armedBy` armed left the due-set here (fired) */
  left(armedBy: string): void;
  /** the wake scheduler's claimed wakes to deliver again, taken first by its next drain */
  redeliver: WakeRecord[];
  /** set the wake scheduler's timer for the earliest due work */
  armTimer(): void;
}

/** Starts claimed wakes, one occurrence per schedule, and settles their claims. */
export class WakeDelivery {
  /**
   * schedule keys with an occurrence running or waiting out a retry's backoff: the chain ids its
   * deliveries ran in (what it arms itself carries one), the occurrence deferred behind it, and the
   * seq of the claim whose retry holds the schedule (null while a delivery runs)
   */
  private readonly schedules = new Map<
    string,
    { chains: string[]; deferred: WakeRecord | null; retry: number | null }
  >();

  constructor(private readonly d: WakeDeliveryDeps) {}

  private get closed(): boolean {
    return this.d.dispatcher.closed;
  }

  /** Launch a claimed wake, or journal why it cannot run (no harness, no on_wake, overrun skip). */
  start(w: WakeRecord, now: number): void {
    const q = this.d.dispatcher;
    this.d.left(w.armedBy);
    const h = this.d.registry.get(w.harness);
    const chain: ChainSpec = {
      ...q.freshChain(w.authority ?? undefined),
      depth: w.depth,
      ...(w.chain && w.kind === 'call' ? { id: w.chain } : {}),
    };
    const key = `${w.harness}\0${w.id}`;
    const job: Omit<Job, 'resolve' | 'enqueuedAt'> = {
      trigger: 'wake',
      harness: w.harness,
      kind: w.kind === 'wake' ? 'export' : 'tool',
      entry: w.entry,
      args:
        w.kind === 'wake'
          ? JSON.stringify({ id: w.id, scheduled_at: w.when, now, attempt: w.attempt, payload: w.payload })
          : w.payload,
      chain,
      fresh: true,
      wake: w,
      scheduleKey: key,
      now,
    };
    const fail = (code: 'unknown-harness' | 'harness', message: string) => {
      const o: Outcome = {
        status: 'error',
        code,
        message,
        logs: [],
        info: invocationInfo(job, now, 0, 0, 0),
      };
      q.finish({ ...job, enqueuedAt: now, resolve: () => {} }, o);
    };
    if (!h) return fail('unknown-harness', `no harness named ${w.harness} is deployed; the wake is dropped`);
    if (w.kind === 'wake' && !h.onWake)
      return fail('harness', `harness ${w.harness} does not export ${ON_WAKE}`);
    if (w.attempt > this.d.limits.wakeAttempts) {
      // every delivery it had was started and never ended (its process died, or shut down past
      // its drain bound, each time): not run again
      const lastError = `no outcome of delivery ${w.attempt - 1}: the process running it stopped (killed, crashed or shut down) before it ended`;
      buryWake(this.d, w, 'interrupted', lastError, w.attempt - 1, chain.id);
      this.releaseRetry(key, w.seq);
      return;
    }
    const running = this.schedules.get(key);
    if (running && running.retry === w.seq) {
      // the retry of the occurrence that holds the schedule: it runs now
      running.retry = null;
      running.chains.push(chain.id);
    } else if (running) {
      // an occurrence the running one armed itself (a recurring schedule re-arms first, and its
      // next instant may already be due: docs/wakes.md) is the schedule's continuation: dropping
      // it would end the schedule, so it waits for the running one, whatever overrun says
      if (this.d.limits.overrun === 'defer' || (w.chain !== null && running.chains.includes(w.chain))) {
        running.deferred = w; // runs when the previous occurrence finishes (the latest replaces)
        return;
      }
      this.d.counters.overrunSkips++;
      const rec: JournalRecord = {
        trigger: 'skip',
        harness: w.harness,
        entry: w.entry,
        chain: chain.id,
        depth: w.depth,
        wake: w.id,
        attempt: w.attempt,
        scheduledAt: w.when,
        start: now,
        ms: 0,
        outcome: 'refused',
        detail: `refused by limit overrun = skip: the previous occurrence of ${w.id} is still running`,
        fuel: 0,
      };
      this.d.store.journal.append(rec);
      this.d.store.dues.finish(w.id, w.seq);
      this.d.emit('invocation', rec, null);
      return;
    } else this.schedules.set(key, { chains: [chain.id], deferred: null, retry: null });
    this.d.emit('wake', {
      id: w.id,
      harness: w.harness,
      scheduledAt: w.when,
      firedAt: now,
      lateMs: now - w.when,
      attempt: w.attempt,
    });
    q.launch({ ...job, enqueuedAt: now, resolve: () => {} });
  }

  /**
   * A wake's worker was lost: before the guest started (the worker crashed or was replaced while
   * the run waited in its messages; `delayMs` 0), or after it started with attempts left (the
   * dispatcher's backoff, `delayMs` > 0). Either way it is a host fault, not an outcome of the
   * guest, and nothing is journaled. Its claim stays, and it is delivered again with attempt + 1
   * (counted in `redeliveries`) after `delayMs`, as after a crash of the process; while shutting
   * down, the claim is left for the next start.
   */
  unstarted(j: Job, why: string, delayMs = 0): void {
    const w = j.wake!;
    this.d.log(
      delayMs > 0
        ? `wake ${w.id} of ${j.harness} (attempt ${w.attempt}) is delivered again in ${delayMs} ms: its worker was lost (${why})`
        : `wake ${w.id} of ${j.harness} (attempt ${w.attempt}) is delivered again: its worker was lost before the guest started (${why})`,
    );
    this.again(j, delayMs);
  }

  /**
   * Deliver the claimed wake of `j` again after `delayMs`. With a delay its schedule stays held
   * for the retry (an occurrence falling due meanwhile is deferred behind it); without one (nothing
   * of it ran) the schedule is released and its deferred occurrence goes along.
   */
  private again(j: Job, delayMs: number): void {
    const w = j.wake!;
    const sched = j.scheduleKey !== undefined ? this.schedules.get(j.scheduleKey) : undefined;
    if (this.closed) {
      if (j.scheduleKey !== undefined) this.schedules.delete(j.scheduleKey);
      return;
    }
    if (delayMs > 0) {
      if (sched) sched.retry = w.seq;
      setTimeout(() => {
        // while shutting down the claim is left for the next start
        if (this.closed) return;
        this.d.redeliver.push(w);
        this.d.armTimer();
      }, delayMs).unref();
      return;
    }
    if (j.scheduleKey !== undefined) this.schedules.delete(j.scheduleKey);
    this.d.redeliver.push(w);
    if (sched?.deferred) this.d.redeliver.push(sched.deferred);
    this.d.armTimer();
  }

  /**
   * Settle a wake's claim once its outcome is known (the dispatcher journaled it, or failed to):
   * finished; or, for a host fault, delivered again after the backoff while attempts are left and
   * else moved to the dead-letter set. A guest's own outcome (ok, failed, a trap) is final.
   * @returns true when the wake is delivered again (its schedule stays held for it)
   */
  settle(j: Job, o: Outcome, journalError: string | null): boolean {
    const w = j.wake!;
    const limits = this.d.limits;
    if (journalError !== null) {
      // the run's record is not durable: as a lost worker, it is delivered again or dead-lettered
      const why = `its journal record could not be written (${journalError})`;
      if (this.closed) return false; // the claim stays for the next start
      if (w.attempt < limits.wakeAttempts) {
        const delayMs = limits.wakeRetryMs * 2 ** (w.attempt - 1);
        this.d.log(
          `wake ${w.id} of ${j.harness} (attempt ${w.attempt}) is delivered again in ${delayMs} ms: ${why}`,
        );
        this.again(j, delayMs);
        return true;
      }
      buryWake(this.d, w, 'store-error', why, w.attempt, j.chain.id);
      return false;
    }
    if (o.status === 'error' && o.code === 'worker-lost') {
      // the dispatcher retries a lost worker while attempts are left: this was the last
      buryWake(this.d, w, 'worker-lost', o.message, w.attempt, j.chain.id);
      return false;
    }
    this.d.store.dues.finish(w.id, w.seq);
    return false;
  }

  /** A wake's run ended: its schedule's deferred occurrence, if any, is delivered next. */
  finished(j: Job): void {
    if (j.scheduleKey === undefined) return;
    const deferred = this.schedules.get(j.scheduleKey)?.deferred;
    this.schedules.delete(j.scheduleKey);
    if (deferred) this.d.redeliver.push(deferred);
  }

  /**
   * A retry holding schedule `key` will not start (its claim is gone, or it was dead-lettered):
   * the schedule is released and its deferred occurrence delivered.
   */
  releaseRetry(key: string, seq: number): void {
    const sched = this.schedules.get(key);
    if (!sched || sched.retry !== seq) return;
    this.schedules.delete(key);
    if (sched.deferred) this.d.redeliver.push(sched.deferred);
  }
}

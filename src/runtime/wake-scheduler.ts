/**
 * The wake scheduler: what of the due-set is due, and when. It keeps the due heap (when, seq) of
 * pending wakes, a timer for the earliest and the claimed wakes to deliver again; each drain
 * claims due wakes in the store while the dispatcher has room and hands them to wake delivery
 * (wake-delivery.ts), which starts them, holds a schedule to one occurrence at a time and settles
 * each claim (finished, delivered again, or dead-lettered: docs/wakes.md).
 *
 * The heap is a window of the due-set: it holds every pending wake up to the horizon, the last
 * (when, seq) read from the store in due order, and none past it. The store's (when, seq) index is
 * read {@link DUE_WINDOW} entries at a time (RuntimeOptions.dueWindow), at load and again whenever
 * the horizon comes within {@link REFILL_AHEAD_MS} of now, so a drain always finds every due wake
 * in the heap while a large due-set costs its window in memory and at start, not its size. An
 * arming past the horizon is not pushed: the read that moves the horizon over it brings it. Once a
 * read comes back short, the whole due-set is in the heap and the horizon is +Infinity. A wake's
 * (when, seq) never changes (a re-arm is a new seq), so an entry that reaches the heap twice (a
 * rescan of an arming the window had already read) costs one failed claim, nothing else.
 *
 * Delivery is at-least-once (docs/runtime-queue.md): a wake is claimed in the store (its attempt
 * counted) before it runs and forgotten only after its outcome is journaled (dispatcher.ts), so a
 * process killed in between re-fires it at the next start with attempt + 1.
 */
import type { RuntimeLimits } from './limits.js';
import { DueHeap } from './dueset.js';
import type { Dispatcher } from './dispatcher.js';
import type { Counters } from './outcome.js';
import type { WorkerPool } from './pool.js';
import type { HarnessRegistry } from './registry.js';
import { WakeDelivery } from './wake-delivery.js';
import type { RuntimeStore, WakeRecord } from '../store/store.js';
import { storeFault } from '../store/store-fault.js';

/**
 * The longest the due timer sleeps, ms. Due instants are wall-clock instants but timers run on the
 * monotonic clock: waking at least this often, a step of the wall clock forward (NTP, an operator)
 * fires what it made due within this bound, not after the monotonic wait (docs/wakes.md).
 */
const MAX_TIMER_MS = 1000;
/**
 * Most due wakes one drain of a local store sets aside for a harness at its limit (each costs a
 * claim and a release, two SQLite transactions, once): a drain stays in the milliseconds, and
 * a longer run of held wakes at the head is worked through by the drains that follow.
 */
const SET_ASIDE_PER_DRAIN = 512;
/**
 * Entries of the (when, seq) index read from the store at a time (16 bytes each in the heap). A
 * read costs ~1 us per entry, taken in the drain that needs it: a few ms once per DUE_WINDOW wakes.
 */
export const DUE_WINDOW = 16_384;
/**
 * The window is read further once its horizon comes this close, ms (the timer's longest sleep, so
 * an idle timer wakes for it before the entries past the horizon can fall due).
 */
const REFILL_AHEAD_MS = MAX_TIMER_MS;

/** What the wake scheduler reaches besides the dispatcher and the registry. */
export interface WakeSchedulerDeps {
  limits: Readonly<RuntimeLimits>;
  store: RuntimeStore;
  pool: WorkerPool;
  counters: Counters;
  dispatcher: Dispatcher;
  registry: HarnessRegistry;
  emit(event: string, ...args: unknown[]): void;
  log(line: string): void;
  /** one of the wakes `armedBy` armed left the due-set here (fired) */
  left(armedBy: string): void;
  /** entries of the store's (when, seq) index read at a time (default {@link DUE_WINDOW}) */
  window?: number;
}

/** The due heap, its timer and the drains that claim due wakes for delivery. */
export class WakeScheduler {
  private heap = new DueHeap();
  /**
   * Local stores only: due entries set aside because their harness was at its concurrency or rate
   * limit, one heap per harness. A drain takes from a harness's heap only while that harness may
   * start, so wakes of a held harness are claimed and released once, not on every drain, and
   * never stand in front of other harnesses' due wakes in the main heap. A heap is dropped when
   * its last entry is taken, so every heap here is non-empty.
   */
  private held = new Map<string, DueHeap>();
  private maxSeq = 0;
  /**
   * The horizon: the last (when, seq) read from the store's index in due order. Every pending wake
   * up to it is in the heap (or set aside in `held`), none past it; +Infinity once the due-set was
   * read to its end, -Infinity before the first read.
   */
  private horizonWhen = -Infinity;
  private horizonSeq = -Infinity;
  /** pending wakes in the store (kept here: counting rows per arm would be O(n)) */
  pendingCount = 0;
  /** due wakes up to this instant have been counted as spilled once */
  private spillMark = -Infinity;
  /**
   * When the last spill count was taken (counts come at most every 50 ms). Kept apart from
   * `spillMark`: a drain that finds nothing due moves the mark but counts nothing, so it must not
   * hold back the count of the drain right after it (a timer that fires a millisecond before its
   * instant, as Date.now() judges it, runs exactly such a drain).
   */
  private spillCountedAt = -Infinity;
  /** claimed wakes to deliver again (claimed but unfinished at the start, or lost before they ran) */
  readonly redeliver: WakeRecord[] = [];
  private timer: NodeJS.Timeout | null = null;
  private timerAt = Infinity;
  /**
   * Due work (the heap's due entries, re-deliveries) that the last drain could start none of
   * waits until this instant: the earliest a rate token frees, or Infinity when only a finishing
   * invocation can free room (it dispatches by itself). 0: no such wait. Cleared when wakes are
   * armed or adopted, so a new wake of a harness that may start is not held back.
   */
  private notBefore = 0;
  private started = false;
  /** wakes started since the runtime was created (a drain that starts none may sleep) */
  private wakesStarted = 0;
  private lastSpillLog = 0;
  private readonly d: WakeSchedulerDeps;
  private readonly window: number;
  /** starts what a drain claims and settles each claim once its outcome is known */
  readonly delivery: WakeDelivery;

  constructor(deps: WakeSchedulerDeps) {
    this.d = deps;
    this.window = deps.window ?? DUE_WINDOW;
    this.delivery = new WakeDelivery({
      ...deps,
      redeliver: this.redeliver,
      armTimer: () => this.armTimer(),
    });
  }

  private get closed(): boolean {
    return this.d.dispatcher.closed;
  }

  /**
   * Load the due-set from the store: claimed-but-unfinished wakes first, then the count of pending
   * ones, the highest seq (later armings by other processes are rescanned past it) and the first
   * window of the (when, seq) index. A store fault on that window leaves it to the first drain.
   * @throws what the store throws for the claims, the count or the highest seq
   */
  load(): void {
    const dues = this.d.store.dues;
    const claimed = dues.claimed();
    for (const c of claimed) this.redeliver.push(c);
    this.maxSeq = dues.lastSeq();
    this.pendingCount = dues.count();
    this.heap = new DueHeap(this.window);
    this.held.clear();
    this.horizonWhen = -Infinity;
    this.horizonSeq = -Infinity;
    try {
      this.readWindow();
    } catch (e) {
      if (storeFault(e) === null) throw e;
    }
  }

  /** Whether (when, seq) lies past the horizon (the store holds it; the heap does not). */
  private pastHorizon(when: number, seq: number): boolean {
    return when > this.horizonWhen || (when === this.horizonWhen && seq > this.horizonSeq);
  }

  /** Read the next window of the store's (when, seq) index into the heap and move the horizon. */
  private readWindow(): void {
    const after: [number, number] | null =
      this.horizonWhen === -Infinity ? null : [this.horizonWhen, this.horizonSeq];
    const { when, seq } = this.d.store.dues.window(after, this.window);
    // in due order: each push stays at the bottom of the heap
    for (let i = 0; i < seq.length; i++) this.heap.push(when[i]!, seq[i]!);
    if (seq.length < this.window) {
      this.horizonWhen = Infinity;
      this.horizonSeq = Infinity;
    } else {
      this.horizonWhen = when[seq.length - 1]!;
      this.horizonSeq = seq[seq.length - 1]!;
    }
  }

  /**
   * Read windows until the horizon is more than {@link REFILL_AHEAD_MS} past `now`: then every
   * wake due by then is in the heap. @throws what the store throws (the horizon stays where the
   * last read left it)
   */
  private fill(now: number): void {
    while (this.horizonWhen !== Infinity && this.horizonWhen <= now + REFILL_AHEAD_MS) this.readWindow();
  }

  /** When the window must be read further (Infinity once the whole due-set is in the heap). */
  private get refillAt(): number {
    return this.horizonWhen === Infinity ? Infinity : this.horizonWhen - REFILL_AHEAD_MS;
  }

  /** Whether {@link start} was called and the runtime was not closed: wakes are delivered. */
  get delivering(): boolean {
    return this.started && !this.closed;
  }

  /** Start firing due wakes; returns false when already started or closed. */
  start(): boolean {
    if (this.started || this.closed) return false;
    this.started = true;
    this.armTimer();
    return true;
  }

  /** Stop the timer (the runtime closes). */
  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  /**
   * Pick up wakes armed by another process on the same store. Cancellations need no rescan: a
   * cancelled wake's claim fails when it is due.
   * @returns how many entries were taken into the heap
   */
  rescan(): number {
    const { when, seq } = this.d.store.dues.index(this.maxSeq);
    for (let i = 0; i < seq.length; i++) {
      // past the horizon: the window's later read brings it (before that read, or after it: an
      // entry already read comes twice, and the second costs one failed claim)
      if (!this.pastHorizon(when[i]!, seq[i]!)) this.heap.push(when[i]!, seq[i]!);
      if (seq[i]! > this.maxSeq) this.maxSeq = seq[i]!;
    }
    // another process may also have cancelled some: take the store's word for the count
    this.pendingCount = this.d.store.dues.count();
    this.notBefore = 0;
    this.armTimer();
    return seq.length;
  }

  /** See BermRuntime.dueIdle. */
  dueIdle(): boolean {
    return (
      this.started &&
      !this.closed &&
      this.redeliver.length === 0 &&
      Math.min(this.heap.peekWhen(), this.horizonWhen) > Date.now() &&
      this.d.dispatcher.capacity() > 0
    );
  }

  /** Take (when, seq) entries of pending armings into the due heap (see BermRuntime.adopt). */
  adopt(when: ArrayLike<number>, seq: ArrayLike<number>): void {
    for (let i = 0; i < seq.length; i++)
      if (!this.pastHorizon(when[i]!, seq[i]!)) this.heap.push(when[i]!, seq[i]!);
    this.notBefore = 0;
    this.armTimer();
  }

  /** A wake was armed (stored as `record`; `replaced`: it replaced a pending one of its id). */
  armed(record: WakeRecord, replaced: boolean): void {
    if (!replaced) this.pendingCount++;
    if (record.seq > this.maxSeq) this.maxSeq = record.seq;
    if (!this.pastHorizon(record.when, record.seq)) this.heap.push(record.when, record.seq);
    this.notBefore = 0;
    this.armTimer();
  }

  /**
   * A drain met a store fault (a full disk, a database locked by another process): the wake it was
   * claiming stayed due, and due work waits `ms` before the next drain tries again.
   */
  storeFaulted(ms: number): void {
    this.notBefore = Date.now() + ms;
    this.armTimer();
  }

  /** Set the timer for the earliest due work (now for re-deliveries). */
  armTimer(): void {
    if (this.closed || !this.started) return;
    const now = Date.now();
    let at =
      this.redeliver.length > 0 ? now : Math.min(this.heap.peekWhen(), this.heldAt(now), this.refillAt);
    // due work that could not start sleeps until a limit frees (not a zero-delay timer per turn)
    if (at < this.notBefore) at = this.notBefore;
    if (at === this.timerAt && this.timer) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.timerAt = at;
    if (at === Infinity) return;
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, at - Date.now()));
    this.timer = setTimeout(() => {
      this.timer = null;
      this.timerAt = Infinity;
      this.d.dispatcher.dispatch();
      this.armTimer();
    }, delay);
    this.timer.unref();
  }

  /**
   * When due work that could not start now may: Infinity when the pool or the concurrency limit is
   * full, or when every harness in `blocked` (those whose due wakes a limit held back) is at its
   * own concurrency: a finishing invocation dispatches. Else the earliest instant one of them gets
   * a rate token, at least 50 ms ahead, so due entries that start nothing for another reason
   * (claimed by another process, cancelled) are looked at again soon, without a busy loop.
   */
  private blockedUntil(now: number, blocked: ReadonlySet<string>): number {
    const q = this.d.dispatcher;
    if (q.capacity() <= 0) return Infinity;
    let wait = blocked.size === 0 ? 0 : Infinity;
    for (const h of blocked) {
      if (q.canStart(h)) wait = Math.min(wait, q.bucket(h).waitMs(now));
    }
    return now + Math.max(50, wait);
  }

  /**
   * The earliest instant a set-aside wake (see `held`) may start: for each harness holding some
   * that is below its concurrency, its earliest entry's due instant or its next rate token,
   * whichever is later. A harness at its concurrency is left out: its finishing invocation
   * dispatches. Infinity when there is none.
   */
  private heldAt(now: number): number {
    const q = this.d.dispatcher;
    let at = Infinity;
    for (const [h, heap] of this.held) {
      if (!q.canStart(h)) continue;
      at = Math.min(at, Math.max(heap.peekWhen(), now + q.bucket(h).waitMs(now)));
    }
    return at;
  }

  /**
   * Why due wakes were left for a later drain, for the spill log line: "pool full (...)" when no
   * wake may start at all (the concurrency limit or no idle worker), and the per-harness limits
   * holding wakes back, each harness named with its limit (`h (harnessRate)`,
   * `h (harnessConcurrency)`): those blocked in this drain, else every harness at a limit now.
   * `now` is the drain's instant, the one its decisions were made at: a rate token that came due
   * while the drain ran (a slow store, a timer that fired a millisecond early) does not erase
   * the limit that held the wakes back.
   */
  private spillReason(blocked: ReadonlySet<string>, now: number): string {
    const q = this.d.dispatcher;
    const parts: string[] = [];
    if (q.capacity() <= 0)
      parts.push(`pool full: ${q.running.size} running, ${this.d.pool.idle()} workers idle`);
    const held: string[] = [];
    for (const h of blocked.size > 0 ? blocked : this.d.registry.names()) {
      if (q.atConcurrency(h)) held.push(`${h} (harnessConcurrency)`);
      else if (q.bucket(h).waitMs(now) > 0) held.push(`${h} (harnessRate)`);
    }
    if (held.length > 0) parts.push(`held by per-harness limits: ${held.join(', ')}`);
    return parts.join('; ') || 'not started in this drain';
  }

  /**
   * Start due wakes while there is capacity; count and log what spills to the next drain. Does
   * nothing before {@link start}.
   */
  drainDue(): void {
    if (!this.started) return;
    const q = this.d.dispatcher;
    const dues = this.d.store.dues;
    const registry = this.d.registry;
    const now = Date.now();
    // every wake due by now is in the heap from here on (a store fault leaves them all due)
    this.fill(now);
    // nothing due and nothing to deliver again (every call's dispatch comes here): what the full
    // drain below would conclude, without its walk
    if (this.redeliver.length === 0 && this.held.size === 0 && this.heap.peekWhen() > now) {
      this.spillMark = now;
      this.notBefore = 0;
      this.armTimer();
      return;
    }
    const setAside: [number, number][] = [];
    const startedBefore = this.wakesStarted;
    // harnesses whose due wakes were held back by a limit in this drain
    const blocked = new Set<string>();
    while (this.redeliver.length > 0 && q.capacity() > 0) {
      const w = this.redeliver[0]!;
      const again = dues.reclaim(w.id, w.seq); // a store fault leaves it to re-deliver
      this.redeliver.shift();
      if (!again) {
        this.delivery.releaseRetry(`${w.harness}\0${w.id}`, w.seq);
        continue;
      }
      this.d.counters.redeliveries++;
      this.startWake(again, now);
    }
    const claimDue = dues.claimDue?.bind(dues);
    // A shared store: take what is due, as many as there is room for, in one round trip; the heap
    // only says when to look. When fewer come back than asked, nothing else is due and free, so
    // the due entries left are stale (claimed elsewhere, cancelled, replaced) or being claimed by
    // another process right now: dropped.
    // Only harnesses that may start now (below their concurrency, with a rate token) are asked
    // for, so one harness at its limit does not hold back the others' wakes.
    while (claimDue && this.heap.peekWhen() <= now && q.capacity() > 0) {
      const open = [...registry.names()].filter((h) => q.canStart(h) && q.bucket(h).waitMs(now) === 0);
      const want = q.capacity();
      const shut = registry.size - open.length;
      for (const h of registry.names()) if (!open.includes(h)) blocked.add(h);
      if (open.length === 0) break;
      const got = claimDue(now, want, open, [this.heap.peekWhen(), this.heap.peekSeq()]);
      // entries up to the last row claimed are claimed now, elsewhere, or being claimed elsewhere
      // (an armed row before it that was free would have come back first)
      const last = got[got.length - 1];
      while (
        last &&
        (this.heap.peekWhen() < last.when ||
          (this.heap.peekWhen() === last.when && this.heap.peekSeq() <= last.seq))
      )
        this.heap.pop();
      let held = false;
      for (const w of got) {
        this.pendingCount--;
        if (!q.canStart(w.harness) || !q.bucket(w.harness).take(now)) {
          // a harness reached its limit within this batch: back to pending for a later drain
          dues.release(w.id, w.seq, w.when);
          this.pendingCount++;
          setAside.push([w.when, w.seq]);
          blocked.add(w.harness);
          held = true;
          continue;
        }
        this.startWake(w, now);
      }
      if (got.length < want) {
        while (this.heap.peekWhen() <= now) this.heap.pop();
        // wakes of a harness at its limit may still be due: look again when one can start (a
        // rate token, else a short wait for a running one to finish); seq -1 names no arming
        if (shut > 0) {
          const wait = Math.min(
            ...[...registry.names()]
              .filter((h) => !open.includes(h))
              .map((h) => Math.max(50, q.bucket(h).waitMs(now))),
          );
          this.heap.push(now + wait, -1);
        }
        break;
      }
      if (held) break;
    }
    // A local store: the earliest due entry, from the main heap or from the set-aside heap of a
    // harness that may start now; an entry whose harness is at its limit moves to that harness's
    // heap (claimed and released once), so it does not stand in front of other harnesses' wakes.
    // At most SET_ASIDE_PER_DRAIN move per drain, so a drain stays cheap; the next drain goes on.
    // While every deployed harness is at its concurrency limit (a lone harness at its share of the
    // pool), the main heap's entries are not claimed at all: each would only be released again
    // (two store transactions on this thread, in front of the run that frees room); the run
    // that ends dispatches.
    let movedAside = 0;
    while (!claimDue && q.capacity() > 0) {
      let from: DueHeap | null = null;
      if (this.heap.peekWhen() <= now) {
        if (q.mayStartAny(registry.size)) from = this.heap;
        else for (const h of registry.names()) if (q.atConcurrency(h)) blocked.add(h);
      }
      let fromHarness: string | null = null; // null: the main heap
      for (const [h, heap] of this.held) {
        if (heap.peekWhen() > now) continue;
        if (!q.canStart(h) || q.bucket(h).waitMs(now) > 0) continue;
        if (
          from === null ||
          heap.peekWhen() < from.peekWhen() ||
          (heap.peekWhen() === from.peekWhen() && heap.peekSeq() < from.peekSeq())
        ) {
          from = heap;
          fromHarness = h;
        }
      }
      if (from === null) break;
      const when = from.peekWhen();
      const seq = from.peekSeq();
      const w = dues.claim(seq); // a store fault leaves the entry due
      from.pop();
      if (fromHarness !== null && from.size === 0) this.held.delete(fromHarness);
      if (!w) continue; // cancelled or replaced
      this.pendingCount--;
      if (!q.canStart(w.harness) || !q.bucket(w.harness).take(now)) {
        // the harness is at its concurrency or rate limit: back to pending, in its own heap
        dues.release(w.id, w.seq, w.when);
        this.pendingCount++;
        let aside = this.held.get(w.harness);
        if (!aside) this.held.set(w.harness, (aside = new DueHeap(16)));
        aside.push(when, seq);
        blocked.add(w.harness);
        if (++movedAside >= SET_ASIDE_PER_DRAIN) break;
        continue;
      }
      this.startWake(w, now);
    }
    for (const [when, seq] of setAside) this.heap.push(when, seq);
    // each due wake left behind is counted once (those that fell due since the last count), at
    // most every 50 ms: the count walks the due part of the heap
    let spilled = 0;
    if (this.heap.peekWhen() > now) this.spillMark = now;
    else if (now - this.spillCountedAt >= 50) {
      spilled = this.heap.countDue(now, this.spillMark);
      this.spillMark = now;
      this.spillCountedAt = now;
    }
    this.notBefore =
      this.wakesStarted === startedBefore && (this.redeliver.length > 0 || this.heap.peekWhen() <= now)
        ? // ...but an entry falling due later still fires on time
          Math.min(this.blockedUntil(now, blocked), this.heap.earliestAfter(now), this.refillAt)
        : 0;
    if (spilled > 0) {
      this.d.counters.spills += spilled;
      const oldest = this.heap.peekWhen();
      this.d.emit('spill', { count: spilled, lateMs: now - oldest });
      if (now - this.lastSpillLog >= 1000) {
        this.lastSpillLog = now;
        this.d.log(
          `spilled ${spilled} due wakes to the next drain (${this.spillReason(blocked, now)}); the oldest is ${now - oldest} ms late`,
        );
      }
    }
    this.armTimer();
  }

  /** Hand a claimed wake to delivery, counting it as started by this drain. */
  private startWake(w: WakeRecord, now: number): void {
    this.wakesStarted++;
    this.delivery.start(w, now);
  }
}

/**
 * Arming: wakes and berm.call.after entered into the due-set, checked against the target harness
 * and the limits (delay, payload, ids, the due-set's size and each harness's pending wakes), and
 * their cancellation. The wake scheduler (wake-scheduler.ts) delivers what is armed here.
 */
import { randomUUID } from 'node:crypto';
import type { Authority } from '../contract/index.js';
import { LimitError, type RuntimeLimits } from './limits.js';
import { ON_WAKE } from './outcome.js';
import type { ChainSpec } from './worker-messages.js';
import type { HarnessRegistry } from './registry.js';
import type { RuntimeStore, WakeListOptions, WakeRecord, WakeSpec } from '../store/store.js';
import type { WakeScheduler } from './wake-scheduler.js';

/** A refusal to arm a wake: bad input, nothing armed. */
export class ArmError extends Error {
  override name = 'ArmError';
}

/**
 * A `berm.call.after`: `harness.tool(args)` armed by `by`, after `delayMs` or at the instant `at`
 * (ms since the Unix epoch), in the arming chain `chain` when given.
 */
export interface CallAfterSpec {
  by: string;
  delayMs: number;
  at?: number;
  harness: string;
  tool: string;
  args: string;
  chain?: ChainSpec;
}

/** Arms and cancels wakes in the store, telling the wake scheduler what changed. */
export class WakeArming {
  /**
   * Per arming harness: an upper bound of its pending wakes (a count from the store, plus the
   * wakes it armed since), when that count was taken, and whether none of its wakes has left the
   * due-set here since (fired or cancelled): see {@link checkArmQuota}
   */
  private readonly armedCounts = new Map<string, { n: number; at: number; settled: boolean }>();

  constructor(
    private readonly limits: Readonly<RuntimeLimits>,
    private readonly store: RuntimeStore,
    private readonly registry: HarnessRegistry,
    private readonly scheduler: () => WakeScheduler,
    private readonly emit: (event: string, ...args: unknown[]) => void,
  ) {}

  /** One of the wakes `armedBy` armed left the due-set here: its kept count is recounted at the limit. */
  unsettle(armedBy: string): void {
    const c = this.armedCounts.get(armedBy);
    if (c) c.settled = false;
    // the API's counts are kept per harness
    if (armedBy === API_ARMED_BY)
      for (const [k, v] of this.armedCounts) if (k.startsWith(API_KEY_PREFIX)) v.settled = false;
  }

  /**
   * Arm a wake of `harness`'s on_wake (from outside a guest or from the schedule capability).
   * @param spec delayMs from now, or at (ms since epoch); payload (UTF-8 text); id (default: a new
   *   UUID); armedBy ('api' by default)
   * @returns the stored record
   * @throws ArmError for an unknown harness, one without on_wake, a non-finite or negative
   *   instant, a bad id; LimitError for a payload or delay over the limit or a full due-set.
   *   Nothing is armed when it throws.
   */
  arm(spec: ArmSpec): WakeRecord {
    const w = wakeSpec(spec, this.registry.get(spec.harness), undefined, this.limits);
    if (!spec.guest && w.armedBy === API_ARMED_BY) {
      // the API's arms of one harness are bounded like a harness's own: a re-arm of a pending id
      // replaces it, only a new one counts
      if (!this.store.dues.get(w.id)) {
        const key = apiKey(w.harness);
        this.checkQuota(
          key,
          this.limits.harnessApiWakes,
          () => this.store.dues.countArmedBy(API_ARMED_BY, this.limits.harnessApiWakes, w.harness),
          () =>
            new LimitError(
              'harnessApiWakes',
              this.limits.harnessApiWakes,
              `harness ${w.harness} has ${this.limits.harnessApiWakes} wakes pending that were armed through the API; cancel some (DELETE /wakes/{id}) or let them fire first`,
            ),
        );
        const record = this.put(w);
        this.armedCounts.get(key)!.n++;
        return record;
      }
    }
    if (spec.guest) {
      // wake ids are one namespace across the due-set's harnesses: a guest's re-arm replaces
      // only a wake of its own on_wake, never another harness's
      const held = this.store.dues.get(w.id);
      if (held && !ownsWake(held, spec.harness))
        throw new ArmError(
          `wake id ${JSON.stringify(w.id)} is taken by a wake this harness does not own; choose another id`,
        );
      // a re-arm replaces its own wake: only a new one counts against the harness's quota
      if (!held) {
        this.checkArmQuota(w.armedBy);
        const record = this.put(w);
        this.armedCounts.get(w.armedBy)!.n++;
        return record;
      }
    }
    return this.put(w);
  }

  /**
   * The harnessPendingWakes limit: refuse a new wake armed by harness `by` when `by` already has
   * that many pending. The store is counted (a bounded index range, ~1 ms at 10,000) only when the
   * kept upper bound is a second old (with a shared store other daemons fire, cancel and arm too),
   * or would reach the limit after one of `by`'s wakes fired or was cancelled here: so arming below
   * the limit costs no count, and neither does a refusal. A guest at its limit that kept calling
   * berm.wake.arm had every refused call count 10,000 index entries on the queue's thread, a
   * thousand times the cost of an arm, in front of every other harness's work.
   * @throws LimitError harnessPendingWakes
   */
  private checkArmQuota(by: string): void {
    const max = this.limits.harnessPendingWakes;
    this.checkQuota(
      by,
      max,
      () => this.store.dues.countArmedBy(by, max),
      () =>
        new LimitError(
          'harnessPendingWakes',
          max,
          `harness ${by} has ${max} wakes pending that it armed; cancel some (berm.wake.cancel) or let them fire first`,
        ),
    );
  }

  /**
   * Refuse one more wake under the kept count `key` when `max` are pending: the count kept since
   * `count()` last ran, recounted as {@link checkArmQuota} says. @throws what `refusal` makes
   */
  private checkQuota(key: string, max: number, count: () => number, refusal: () => LimitError): void {
    const now = Date.now();
    let c = this.armedCounts.get(key);
    if (!c || (c.n + 1 > max && !c.settled) || now - c.at >= 1000) {
      c = { n: count(), at: now, settled: true };
      this.armedCounts.set(key, c);
    }
    if (c.n >= max) throw refusal();
  }

  /**
   * Call `harness.tool(args)` after a delay (berm.call.after), or at the instant `at` (ms since
   * the Unix epoch; a past one is due at once) when given; at most one pending per arming
   * harness: re-arming replaces it. Inherits the arming chain (depth + 1).
   * @throws ArmError / LimitError as {@link WakeArming.arm}; LimitError chainDepth when too deep.
   */
  callAfter(spec: CallAfterSpec): WakeRecord {
    const h = this.registry.get(spec.harness);
    if (!h) throw new ArmError(`no harness named ${spec.harness} is deployed`);
    if (!h.tools.some((t) => t.name === spec.tool))
      throw new ArmError(`harness ${spec.harness} has no tool named ${spec.tool}`);
    const when = instant(spec.delayMs, spec.at, this.limits);
    checkPayload(spec.args, this.limits);
    const held = this.store.dues.get(`${CALL_AFTER_PREFIX}${spec.by}`);
    if (held && !ownsWake(held, spec.by))
      throw new ArmError(`the wake id ${held.id} is taken by a wake ${spec.by} did not arm`);
    const depth = (spec.chain?.depth ?? -1) + 1;
    if (depth > this.limits.chainDepth)
      throw new LimitError('chainDepth', this.limits.chainDepth, `berm.call.after at depth ${depth}`);
    if (!held) {
      this.checkArmQuota(spec.by);
      this.armedCounts.get(spec.by)!.n++;
    }
    return this.put({
      id: `${CALL_AFTER_PREFIX}${spec.by}`,
      kind: 'call',
      harness: spec.harness,
      entry: spec.tool,
      when,
      payload: spec.args,
      armedBy: spec.by,
      chain: spec.chain?.id ?? null,
      depth,
      armedAt: Date.now(),
      authority: spec.chain?.authority ?? null,
    });
  }

  private put(spec: WakeSpec): WakeRecord {
    if (this.scheduler().pendingCount >= this.limits.maxPendingWakes && !this.store.dues.get(spec.id))
      throw new LimitError('maxPendingWakes', this.limits.maxPendingWakes, 'the due-set is full');
    const { record, replaced } = this.store.dues.arm(spec);
    this.scheduler().armed(record, replaced);
    this.emit('armed', record);
    return record;
  }

  /**
   * Cancel a pending wake. Without `harness` (the operator: API, CLI) any wake of that id; with it
   * (a guest's berm.wake.cancel) only one `harness` owns: a wake of its own on_wake, or the
   * berm.call.after it armed (stored under the harness it calls).
   * @returns whether one was cancelled.
   */
  cancel(id: string, harness?: string): boolean {
    let done: boolean;
    const held = this.store.dues.get(id);
    if (harness === undefined) {
      done = this.store.dues.cancel(id);
      if (done && held) this.unsettle(held.armedBy);
    } else {
      done = held !== undefined && ownsWake(held, harness) && this.store.dues.cancel(id, held.harness);
      if (done) this.unsettle(held!.armedBy);
    }
    if (done) {
      this.scheduler().pendingCount--;
      this.emit('cancelled', { id, harness: held?.harness ?? '' });
    }
    return done;
  }

  /** Pending wakes, earliest first, as DueStore.list bounds them. */
  list(options: WakeListOptions = {}): WakeRecord[] {
    return this.store.dues.list(options);
  }
}

/** armedBy of a wake armed through bermd's API (POST /wakes). */
const API_ARMED_BY = 'api';
/** Kept counts of the API's arms are per harness, under this prefix (no harness name has a NUL). */
const API_KEY_PREFIX = '\0api\0';
const apiKey = (harness: string): string => API_KEY_PREFIX + harness;

/** What {@link WakeArming.arm} takes. */
export interface ArmSpec {
  harness: string;
  /**
   * ms from now (default 0). With `at` as well: the delay that `at` came from (an instant plus
   * this delay: the schedule capability's arm), checked against maxDelayMs as a delay
   */
  delayMs?: number;
  /** due instant, ms since epoch (a past one is due at once) */
  at?: number;
  /** UTF-8 text handed to on_wake (default '') */
  payload?: string;
  /** wake id (default a new UUID); re-arming an id replaces the pending wake */
  id?: string;
  /** 'api', 'cli' or the arming harness (default 'api') */
  armedBy?: string;
  /**
   * armed by `harness` itself through a capability (berm.wake.arm, the protocol door): an
   * existing wake of the same id is replaced only when `harness` owns it (its own on_wake's);
   * otherwise ArmError. Without it (the operator) any wake of that id is replaced.
   */
  guest?: boolean;
  chain?: ChainSpec;
  /** who the wake acts for (default: the arming chain's authority); persisted with the wake */
  authority?: Authority;
}

/**
 * Check an arming request against the target harness and the limits and build what to store.
 * Shared by the runtime and by arming from outside a running queue (berm wake add).
 * @param target the harness as known (undefined: not deployed or declared)
 * @param known names of the known harnesses, for the error message of the operator's own door (the
 *   CLI on its state); undefined where the caller may not learn them (an agent, a guest, HTTP)
 * @throws ArmError / LimitError (see {@link WakeArming.arm})
 */
export function wakeSpec(
  spec: ArmSpec,
  target: { onWake: boolean } | undefined,
  known: string[] | undefined,
  limits: Pick<RuntimeLimits, 'maxDelayMs' | 'maxPayloadBytes'>,
): WakeSpec {
  if (!target)
    throw new ArmError(
      `no harness named ${spec.harness} is deployed` +
        (known === undefined ? '' : ` (deployed: ${[...known].sort().join(', ') || 'none'})`),
    );
  if (!target.onWake)
    throw new ArmError(`harness ${spec.harness} does not export ${ON_WAKE}; it cannot be woken`);
  const when = instant(spec.delayMs, spec.at, limits);
  const payload = spec.payload ?? '';
  checkPayload(payload, limits);
  const id = spec.id ?? `w-${randomUUID()}`;
  checkId(id);
  return {
    id,
    kind: 'wake',
    harness: spec.harness,
    entry: ON_WAKE,
    when,
    payload,
    armedBy: spec.armedBy ?? 'api',
    chain: spec.chain?.id ?? null,
    // a schedule is not a chain: each occurrence starts a fresh one (else a recurring wake would
    // hit the depth limit after a few occurrences)
    depth: 0,
    armedAt: Date.now(),
    // ...but it acts for whoever armed it (persisted with the wake)
    authority: spec.authority ?? spec.chain?.authority ?? null,
  };
}

/**
 * The due instant (ms since the epoch, rounded) of a wake armed with `delayMs` from now, or at `at`.
 * Both given: due at `at`, which is an earlier instant plus `delayMs` (the schedule capability
 * counts a guest's delay from its invocation's instant, docs/wakes.md); the delay itself is then
 * checked too, so a guest that ran for a while cannot arm further ahead than maxDelayMs.
 * @throws ArmError for a delay that is not finite or negative, or an instant that is not finite;
 *   LimitError maxDelayMs for a delay, or a due instant from now, over the limit
 */
function instant(
  delayMs: number | undefined,
  at: number | undefined,
  limits: Pick<RuntimeLimits, 'maxDelayMs'>,
): number {
  const now = Date.now();
  let when: number | undefined;
  if (at !== undefined) {
    if (typeof at !== 'number' || !Number.isFinite(at))
      throw new ArmError(`the instant ${at} is not a finite number of ms since the epoch`);
    when = at;
  }
  if (delayMs !== undefined || when === undefined) {
    const d = delayMs ?? 0;
    if (typeof d !== 'number' || !Number.isFinite(d)) throw new ArmError(`delay ${d} ms is not finite`);
    if (d < 0) throw new ArmError(`delay ${d} ms is negative`);
    if (d > limits.maxDelayMs) throw new LimitError('maxDelayMs', limits.maxDelayMs, `the delay is ${d} ms`);
    when ??= now + d;
  }
  if (when - now > limits.maxDelayMs)
    throw new LimitError(
      'maxDelayMs',
      limits.maxDelayMs,
      `the wake would be due in ${Math.round(when - now)} ms`,
    );
  return Math.round(when);
}

function checkPayload(payload: string, limits: Pick<RuntimeLimits, 'maxPayloadBytes'>): void {
  const n = Buffer.byteLength(payload, 'utf8');
  if (n > limits.maxPayloadBytes)
    throw new LimitError('maxPayloadBytes', limits.maxPayloadBytes, `the payload is ${n} bytes`);
}

function checkId(id: string): void {
  // control characters: C0, DEL and C1 (Unicode Cc); an id is printed as it is (berm wake ls)
  if (id === '' || Buffer.byteLength(id) > 256 || /\p{Cc}/u.test(id))
    throw new ArmError(
      `wake id ${JSON.stringify(id.slice(0, 40))} must be 1..256 bytes without control characters`,
    );
  if (id.startsWith(CALL_AFTER_PREFIX))
    throw new ArmError(
      `wake id ${JSON.stringify(id.slice(0, 40))} is reserved for berm.call.after (ids ${CALL_AFTER_PREFIX}<harness>)`,
    );
}

/** The id of a harness's pending berm.call.after is this prefix and the arming harness's name. */
const CALL_AFTER_PREFIX = 'after:';

/**
 * Whether `harness` owns a pending wake, so that its guest may replace or cancel it: a wake of its
 * own on_wake (whoever armed it), or the berm.call.after it armed (stored under its target).
 */
function ownsWake(w: Pick<WakeRecord, 'kind' | 'harness' | 'armedBy'>, harness: string): boolean {
  return w.kind === 'wake' ? w.harness === harness : w.armedBy === harness;
}

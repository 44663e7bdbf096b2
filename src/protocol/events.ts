/**
 * Harnesses as event subscription targets. The agent daemon's bus routes an event to an agent
 * (`SubscribeEventMsg.target_agent`); berm adds a second kind of target, a harness, addressed as
 * `harness:<name>` in the same field. A subscription is kept in the runtime's store
 * (SubscriptionStore, src/store/store.ts), so it survives a restart and, on a store shared by
 * several daemons, is known to each of them; `publish` enqueues one notify trigger per
 * subscription whose source matches exactly, each carrying the record the runtime hands to the
 * harness's `on_notify` (`{id, source, payload, now, attempt}`), one chain level below the publisher.
 *
 * The bus lives on the thread that owns the queue (and its store). Deliveries go through the
 * queue, so the chain depth and the chain's gas budget bound a loop such as
 * send -> done -> notify -> send: past the limit the queue refuses the notify, and the bus
 * reports the refusal (`onRefused`).
 */
import type { Authority } from '../contract/index.js';
import type { SubscriptionRecord, SubscriptionStore } from '../store/store.js';
import { openSubscriptionFile, type SubscriptionFile } from '../store/subscriptions.js';
import type { SubscriptionView } from './door.js';

/** Prefix of a harness target in `target_agent`. */
export const HARNESS_TARGET_PREFIX = 'harness:';

/** One persisted subscription (the store's record). */
export type Subscription = SubscriptionRecord;

/** The harness named by a `harness:<name>` target, or null for any other target. */
export function targetHarness(target: string): string | null {
  if (!target.startsWith(HARNESS_TARGET_PREFIX)) return null;
  const name = target.slice(HARNESS_TARGET_PREFIX.length);
  return /^[a-z0-9_-]+$/i.test(name) ? name : null;
}

/** The chain a publish happened in, as the queue knows it (opaque to the bus). */
export type ChainRef = unknown;

/** How the bus reaches the queue: enqueue `harness`'s on_notify with `record` in `chain`'s child. */
export type Deliver = (
  harness: string,
  record: { id: string; source: string; payload: string },
  context: { chain?: ChainRef; authority: Authority },
) => Promise<{ refused?: string }>;

/** Options of {@link HarnessEventBus}: where subscriptions are kept, `subscriptions` or `database`. */
export interface EventBusOptions {
  /** the runtime's store of subscriptions (the door's: attach.ts); the bus does not close it */
  subscriptions?: SubscriptionStore;
  /**
   * Without `subscriptions`: a SQLite file of the bus's own (":memory:" for none), for a bus used
   * without a runtime; the bus closes it
   */
  database?: string;
  /** enqueue a notify trigger (the queue's notify) */
  deliver: Deliver;
  /** called when the queue refuses a delivery (chain depth, gas, unknown harness, no on_notify) */
  onRefused?: (harness: string, source: string, reason: string) => void;
  /** most subscriptions one harness may hold (default 1,000) */
  maxPerHarness?: number;
}

/** Thrown when a subscription is refused (bad source, too many). */
export class SubscriptionError extends Error {
  override name = 'SubscriptionError';
}

/** The bus towards harnesses (see the module comment). */
export class HarnessEventBus {
  private readonly db: SubscriptionStore;
  /** the file of the bus's own (the `database` option), closed with the bus */
  private readonly file: SubscriptionFile | null = null;
  private readonly maxPerHarness: number;
  /** deliveries started, refused by the queue */
  readonly counts = { delivered: 0, refused: 0 };
  /** once subscriptions whose delivery is pending (see {@link publish}) */
  private readonly onceInFlight = new Set<number>();

  /**
   * @throws Error when neither `subscriptions` nor `database` is given; better-sqlite3's errors
   *   when `database` cannot be opened
   */
  constructor(private readonly options: EventBusOptions) {
    if (options.subscriptions) this.db = options.subscriptions;
    else if (options.database !== undefined) this.db = this.file = openSubscriptionFile(options.database);
    else throw new Error('the event bus needs a subscription store (subscriptions) or a file (database)');
    this.maxPerHarness = options.maxPerHarness ?? 1_000;
  }

  /** The wire view of a subscription (target_agent `harness:<name>`). */
  static view(s: Subscription): SubscriptionView {
    return { id: s.id, source: s.source, target_agent: HARNESS_TARGET_PREFIX + s.harness, once: s.once };
  }

  /**
   * Subscribe `harness` to `source`.
   * @throws SubscriptionError for an empty or over-long source, or past the per-harness maximum
   */
  subscribe(harness: string, source: string, once: boolean, authority: Authority = {}): Subscription {
    if (source === '' || source.length > 1024) {
      throw new SubscriptionError(`source must be 1..1024 characters, got ${source.length}`);
    }
    const n = this.db.count(harness);
    if (n >= this.maxPerHarness) {
      throw new SubscriptionError(
        `harness ${harness} holds ${n} subscriptions; the limit is ${this.maxPerHarness}`,
      );
    }
    const spec = { source, harness, once, authority, createdAt: Date.now() };
    return { id: this.db.add(spec), ...spec };
  }

  /** Remove subscription `id` (only if it targets `harness`, when given). True when removed. */
  unsubscribe(id: number, harness?: string): boolean {
    return this.db.remove(id, harness);
  }

  /** Subscriptions, of one harness when given, in id order. */
  list(harness?: string): Subscription[] {
    return this.db.list(harness);
  }

  /**
   * Publish an event: enqueue one notify per subscription of `source` (exact match). A `once`
   * subscription is removed when the queue has accepted its delivery, not before: removed first,
   * a delivery the queue refused (full, rate, chain depth) or a crash before the enqueue was
   * written lost the subscription with its event. While its delivery is pending it takes no other.
   * @param context the publisher's chain (deliveries run one level deeper) and authority
   * @returns how many deliveries were started
   */
  publish(source: string, payload: string, context: { chain?: ChainRef } = {}): number {
    let started = 0;
    for (const s of this.db.bySource(source)) {
      if (s.once) {
        if (this.onceInFlight.has(s.id)) continue;
        this.onceInFlight.add(s.id);
      }
      started++;
      this.counts.delivered++;
      const refused = (why: string): void => {
        this.counts.refused++;
        this.options.onRefused?.(s.harness, source, why);
      };
      void this.options
        .deliver(
          s.harness,
          { id: String(s.id), source, payload },
          {
            ...(context.chain !== undefined ? { chain: context.chain } : {}),
            authority: s.authority,
          },
        )
        .then(
          (r) => {
            if (r.refused !== undefined) refused(r.refused);
            else if (s.once) this.removeDelivered(s.id);
          },
          (e: unknown) => refused(e instanceof Error ? e.message : String(e)),
        )
        .finally(() => this.onceInFlight.delete(s.id));
    }
    return started;
  }

  /** Remove a once subscription whose delivery was accepted (the store may be closed by then). */
  private removeDelivered(id: number): void {
    try {
      this.unsubscribe(id);
    } catch {
      // closed or away: the subscription stays and fires again on the next event (at-least-once)
    }
  }

  /** Close the bus's own file (`database`); a store given as `subscriptions` stays open. */
  close(): void {
    this.file?.close();
  }
}

/**
 * The storage seam of the runtime: everything the queue keeps across restarts goes through
 * {@link RuntimeStore} — the due-set (pending wakes and claimed-but-unfinished ones), deployments,
 * the storage capability's keys, the invocation journal and the protocol door's subscriptions. The SQLite backend (sqlite-store.ts)
 * is the default; another backend (PostgreSQL for several daemons) is a new file implementing the
 * same interface. Every method is synchronous: the SQLite backend is, and the queue calls them on
 * its own thread between guest runs. A networked backend can keep this shape by serving from a
 * local cache and writing through, or a later revision can make the interface asynchronous.
 */

import type { Authority } from '../contract/index.js';

/** What a wake starts when it fires. */
export type WakeKind = 'wake' | 'call';

/** One wake: pending in the due-set, or claimed (fired, outcome not yet journaled). */
export interface WakeRecord {
  /** unique among pending wakes; re-arming an id replaces the pending wake */
  id: string;
  /** arming sequence number, assigned by the store, increasing; identifies one arming of `id` */
  seq: number;
  /** 'wake': the target's `on_wake` with the wake record; 'call': a tool call (berm.call.after) */
  kind: WakeKind;
  /** target harness */
  harness: string;
  /** 'on_wake' for kind wake; the tool name for kind call */
  entry: string;
  /** due instant, milliseconds since the Unix epoch */
  when: number;
  /** kind wake: the payload string handed to on_wake; kind call: the arguments JSON */
  payload: string;
  /** who armed it: a harness name, or 'cli' / 'api' from outside a guest */
  armedBy: string;
  /** chain id of the invocation that armed it, or null from outside */
  chain: string | null;
  /** chain depth the fired work runs at (0 for a fresh chain) */
  depth: number;
  /** deliveries started so far (0 while pending for the first time) */
  attempt: number;
  /** when it was armed, ms since epoch */
  armedAt: number;
  /**
   * Who the fired work acts for: the authority of the invocation that armed it (its agent,
   * session and sender), so a wake may act as the agent that asked; null or absent for none.
   */
  authority?: Authority | null;
}

/** A wake to arm (the store assigns seq; attempt starts at 0). */
export type WakeSpec = Omit<WakeRecord, 'seq' | 'attempt'>;

/** Which pending wakes a listing returns (see {@link DueStore.list}). */
export interface WakeListOptions {
  /** only this harness's wakes */
  harness?: string;
  /** at most this many wakes */
  limit?: number;
  /** stop once the listed payloads reach this many UTF-8 bytes */
  maxBytes?: number;
}

/**
 * The payload bytes one listing of pending wakes stops at (bermd's GET /wakes, the protocol
 * endpoint's and a guest's list_wakes): 4 MiB, 64 of the largest payloads (64 KiB each). Without
 * it a listing of 10,000 wakes read and answered ~655 MB in one request.
 */
export const LIST_WAKES_MAX_BYTES = 4 * 1024 * 1024;

/** The due-set's persistent half. The in-memory heap (dueset.ts) indexes it by (when, seq). */
export interface DueStore extends DeadLetterStore {
  /**
   * Arm (or re-arm: the pending wake with the same id is replaced) a wake.
   * @returns the stored record and whether it replaced a pending one.
   */
  arm(spec: WakeSpec): { record: WakeRecord; replaced: boolean };
  /** Many arms in one transaction (bulk arming from outside a guest). */
  armMany(specs: readonly WakeSpec[]): WakeRecord[];
  /** Remove the pending wake `id` (of `harness`, when given). @returns whether one was removed. */
  cancel(id: string, harness?: string): boolean;
  /** The pending wake with this id, or undefined. */
  get(id: string): WakeRecord | undefined;
  /**
   * Pending wakes ordered by due instant, optionally of one harness, at most `limit`; with
   * `maxBytes`, the listing stops at the first wake whose payload brings the UTF-8 bytes of the
   * payloads listed to `maxBytes` or past it (that wake is the last listed), so one listing reads
   * and holds a bounded amount whatever the due-set holds.
   */
  list(options?: WakeListOptions): WakeRecord[];
  /** Number of pending wakes. */
  count(): number;
  /**
   * Number of pending wakes whose armedBy is `armedBy` (and, given `harness`, that wake
   * `harness`), counted up to `upTo` (a result of `upTo` means at least that many): a bounded
   * index range, however large the due-set.
   */
  countArmedBy(armedBy: string, upTo: number, harness?: string): number;
  /** (when, seq) of every pending wake with seq > afterSeq, in seq order, as two flat arrays. */
  index(afterSeq: number): { when: Float64Array; seq: Float64Array };
  /**
   * (when, seq) of the first `limit` pending wakes in due order ((when, seq) ascending) that come
   * after `after` (all from the earliest when null), as two flat arrays in that order: one range
   * of the (when, seq) index, so a read costs the rows it returns, not the due-set's size.
   */
  window(after: readonly [number, number] | null, limit: number): { when: Float64Array; seq: Float64Array };
  /** The highest seq of a pending wake, 0 when there is none (one index lookup). */
  lastSeq(): number;
  /**
   * Take the pending arming `seq` for delivery: in one transaction remove it from the pending set
   * and record it as claimed with attempt + 1.
   * @returns the claimed record, or null when that arming is gone (cancelled or replaced).
   */
  claim(seq: number): WakeRecord | null;
  /**
   * Optional: take up to `limit` pending wakes of `harnesses` due at `now` (ms since epoch),
   * earliest first, in one round trip, skipping any another process is taking at the same moment. A store shared by
   * several processes offers it: every process holds every pending wake in its heap, so claiming
   * by seq would have them all race for the same earliest row; claiming what is due lets each
   * take different rows. The heap then only says when to look. `from`: only wakes at or after
   * this (when, seq) in due order (the caller's earliest heap entry). @returns fewer than `limit`
   * when no more are due and free.
   */
  claimDue?(now: number, limit: number, harnesses: readonly string[], from?: [number, number]): WakeRecord[];
  /** Claimed records whose outcome was never journaled (a previous process died mid-run). */
  claimed(): WakeRecord[];
  /** Count one more delivery of a claimed record. @returns it with the new attempt, or null. */
  reclaim(id: string, seq: number): WakeRecord | null;
  /** Forget a claim once its outcome is journaled. */
  finish(id: string, seq: number): void;
  /** Put a claimed record back as pending at `when` (a deferred or spilled delivery). */
  release(id: string, seq: number, when: number): void;
}

/** Why a wake left the due-set for the dead-letter set: a host fault on every delivery it had. */
export type DeadReason = 'worker-lost' | 'store-error' | 'interrupted';

/** What the scheduler records when it moves a claim to the dead-letter set. */
export interface DeadSpec {
  reason: DeadReason;
  /** the last delivery's error message */
  lastError: string;
  /** deliveries started (the claim's attempt, less one for `interrupted`: that claim never ran) */
  attempts: number;
  /** when it entered the set, ms since epoch */
  deadAt: number;
}

/**
 * One entry of the dead-letter set: a wake or berm.call.after whose deliveries all ended through a
 * host fault (`wakeAttempts` of them). One entry per wake id: a later one of the same id replaces
 * it (the journal keeps both).
 */
export interface DeadWake extends DeadSpec {
  /** the wake as last claimed (its `attempt` is the claim's count) */
  wake: WakeRecord;
}

/** What {@link DueStore.retryDead} did. */
export type RetryDeadResult =
  | { status: 'armed'; record: WakeRecord }
  | { status: 'missing' }
  /** a pending wake holds the id (a recurring schedule that re-armed itself): nothing changed */
  | { status: 'conflict' };

/**
 * The dead-letter set's half of the store: persisted with the due-set, moved in and out in one
 * transaction each, so an entry is never both pending and dead nor lost in between.
 */
export interface DeadLetterStore {
  /**
   * Move the claim (id, seq) to the dead-letter set in one transaction (a backend that writes wake
   * journal records together with finished claims writes the held ones with it, as `finish` does).
   * @returns false when that claim is gone
   * @throws when the store cannot write (the claim is then kept)
   */
  deadLetter(id: string, seq: number, spec: DeadSpec): boolean;
  /** Entries by the time they entered the set, oldest first, optionally of one harness, at most `limit`. */
  deadList(options?: { harness?: string; limit?: number }): DeadWake[];
  /** Entries per harness (harnesses with none are left out). */
  deadCounts(): Record<string, number>;
  /**
   * Take entry `id` out of the set and arm it again, due at `when` (ms since epoch) with its attempts
   * reset, in one transaction; refused (`conflict`) while a pending wake holds its id.
   */
  retryDead(id: string, when: number): RetryDeadResult;
  /** Remove entry `id`. @returns it, or null when there is none */
  dropDead(id: string): DeadWake | null;
}

/**
 * A deployed harness as persisted: which image (by digest) serves the name, with the grant, never
 * compiled code. The store's deployments are the one record of which name serves which digest.
 */
export interface DeploymentRecord {
  name: string;
  /** lowercase hex sha256 of the ELF */
  sha256: string;
  /**
   * The ELF bytes, or null when the image is kept outside the store as a content-addressed file
   * (bermd keeps `<root>/deployments/images/<sha256>.elf`, written durably before the record);
   * allowed only where {@link DeploymentStore.holdsImages} is false.
   */
  elf: Uint8Array | null;
  /** granted capability names */
  capabilities: string[];
  /** the grant's arguments (src/capabilities/types.ts Grant), as JSON-compatible data */
  grant: Record<string, unknown>;
  /** ms since epoch */
  deployedAt: number;
}

/**
 * Deployments by name. A put or remove is durable when it returns (it survives the process being
 * killed and, on SQLite, the machine losing power: the deployment record is what a deploy is
 * acknowledged on).
 */
export interface DeploymentStore {
  /**
   * Whether every record must carry its bytes: true where the store is the images' only home
   * (PostgreSQL: every daemon deploys from the bytes another one stored), false where a record may
   * name its image by digest alone (`elf` null).
   */
  readonly holdsImages: boolean;
  /**
   * Record `d` (replacing the record of its name).
   * @throws Error when `d.elf` is null and {@link holdsImages} is true; the backend's write error
   *   (a full disk, the database away) when it could not be made durable: nothing changed then
   */
  put(d: DeploymentRecord): void;
  /** Remove the record of `name`. @returns false when there was none */
  remove(name: string): boolean;
  get(name: string): DeploymentRecord | undefined;
  /** Every record, by name. */
  list(): DeploymentRecord[];
  /**
   * The upstream images imported into the deployments (src/daemon/reference-root.ts): name ->
   * lowercase hex sha256 of the bytes last imported under that name.
   */
  referenceImports(): Map<string, string>;
  /**
   * Record the imports `imported` (name -> sha256), replacing the records of those names, in one
   * transaction, durable when it returns.
   * @throws the backend's write error (a full disk, the database away): nothing changed then
   */
  recordReferenceImports(imported: ReadonlyMap<string, string>): void;
}

/** The storage capability's keys, namespaced by harness. */
export interface KeyStore {
  /**
   * The SQLite database file the storage capability should use for harnesses whose grant names
   * none, or null when this backend keeps keys elsewhere (then get/set/delete are the way in).
   */
  readonly databaseFile: string | null;
  get(harness: string, key: Uint8Array): Uint8Array | undefined;
  set(harness: string, key: Uint8Array, value: Uint8Array): void;
  delete(harness: string, key: Uint8Array): void;
}

/** One finished invocation, one line of the journal. */
export interface JournalRecord {
  /** 'call' | 'wake' | 'notify' | 'event' (a WebSocket connection's) | 'skip' (an overrun occurrence that did not run) */
  trigger: string;
  harness: string;
  /** tool name, 'on_wake' or 'on_notify' */
  entry: string;
  chain: string;
  depth: number;
  /** wake id for wake triggers */
  wake?: string;
  /** delivery attempt of a wake (1 = first) */
  attempt?: number;
  /** wake's due instant, ms since epoch */
  scheduledAt?: number;
  /** start, ms since epoch */
  start: number;
  /** duration, ms */
  ms: number;
  /** ok | failed | trapped | refused | error | cancelled (its caller went away) */
  outcome: string;
  /** trap name, failure or refusal message, when not ok */
  detail?: string;
  /** fuel units drawn (granted slices, a multiple of 16,384 at most one slice above what ran) */
  fuel: number;
}

/** The append-only invocation journal. */
export interface Journal {
  /**
   * Append one record durably enough to survive the process being killed (not the machine).
   * @throws when it could not be made durable (a full disk, the database away): the invocation it
   *   records is then not acknowledged
   */
  append(rec: JournalRecord): void;
  close(): void;
}

/**
 * One subscription of a harness to an event source (the protocol door's event bus,
 * src/protocol/events.ts: an event published under `source` becomes a notify of `harness`).
 */
export interface SubscriptionRecord {
  /** assigned by the store, unique, increasing; the id the subscriber removes it by */
  id: number;
  /** the event source it matches exactly */
  source: string;
  /** the harness notified */
  harness: string;
  /** removed once one delivery was accepted */
  once: boolean;
  /** who subscribed (the subscribing invocation's authority), handed to the notified invocation */
  authority: Authority;
  /** when it was made, ms since epoch */
  createdAt: number;
}

/** What {@link SubscriptionStore.importRecords} did with each record it was given. */
export interface SubscriptionImport {
  /** records stored under the id they had */
  kept: number;
  /** records stored under a new id (theirs was taken by another subscription): [old, new] */
  renumbered: [number, number][];
  /** records already present (same source, harness, once, authority and createdAt): not stored again */
  present: number;
}

/**
 * The protocol door's subscriptions. The bus owns the rules (limits, once, delivery); the store
 * keeps the rows, shared by every process of a shared store. Each method is one durable step.
 */
export interface SubscriptionStore {
  /** How many subscriptions `harness` holds. */
  count(harness: string): number;
  /** Store a subscription. @returns its id */
  add(spec: Omit<SubscriptionRecord, 'id'>): number;
  /** Remove subscription `id` (only if it targets `harness`, when given). @returns whether one was removed */
  remove(id: number, harness?: string): boolean;
  /** Subscriptions, of one harness when given, in id order. */
  list(harness?: string): SubscriptionRecord[];
  /** Subscriptions whose source is exactly `source`, in id order. */
  bySource(source: string): SubscriptionRecord[];
  /**
   * Take in the subscriptions a berm before this one kept in a file of the door's own, in one
   * transaction: each keeps its id when that is free, gets a new one when it is taken, and is
   * skipped when an equal record is present (an import repeated after a crash stores nothing twice).
   */
  importRecords(records: readonly SubscriptionRecord[]): SubscriptionImport;
}

/** Everything the runtime persists. */
export interface RuntimeStore {
  readonly dues: DueStore;
  readonly deployments: DeploymentStore;
  readonly keys: KeyStore;
  readonly journal: Journal;
  /** the protocol door's event subscriptions */
  readonly subscriptions: SubscriptionStore;
  /** A short description for the boot log, e.g. "sqlite /var/lib/berm/state.sqlite". */
  readonly description: string;
  /**
   * Send what goes wrong in the store's background work (SQLite's WAL checkpoints on a thread of
   * their own) to `log` from now on; absent from a store without such work.
   */
  reportTo?(log: (line: string) => void): void;
  close(): void;
}

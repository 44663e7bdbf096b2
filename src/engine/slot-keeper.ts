/**
 * The instance slots (a guest memory and its Wasm instance, or a Wasm image's memory) an engine
 * keeps between invocations, over all of its modules, under two bounds:
 *
 * - bytes: what the kept slots hold resident. A slot's pages stay resident once touched: zeroing
 *   them between invocations (instance.ts Slot.reset) keeps them, and JavaScript has no way to
 *   hand them back but to drop the memory and let V8 collect it. So each kept slot is counted by
 *   the bytes it has touched, and the least recently used slots (of any module) are dropped to
 *   make room for a newer one.
 * - count: every WebAssembly.Memory reserves its guard region of address space (about 10 GiB on
 *   64-bit V8, touched or not); 47 bits of address space hold about 13,000 of them per process,
 *   after which `new WebAssembly.Memory` fails with "could not allocate memory".
 *
 * And in time: a slot unused for `idleMs` that holds more than `keepIdleBytes` is dropped at the
 * next sweep, which then asks for a collection (`reclaim`) so that its pages go back to the
 * system once invocations stop; small slots stay, so a rarely called small tool keeps its warm
 * instance.
 */
import { monotonicMs } from '../util/clock.js';

/** The keeper's bounds. Bytes, counts, milliseconds. */
export interface KeeperLimits {
  /** resident bytes of kept slots, at most (a slot larger than this is never kept) */
  maxBytes: number;
  /** kept slots, at most */
  maxSlots: number;
  /** a kept slot unused this long is dropped at the next sweep (unless it is small) */
  idleMs: number;
  /** a kept slot holding at most this many bytes is left by the sweep */
  keepIdleBytes: number;
}

/** Defaults for an engine that is given none: an eighth of the address-space share of 13,000 memories. */
export const DEFAULT_KEEPER_LIMITS: KeeperLimits = {
  maxBytes: 1 << 30,
  maxSlots: 1024,
  idleMs: 5_000,
  keepIdleBytes: 1 << 20,
};

/**
 * One kept slot, a node of two doubly linked lists: the keeper's (least recently kept first) and
 * its owner's (most recently kept last). The records are reused: taking a slot and keeping it
 * again, what every invocation does, allocates nothing (a Set and a Map per list did: their hash
 * tables shrank on the delete and grew again on the add, a few hundred bytes per invocation).
 */
interface Kept<T> {
  owner: object | null;
  item: T | null;
  bytes: number;
  /** monotonicMs() when it was kept */
  at: number;
  older: Kept<T> | null;
  newer: Kept<T> | null;
  ownerOlder: Kept<T> | null;
  ownerNewer: Kept<T> | null;
}

/** An owner's kept slots: the most recently kept and how many. */
interface OwnerList<T> {
  newest: Kept<T> | null;
  n: number;
}

/** The kept slots of one engine (see the module comment); one thread only. */
export class SlotKeeper<T> {
  /** the least and the most recently kept slot (any owner's) */
  private oldest: Kept<T> | null = null;
  private newest: Kept<T> | null = null;
  private kept = 0;
  /**
   * Each owner's kept slots. Weak: an owner dropped without forget() is not held by its entry,
   * which stays while the owner lives (so that an owner alternating between none and one kept
   * slot does not add and delete it each time).
   */
  private readonly byOwner = new WeakMap<object, OwnerList<T>>();
  /** records of taken or dropped slots, for the next keep (at most maxSlots) */
  private readonly free: Kept<T>[] = [];
  private held = 0;
  private timer: NodeJS.Timeout | null = null;
  /** slots dropped (by the bounds or the sweep) since the keeper was made */
  dropped = 0;

  /**
   * @param limits the bounds (see {@link KeeperLimits})
   * @param reclaim asked after a sweep dropped slots: a collection, so that V8 frees their
   *   memories now rather than at its next allocation-driven one (null: none)
   */
  constructor(
    readonly limits: KeeperLimits,
    private readonly reclaim: (() => void) | null = null,
  ) {}

  /** Resident bytes the kept slots hold (by their estimate). */
  get bytes(): number {
    return this.held;
  }

  /** Slots kept now. */
  get size(): number {
    return this.kept;
  }

  /** Slots kept for `owner`. */
  count(owner: object): number {
    return this.byOwner.get(owner)?.n ?? 0;
  }

  /** A kept slot of `owner` (the most recently kept), removed from the keeper; or undefined. */
  take(owner: object): T | undefined {
    const k = this.byOwner.get(owner)?.newest;
    if (k === undefined || k === null) return undefined;
    const item = k.item as T;
    this.remove(k);
    return item;
  }

  /**
   * Keep `item` of `owner`, which holds `bytes` resident, dropping the least recently kept slots
   * (any owner's) until both bounds hold.
   * @returns false when it is not kept (larger than the whole byte bound, or no slot may be kept)
   */
  keep(owner: object, item: T, bytes: number): boolean {
    if (bytes > this.limits.maxBytes || this.limits.maxSlots < 1) {
      this.dropped++;
      return false;
    }
    while (
      this.oldest !== null &&
      (this.held + bytes > this.limits.maxBytes || this.kept >= this.limits.maxSlots)
    ) {
      this.remove(this.oldest);
      this.dropped++;
    }
    const k = this.free.pop() ?? {
      owner: null,
      item: null,
      bytes: 0,
      at: 0,
      older: null,
      newer: null,
      ownerOlder: null,
      ownerNewer: null,
    };
    k.owner = owner;
    k.item = item;
    k.bytes = bytes;
    k.at = monotonicMs();
    k.older = this.newest;
    k.newer = null;
    if (this.newest !== null) this.newest.newer = k;
    else this.oldest = k;
    this.newest = k;
    let list = this.byOwner.get(owner);
    if (list === undefined) this.byOwner.set(owner, (list = { newest: null, n: 0 }));
    k.ownerOlder = list.newest;
    k.ownerNewer = null;
    if (list.newest !== null) list.newest.ownerNewer = k;
    list.newest = k;
    list.n++;
    this.kept++;
    this.held += bytes;
    this.arm();
    return true;
  }

  /** Drop every slot kept for `owner` (its module was undeployed or replaced). */
  forget(owner: object): void {
    const list = this.byOwner.get(owner);
    while (list?.newest) this.remove(list.newest);
    this.byOwner.delete(owner);
  }

  /**
   * Drop the slots unused for `idleMs` that hold more than `keepIdleBytes`; when any was dropped,
   * ask for a collection. Times are util/clock.ts monotonicMs() (process.hrtime): the global
   * `performance` would load a dozen of Node's internal modules, about 2 ms of a one-shot CLI call
   * that disposes one instance.
   * @param now the current time, monotonicMs()
   * @returns the bytes dropped
   */
  sweep(now = monotonicMs()): number {
    let freed = 0;
    for (let k = this.oldest; k !== null;) {
      const next = k.newer;
      if (now - k.at < this.limits.idleMs) break;
      if (k.bytes > this.limits.keepIdleBytes) {
        freed += k.bytes;
        this.remove(k);
        this.dropped++;
      }
      k = next;
    }
    if (freed > 0) this.reclaim?.();
    return freed;
  }

  /** Unlink `k` from both lists and keep its record for reuse (it holds nothing after). */
  private remove(k: Kept<T>): void {
    if (k.older !== null) k.older.newer = k.newer;
    else this.oldest = k.newer;
    if (k.newer !== null) k.newer.older = k.older;
    else this.newest = k.older;
    const list = this.byOwner.get(k.owner!)!;
    if (k.ownerOlder !== null) k.ownerOlder.ownerNewer = k.ownerNewer;
    if (k.ownerNewer !== null) k.ownerNewer.ownerOlder = k.ownerOlder;
    else list.newest = k.ownerOlder;
    list.n--;
    this.kept--;
    this.held -= k.bytes;
    k.owner = null;
    k.item = null;
    k.older = k.newer = k.ownerOlder = k.ownerNewer = null;
    if (this.free.length < this.limits.maxSlots) this.free.push(k);
  }

  /** A sweep `idleMs` from now while a slot that a sweep would drop is kept (never keeps the process alive). */
  private arm(): void {
    if (this.timer !== null) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.sweep();
      for (let k = this.oldest; k !== null; k = k.newer) {
        if (k.bytes > this.limits.keepIdleBytes) {
          this.arm();
          break;
        }
      }
    }, this.limits.idleMs);
    this.timer.unref();
  }
}

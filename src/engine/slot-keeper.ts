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

interface Kept<T> {
  owner: object;
  item: T;
  bytes: number;
  /** performance.now() when it was kept */
  at: number;
}

/** The kept slots of one engine (see the module comment); one thread only. */
export class SlotKeeper<T> {
  /** every kept slot, least recently kept first */
  private readonly lru = new Set<Kept<T>>();
  private readonly byOwner = new Map<object, Kept<T>[]>();
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
    return this.lru.size;
  }

  /** Slots kept for `owner`. */
  count(owner: object): number {
    return this.byOwner.get(owner)?.length ?? 0;
  }

  /** A kept slot of `owner` (the most recently kept), removed from the keeper; or undefined. */
  take(owner: object): T | undefined {
    const list = this.byOwner.get(owner);
    const k = list?.pop();
    if (k === undefined) return undefined;
    if (list!.length === 0) this.byOwner.delete(owner);
    this.lru.delete(k);
    this.held -= k.bytes;
    return k.item;
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
      this.lru.size > 0 &&
      (this.held + bytes > this.limits.maxBytes || this.lru.size >= this.limits.maxSlots)
    ) {
      this.remove(this.lru.values().next().value as Kept<T>);
      this.dropped++;
    }
    const k: Kept<T> = { owner, item, bytes, at: performance.now() };
    this.lru.add(k);
    let list = this.byOwner.get(owner);
    if (list === undefined) this.byOwner.set(owner, (list = []));
    list.push(k);
    this.held += bytes;
    this.arm();
    return true;
  }

  /** Drop every slot kept for `owner` (its module was undeployed or replaced). */
  forget(owner: object): void {
    for (const k of this.byOwner.get(owner) ?? []) {
      this.lru.delete(k);
      this.held -= k.bytes;
    }
    this.byOwner.delete(owner);
  }

  /**
   * Drop the slots unused for `idleMs` that hold more than `keepIdleBytes`; when any was dropped,
   * ask for a collection.
   * @returns the bytes dropped
   */
  sweep(now = performance.now()): number {
    let freed = 0;
    for (const k of [...this.lru]) {
      if (now - k.at < this.limits.idleMs) break;
      if (k.bytes <= this.limits.keepIdleBytes) continue;
      this.remove(k);
      this.dropped++;
      freed += k.bytes;
    }
    if (freed > 0) this.reclaim?.();
    return freed;
  }

  private remove(k: Kept<T>): void {
    this.lru.delete(k);
    this.held -= k.bytes;
    const list = this.byOwner.get(k.owner)!;
    list.splice(list.indexOf(k), 1);
    if (list.length === 0) this.byOwner.delete(k.owner);
  }

  /** A sweep `idleMs` from now while a slot that a sweep would drop is kept (never keeps the process alive). */
  private arm(): void {
    if (this.timer !== null) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.sweep();
      for (const k of this.lru) {
        if (k.bytes > this.limits.keepIdleBytes) {
          this.arm();
          break;
        }
      }
    }, this.limits.idleMs);
    this.timer.unref();
  }
}

/**
 * The due-set's in-memory index: a binary min-heap of (when, seq) pairs in two growable
 * Float64Arrays (16 bytes per pending wake, so a million pending wakes cost 16 MB, not a million
 * objects). The records themselves stay in the store; a heap entry whose arming was cancelled or
 * replaced is stale and is dropped when it reaches the top (the store's claim fails for it), so
 * cancel and re-arm never search the heap. Ties on `when` are broken by seq (arming order).
 */

/** A min-heap of (when, seq). */
export class DueHeap {
  private when: Float64Array;
  private seq: Float64Array;
  private n = 0;

  constructor(capacity = 1024) {
    this.when = new Float64Array(Math.max(16, capacity));
    this.seq = new Float64Array(Math.max(16, capacity));
  }

  /** Entries held (stale ones included). */
  get size(): number {
    return this.n;
  }

  /** Build from flat arrays in O(n) (Floyd's heap construction), replacing the content. */
  static from(when: Float64Array, seq: Float64Array): DueHeap {
    const h = new DueHeap(when.length);
    h.when.set(when);
    h.seq.set(seq);
    h.n = when.length;
    for (let i = (h.n >> 1) - 1; i >= 0; i--) h.down(i);
    return h;
  }

  private less(i: number, j: number): boolean {
    const a = this.when[i]!;
    const b = this.when[j]!;
    return a < b || (a === b && this.seq[i]! < this.seq[j]!);
  }
  private swap(i: number, j: number): void {
    const w = this.when[i]!;
    this.when[i] = this.when[j]!;
    this.when[j] = w;
    const s = this.seq[i]!;
    this.seq[i] = this.seq[j]!;
    this.seq[j] = s;
  }
  private up(i: number): void {
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(i, p)) break;
      this.swap(i, p);
      i = p;
    }
  }
  private down(i: number): void {
    for (;;) {
      const l = 2 * i + 1;
      if (l >= this.n) return;
      const r = l + 1;
      const m = r < this.n && this.less(r, l) ? r : l;
      if (!this.less(m, i)) return;
      this.swap(i, m);
      i = m;
    }
  }

  /** Add an entry. */
  push(when: number, seq: number): void {
    if (this.n === this.when.length) {
      const w = new Float64Array(this.n * 2);
      w.set(this.when);
      this.when = w;
      const s = new Float64Array(this.n * 2);
      s.set(this.seq);
      this.seq = s;
    }
    this.when[this.n] = when;
    this.seq[this.n] = seq;
    this.up(this.n++);
  }

  /** Due instant of the earliest entry, or Infinity when empty. */
  peekWhen(): number {
    return this.n === 0 ? Infinity : this.when[0]!;
  }
  /** seq of the earliest entry (undefined behaviour when empty). */
  peekSeq(): number {
    return this.seq[0]!;
  }

  /** Remove the earliest entry. */
  pop(): void {
    if (this.n === 0) return;
    this.n--;
    if (this.n > 0) {
      this.when[0] = this.when[this.n]!;
      this.seq[0] = this.seq[this.n]!;
      this.down(0);
    }
  }

  /**
   * The earliest due instant later than `t` (stale entries included), or Infinity: a walk that
   * stops at the first entry of each path later than `t` (its subtree is no earlier), so it costs
   * the number of entries due by `t`.
   */
  earliestAfter(t: number): number {
    let best = Infinity;
    const stack = this.n > 0 ? [0] : [];
    while (stack.length > 0) {
      const i = stack.pop()!;
      const w = this.when[i]!;
      if (w > t) {
        if (w < best) best = w;
        continue;
      }
      const l = 2 * i + 1;
      if (l < this.n) stack.push(l);
      if (l + 1 < this.n) stack.push(l + 1);
    }
    return best;
  }

  /**
   * Entries with after < when <= now, stale ones included, counted by a walk that prunes subtrees
   * whose root is later than `now`; at most `cap` are counted.
   */
  countDue(now: number, after = -Infinity, cap = 1_000_000): number {
    let count = 0;
    const stack = this.n > 0 ? [0] : [];
    while (stack.length > 0 && count < cap) {
      const i = stack.pop()!;
      const w = this.when[i]!;
      if (w > now) continue;
      if (w > after) count++;
      const l = 2 * i + 1;
      if (l < this.n) stack.push(l);
      if (l + 1 < this.n) stack.push(l + 1);
    }
    return count;
  }
}

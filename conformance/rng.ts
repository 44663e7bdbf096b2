/** Seeded splitmix64 generator: the same seed gives the same programs on every machine. */
export class Rng {
  private s: bigint;
  constructor(seed: number | bigint) {
    this.s = BigInt.asUintN(64, BigInt(seed) * 0x9e3779b97f4a7c15n + 0x632be59bd9b4e019n);
  }
  /** 64 random bits as an unsigned bigint */
  u64(): bigint {
    this.s = BigInt.asUintN(64, this.s + 0x9e3779b97f4a7c15n);
    let z = this.s;
    z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
    z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
    return z ^ (z >> 31n);
  }
  /** integer in [0, n) */
  int(n: number): number {
    return Number(this.u64() % BigInt(n));
  }
  /** integer in [lo, hi] */
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }
  pick<T>(a: readonly T[]): T {
    return a[this.int(a.length)];
  }
  chance(p: number): boolean {
    return this.int(1_000_000) < p * 1_000_000;
  }
}

/**
 * The linker: host functions registered by capability name (hashed with FNV-1a-64, the upstream
 * ABI's ecall numbers) or raw number, frozen into a lookup table when instances are made.
 */
import { fnv1a64 } from '../util/fnv.js';
import type { Engine, GuestModule } from './engine.js';
import type { HostFunction } from './host.js';
import { Instance, type InstantiateOptions } from './instance.js';

/**
 * Host functions by number. Names are hashed with FNV-1a-64 (the upstream ABI: the capability
 * name's hash is the ecall number in a7).
 */
export class Linker {
  private readonly fns = new Map<bigint, HostFunction>();
  private table: HostTable | null = null;
  constructor(readonly engine: Engine) {}

  /** Register `fn` under a capability name or a raw number. Replaces an earlier registration. */
  define(nameOrNumber: string | bigint, fn: HostFunction): this {
    this.fns.set(callNumber(nameOrNumber), fn);
    this.table = null;
    return this;
  }
  has(nameOrNumber: string | bigint): boolean {
    return this.fns.has(callNumber(nameOrNumber));
  }

  /** A fresh store: memory holding a pristine image, registers zero. Later `define`s do not affect it. */
  instantiate(module: GuestModule, opts: InstantiateOptions = {}): Instance {
    this.table ??= new HostTable(this.fns);
    return new Instance(module, this.table, opts);
  }
}

/** Hashes of the names seen so far: a harness links the same dozen names on every call. */
const hashed = new Map<string, bigint>();

/** The ecall number of a capability name (FNV-1a-64, memoised) or a raw number (taken modulo 2^64). */
function callNumber(nameOrNumber: string | bigint): bigint {
  if (typeof nameOrNumber !== 'string') return BigInt.asUintN(64, nameOrNumber);
  let n = hashed.get(nameOrNumber);
  if (n === undefined) {
    n = fnv1a64(nameOrNumber);
    if (hashed.size < 4096) hashed.set(nameOrNumber, n);
  }
  return n;
}

/** Split a call number into the pieces translated code passes: bits 0-29, 30-59, 60-63. */
function pieces(n: bigint): [number, number, number] {
  return [Number(n & 0x3fffffffn), Number((n >> 30n) & 0x3fffffffn), Number(n >> 60n)];
}

/**
 * An immutable lookup from ecall number to host function, keyed by the number's low 30 bits (a V8
 * Smi), so the hot path neither hashes a BigInt nor boxes a heap number.
 */
export class HostTable {
  private readonly byLow = new Map<number, { mid: number; top: number; fn: HostFunction }[]>();
  constructor(fns: ReadonlyMap<bigint, HostFunction>) {
    for (const [n, fn] of fns) {
      const [low, mid, top] = pieces(n);
      const list = this.byLow.get(low);
      if (list) list.push({ mid, top, fn });
      else this.byLow.set(low, [{ mid, top, fn }]);
    }
  }
  // the last hit: a guest calling one host function in a loop skips the map
  private lastLow = -1;
  private lastMid = -1;
  private lastTop = -1;
  private lastFn: HostFunction | undefined = undefined;

  /** The function registered under n0 | n1 << 30 | n2 << 60, or undefined. */
  get(n0: number, n1: number, n2: number): HostFunction | undefined {
    if (n0 === this.lastLow && n1 === this.lastMid && n2 === this.lastTop) return this.lastFn;
    const list = this.byLow.get(n0);
    if (list === undefined) return undefined;
    for (const e of list) {
      if (e.mid === n1 && e.top === n2) {
        this.lastLow = n0;
        this.lastMid = n1;
        this.lastTop = n2;
        this.lastFn = e.fn;
        return e.fn;
      }
    }
    return undefined;
  }
}

/**
 * The heap host calls of the upstream ABI (berm.heap.start, berm.heap.size) for a module's layout,
 * and berm.log writing to `log`: what a raw entry point that allocates or logs needs.
 */
export function basicHostFunctions(
  module: GuestModule,
  log: (line: string) => void = () => {},
): [string, HostFunction][] {
  const text = new TextDecoder();
  return [
    ['berm.heap.start', () => module.layout.heapStart],
    ['berm.heap.size', () => module.layout.heapSize],
    [
      'berm.log',
      (c) => {
        const a = c.arg(0);
        log(text.decode(c.memory.read(a === Infinity ? c.args[0] : a, Math.min(c.arg(1), 4096))));
      },
    ],
  ];
}

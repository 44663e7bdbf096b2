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
    const n = typeof nameOrNumber === 'string' ? fnv1a64(nameOrNumber) : BigInt.asUintN(64, nameOrNumber);
    this.fns.set(n, fn);
    this.table = null;
    return this;
  }
  has(nameOrNumber: string | bigint): boolean {
    return this.fns.has(
      typeof nameOrNumber === 'string' ? fnv1a64(nameOrNumber) : BigInt.asUintN(64, nameOrNumber),
    );
  }

  /** A fresh store: memory holding a pristine image, registers zero. Later `define`s do not affect it. */
  instantiate(module: GuestModule, opts: InstantiateOptions = {}): Instance {
    this.table ??= new HostTable(this.fns);
    return new Instance(module, this.table, opts);
  }
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
  /** The function registered under n0 | n1 << 30 | n2 << 60, or undefined. */
  get(n0: number, n1: number, n2: number): HostFunction | undefined {
    const list = this.byLow.get(n0);
    if (list === undefined) return undefined;
    for (const e of list) if (e.mid === n1 && e.top === n2) return e.fn;
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
    ['berm.heap.start', () => BigInt(module.layout.heapStart)],
    ['berm.heap.size', () => BigInt(module.layout.heapSize)],
    [
      'berm.log',
      (c) => {
        log(text.decode(c.memory.read(c.args[0], Number(c.args[1] > 4096n ? 4096n : c.args[1]))));
      },
    ],
  ];
}

/**
 * The instance of a Wasm harness image: a fresh WebAssembly.Instance of the instrumented module
 * for each invocation, with a memory of the module's limits that no other instance is using (a
 * new one, or one an earlier instance left at its initial size, zeroed: GuestModule.takeWasmMemory;
 * the instance's data segments fill it as they would a new one), whose import,
 * `berm.syscall(number: i64, ptr: i32, len: i32) -> i64`, reaches the same host functions an
 * ELF's `ecall` reaches: the number is the FNV-1a-64 number an ELF puts in a7, the pointer and the
 * length are what an ELF passes in a0 and a1 (a2..a5 read as zero), the answer is the new a0.
 * Two numbers are the instrumentation's own (src/wasm/instrument.ts): the fuel poll and the report
 * of a failed `memory.grow`.
 */
import { fnv1a64 } from '../util/fnv.js';
import { GROW_CALL, MEMORY_IMPORT, POLL_CALL, readOffsetMap, type OffsetMap } from '../wasm/instrument.js';
import { MEMORY_EXPORT, SYSCALL_IMPORT, WASM_PAGE, WasmImageError } from '../wasm/reader.js';
import type { GuestModule } from './engine.js';
import type { HostCall } from './host.js';
import type { Instance } from './instance.js';
import { WasmGuestMemory } from './memory.js';
import { HostCallError, MemoryFault, MemoryLimitExceeded } from './traps.js';

/**
 * A Wasm guest's own memory as host functions see it: addresses are Wasm addresses, valid below
 * the memory's current size (it may grow during a call).
 */
class ModuleMemory extends WasmGuestMemory {
  override offset(address: bigint | number, length: number): number {
    if (!Number.isSafeInteger(length) || length < 0) throw new RangeError(`bad length ${length}`);
    const size = this.memory.buffer.byteLength;
    if (typeof address === 'number' && address >= 0 && address + length <= size) return address;
    const a = BigInt.asUintN(64, BigInt(address));
    if (a >= BigInt(size)) throw new MemoryFault(a);
    if (a + BigInt(length) > BigInt(size)) throw new MemoryFault(BigInt(size));
    return Number(a);
  }
}

/** One `berm.syscall` as a HostCall: a0 = ptr, a1 = len, a2..a5 = 0. */
class WasmHostCall implements HostCall {
  number = 0n;
  ptr = 0;
  len = 0;
  data: unknown = undefined;
  constructor(readonly memory: ModuleMemory) {}
  get args(): readonly [bigint, bigint, bigint, bigint, bigint, bigint] {
    return [BigInt(this.ptr), BigInt(this.len), 0n, 0n, 0n, 0n];
  }
  /** {@inheritDoc HostCall.arg} */
  arg(i: number): number {
    if (!(i >= 0 && i < 6)) throw new RangeError(`argument index ${i}: must be 0..5 (a0..a5)`);
    return i === 0 ? this.ptr : i === 1 ? this.len : 0;
  }
}

const HEAP_START = fnv1a64('berm.heap.start');
const HEAP_SIZE = fnv1a64('berm.heap.size');

/** The offset maps of instrumented modules (read once per module). */
const maps = new WeakMap<WebAssembly.Module, OffsetMap | null>();

/** The offset map of an instrumented module (src/wasm/instrument.ts), or null. */
export function offsetMapOf(module: WebAssembly.Module): OffsetMap | null {
  let m = maps.get(module);
  if (m === undefined) {
    m = readOffsetMap(module);
    maps.set(module, m);
  }
  return m;
}

/** A Wasm instance bound to the Instance that owns it; used once. */
export class WasmSlot {
  readonly memory: ModuleMemory;
  readonly call: WasmHostCall;
  readonly wasm: WebAssembly.Instance;
  readonly compiled: WebAssembly.Module;
  readonly tier: GuestModule['info']['tier'];
  owner: Instance | null = null;

  /** @throws WasmImageError when V8 cannot instantiate the module (a data segment out of bounds) */
  constructor(readonly module: GuestModule) {
    const owner = () => this.owner!;
    const limit = module.engine.options.memorySize;
    let call: WasmHostCall | null = null;
    const syscall = (n: bigint, ptr: number, len: number): bigint => {
      const c = call!;
      const number = BigInt.asUintN(64, n);
      // the instrumentation's own calls: the fuel poll and a failed memory.grow
      if (number === POLL_CALL) return BigInt(owner().poll(ptr >>> 0));
      if (number === GROW_CALL) {
        const pages = ptr >>> 0;
        if (this.memory.memory.buffer.byteLength + pages * WASM_PAGE > limit)
          throw owner().at(new MemoryLimitExceeded(pages, limit), len >>> 0);
        return 0n;
      }
      if (number === HEAP_START || number === HEAP_SIZE) {
        const why = new Error('a WebAssembly program owns its memory; the host has no heap to hand it');
        throw new HostCallError(number, why);
      }
      c.number = number;
      c.ptr = ptr >>> 0;
      c.len = len >>> 0;
      return owner().syscall(c);
    };
    this.compiled = module.wasm;
    this.tier = module.info.tier;
    const mem = module.takeWasmMemory();
    try {
      this.wasm = new WebAssembly.Instance(module.wasm, {
        [SYSCALL_IMPORT.module]: { [SYSCALL_IMPORT.name]: syscall, [MEMORY_IMPORT.name]: mem },
      });
    } catch (e) {
      // a data or element segment outside its memory or table: the image's own fault, every time
      throw new WasmImageError(
        `the module cannot be instantiated: ${e instanceof Error ? e.message : String(e)}`,
      );
    }
    if (this.wasm.exports[MEMORY_EXPORT] !== mem)
      throw new Error('the instrumented module exports another memory');
    this.memory = new ModuleMemory(mem, 0, limit);
    call = this.call = new WasmHostCall(this.memory);
  }

  /** The tool or other exported function `symbol` as an entry taking and returning what an ELF's does. */
  entry(symbol: string): ((...a: bigint[]) => [bigint, bigint]) | undefined {
    const fn = this.wasm.exports[symbol];
    if (typeof fn !== 'function') return undefined;
    return () => {
      (fn as () => void)();
      return [0n, 0n];
    };
  }
}

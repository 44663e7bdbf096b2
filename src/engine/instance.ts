/**
 * Instances: a guest memory holding a pristine image and a Wasm instance bound to it, reused
 * through a per-module pool and reset by the dirty extents that translated stores track. The
 * imports of the Wasm instance (ecall, trap, poll, csr) are implemented here.
 */
import {
  ECALL_ARGS,
  Exports,
  IMPORT_MODULE,
  Imports,
  LazyAbi,
  memoryPages,
  SHARED_MEMORY,
  STACK_GUARD,
  TrapKind,
  type HostImports,
} from '../translate/abi.js';
import type { GuestModule } from './engine.js';
import type { HostCall, HostFunction } from './host.js';
import type { HostTable } from './linker.js';
import { WasmGuestMemory } from './memory.js';
import { offsetMapOf, WasmSlot } from './wasm-slot.js';
import { originalOffset } from '../wasm/instrument.js';
import { memoryZeroer } from './zero.js';
import { monotonicMs } from '../util/clock.js';
import {
  BadIndirectTarget,
  Breakpoint,
  FellOffFunction,
  HostCallError,
  IllegalInstruction,
  Interrupted,
  Unreachable,
  WasmTrap,
  MemoryFault,
  OutOfFuel,
  StackOverflow,
  stackOverflowAtEntry,
  Trap,
  UnknownHostCall,
  type GuestFrame,
} from './traps.js';

/** Per-instance options. */
export interface InstantiateOptions {
  /** value handed to host functions as HostCall.data */
  data?: unknown;
  /** instruction budget (Infinity by default) */
  fuel?: number;
  /** wall-clock deadline of each call, milliseconds from its start */
  timeoutMs?: number;
  /**
   * This instance's own interrupt flag: a SharedArrayBuffer of at least 4 bytes whose first Int32
   * any thread may set to non-zero (`raiseInterrupt(buffer)`) to stop the guest with Interrupted
   * at its next poll. The flag is read, not consumed, so every instance sharing it (a call chain)
   * stops. Default: the engine-wide InterruptHandle.
   */
  interrupt?: SharedArrayBuffer;
  /**
   * A fuel account shared with other instances (a call chain draws on one budget): slices are
   * taken from `left`, so what one instance burns is gone for the others. When given, `fuel` is
   * ignored and OutOfFuel reports `budget`.
   */
  fuelAccount?: { left: number; readonly budget: number };
}

/** Fuel is granted in slices so the interrupt flag and deadline are looked at often (~0.1 ms apart; a poll costs ~20 ns). */
const FUEL_SLICE = 1 << 14;

/** The internal signal thrown by the `trap` import and caught at the call boundary. */
function trapFromKind(kind: number, value: bigint, layout: GuestModule['layout']): Trap {
  switch (kind) {
    case TrapKind.MemoryFault:
      return new MemoryFault(BigInt.asUintN(64, value));
    case TrapKind.BadIndirectTarget:
      return new BadIndirectTarget(BigInt.asUintN(64, value));
    case TrapKind.Breakpoint:
      return new Breakpoint();
    case TrapKind.IllegalInstruction:
      return new IllegalInstruction(Number(BigInt.asUintN(32, value)));
    case TrapKind.StackOverflow:
      return stackOverflowAtEntry(value, layout.stackLimit, layout.base + layout.size);
    default:
      return new FellOffFunction();
  }
}

const U64 = (v: bigint | number): bigint => BigInt.asUintN(64, BigInt(v));

/** Argument i of `args` as the signed 64-bit value an i64 parameter takes (0n past the end). */
const reg = (args: (bigint | number)[], i: number): bigint =>
  i < args.length ? BigInt.asIntN(64, BigInt(args[i])) : 0n;

/** 2^53 - 1 as a bigint */
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
/** -(2^53 - 1) as a bigint */
const MIN_SAFE = -MAX_SAFE;

/** 2^32 */
const TWO32 = 4294967296;

/**
 * The HostCall handed to host functions; one per Slot, refilled by the `ecall` import for every
 * ecall. The import receives the number's three pieces; a0..a5 wait in the ecall argument area
 * (ECALL_ARGS, the page past the guest's memory, where the module's ecall helper stored them) and
 * are read from there only when asked for, through a DataView with explicit little-endian reads
 * (Wasm's byte order on any host).
 */
class LiveHostCall implements HostCall {
  n0 = 0;
  n1 = 0;
  n2 = 0;
  data: unknown = undefined;
  private cached: [bigint, bigint, bigint, bigint, bigint, bigint] | null = null;
  /** the ecall argument area: a0..a5 as little-endian 64-bit values */
  private readonly regs: DataView;
  constructor(
    readonly memory: WasmGuestMemory,
    area: number,
  ) {
    this.regs = new DataView(memory.memory.buffer, area, ECALL_ARGS.bytes);
  }
  get number(): bigint {
    return BigInt(this.n0) | (BigInt(this.n1) << 30n) | (BigInt(this.n2) << 60n);
  }
  /** {@inheritDoc HostCall.arg} */
  arg(i: number): number {
    if (!(i >= 0 && i < 6)) throw new RangeError(`argument index ${i}: must be 0..5 (a0..a5)`);
    const hi = this.regs.getUint32(8 * i + 4, true);
    if (hi >= 0x200000) return Infinity;
    return hi * TWO32 + this.regs.getUint32(8 * i, true);
  }
  /** {@inheritDoc HostCall.args} */
  get args(): readonly [bigint, bigint, bigint, bigint, bigint, bigint] {
    if (this.cached === null) {
      const u = (k: number) => this.regs.getBigUint64(8 * k, true);
      this.cached = [u(0), u(1), u(2), u(3), u(4), u(5)];
    }
    return this.cached;
  }
  /** register a0 (k = 0) or a1 (k = 1) as a signed Number when exact, else NaN */
  signed(k: number): number {
    const hi = this.regs.getInt32(8 * k + 4, true);
    if (hi >= 0x200000 || hi < -0x200000) return NaN;
    return hi * TWO32 + this.regs.getUint32(8 * k, true);
  }
  /** register a0 or a1 as a signed 64-bit bigint */
  signedBig(k: number): bigint {
    return this.regs.getBigInt64(8 * k, true);
  }
  /** forget the BigInts of the previous ecall */
  refilled(): void {
    this.cached = null;
  }
}

/** Whether this process already made a shared memory without ballast (see Slot.ballast). */
let unweighedShared = false;

/**
 * A memory and a Wasm instance bound to it, reused across Instances of one module. The imports
 * dispatch to whichever Instance currently owns the slot.
 */
export class Slot {
  /**
   * For a shared memory, except the process's first: an ArrayBuffer of the memory's size that
   * nothing reads or writes. V8 counts a shared memory as no external memory (the reason a
   * module's is shared, abi.ts SHARED_MEMORY), so slots dropped by a full pool, by the swap
   * to the optimised tier or with their module would never start a collection: a process churning
   * through baseline-tier instances that touch their memory kept every dropped memory's pages
   * resident (tens of GiB). The ballast is counted as the memory would be and dies with the slot,
   * so V8 collects dropped slots as it does unshared memories; untouched, it costs no resident
   * memory. Only the first shared memory goes without, so the cold path to a first call still
   * starts no collection, and at most one memory's pages are left to the JavaScript heap's own
   * collections.
   */
  private readonly ballast: ArrayBuffer | null;
  readonly memory: WasmGuestMemory;
  readonly wasm: WebAssembly.Instance;
  readonly a0: WebAssembly.Global;
  readonly a1: WebAssembly.Global;
  readonly call: LiveHostCall;
  readonly dirtyLo: WebAssembly.Global;
  readonly dirtyHi: WebAssembly.Global;
  /** the module `wasm` is an instance of (the module's tier when the slot was made) */
  readonly compiled: WebAssembly.Module;
  /** that module's tier */
  readonly tier: GuestModule['info']['tier'];
  /** the whole memory as bytes (made on the first image load) */
  private bytes: Uint8Array | null = null;
  /** zeroes [start, end) of the memory (memory.fill for a shared one: zero.ts) */
  private readonly zero: (start: number, end: number) => void;
  owner: Instance | null = null;
  /**
   * Bytes of the memory that have been touched (so stay resident: zeroing keeps a page), as the
   * dirty extents of every reset so far bound them, plus the ecall argument page; what keeping
   * the slot costs (slot-keeper.ts).
   */
  resident: number;

  constructor(readonly module: GuestModule) {
    const { layout } = module;
    const pages = memoryPages(layout.size);
    // the memory the module imports (shared, abi.ts SHARED_MEMORY)
    const shared = SHARED_MEMORY;
    const mem = new WebAssembly.Memory({ initial: pages, maximum: pages, shared });
    this.ballast = shared && unweighedShared ? new ArrayBuffer(pages * 65536) : null;
    if (shared) unweighedShared = true;
    this.zero = memoryZeroer(mem);
    this.memory = new WasmGuestMemory(
      mem,
      layout.base,
      layout.size,
      layout.stackLimit - STACK_GUARD - layout.base,
    );
    this.loadImage();
    this.resident = module.elf.imageEnd - layout.base + 65536;
    const owner = () => this.owner!;
    const epoch = process.hrtime.bigint();
    const call = (this.call = new LiveHostCall(this.memory, ECALL_ARGS.offset(layout.size)));
    const host = {
      [Imports.memory]: mem,
      [Imports.ecall]: (pc: number, n0: number, n1: number, n2: number) => {
        call.n0 = n0;
        call.n1 = n1;
        call.n2 = n2;
        call.refilled();
        return owner().ecall(pc, call);
      },
      // Every import takes four parameters (IMPORT_SIGNATURES) and each function here declares all
      // four, used or not: V8 then calls it through the wrapper it compiled with the module (one
      // whose parameter count differs from the function's would be compiled at instantiation).
      [Imports.trap]: (kind: number, pc: number, lo: number, hi: number) => {
        throw owner().at(trapFromKind(kind, (BigInt(hi) << 32n) | BigInt(lo >>> 0), layout), pc);
      },
      [Imports.poll]: (pc: number, _1: number, _2: number, _3: number) => owner().poll(pc),
      // cycle, time and instret all read one clock: time since this instance was made in whole
      // milliseconds (the module makes nanoseconds of them). A harness granted no clock learns
      // neither the host's uptime nor a fine timer to measure other work with
      // (docs/capabilities.md).
      [Imports.csr]: (_csr: number, _pc: number, _1: number, _2: number) =>
        Number((process.hrtime.bigint() - epoch) / 1_000_000n),
    } satisfies HostImports & Record<typeof Imports.memory, WebAssembly.Memory>;
    this.compiled = module.wasm;
    this.tier = module.info.tier;
    // the lazy tier's shell also imports `lazy(slot)`: translate (once per module) and link the
    // guest function of a table slot into this instance (src/engine/lazy.ts)
    const lazy = module.lazy !== null && module.lazy.shell === module.wasm ? module.lazy : null;
    const imports =
      lazy === null
        ? host
        : {
            ...host,
            [LazyAbi.lazyImport]: (slot: number, _1: number, _2: number, _3: number) => {
              lazy.install(slot, this.wasm.exports, mem);
              return 0;
            },
          };
    this.wasm = new WebAssembly.Instance(module.wasm, { [IMPORT_MODULE]: imports });
    this.a0 = this.wasm.exports[Exports.a0] as WebAssembly.Global;
    this.a1 = this.wasm.exports[Exports.a1] as WebAssembly.Global;
    this.dirtyLo = this.wasm.exports[Exports.dirtyLo] as WebAssembly.Global;
    this.dirtyHi = this.wasm.exports[Exports.dirtyHi] as WebAssembly.Global;
  }

  private loadImage(): void {
    // a view made once: the memory's size is fixed (initial = maximum), so its buffer never changes
    const u8 = (this.bytes ??= new Uint8Array(this.memory.memory.buffer));
    const { layout, elf: image } = this.module;
    for (const seg of image.segments) u8.set(seg.data, seg.vaddr - layout.base);
  }

  /**
   * Return the memory to its initial state: zero what guest stores and host writes touched
   * ([0, hi) and [lo, size), tracked exactly by the translated stores), then reload the image.
   */
  reset(): void {
    const { layout, elf: image } = this.module;
    const size = layout.size;
    const imageEnd = image.imageEnd - layout.base;
    const lo = Math.min(Number(this.dirtyLo.value), this.memory.dirtyLo);
    const hi = Math.max(Number(this.dirtyHi.value), this.memory.dirtyHi, imageEnd);
    // Never fill pages nobody touched: zeroing them would make the kernel back them with memory.
    this.zero(0, hi);
    if (lo < size) this.zero(Math.max(lo, hi), size);
    this.resident = Math.max(this.resident, hi + (lo < size ? size - Math.max(lo, hi) : 0) + 65536);
    this.loadImage();
    this.dirtyLo.value = size;
    this.dirtyHi.value = 0;
    this.memory.dirtyLo = size;
    this.memory.dirtyHi = 0;
  }
}

/**
 * One store: guest memory holding a fresh copy of the image, registers zero on every entry. Not
 * reentrant. Call `dispose()` when done: the memory is then reset and reused by a later Instance
 * of the same module (creating a 64 MiB memory costs ~120 µs and churns V8's heap).
 */
export class Instance {
  readonly memory: WasmGuestMemory;
  /**
   * The tier of the code this instance runs: its module's tier when the instance's memory was
   * made. An instance made before the optimised tier was swapped in runs the baseline tier to
   * its end.
   */
  readonly tier: GuestModule['info']['tier'];
  private slot: Slot | WasmSlot | null;
  private readonly hostFns: HostTable;
  private readonly fuel: { left: number; readonly budget: number };
  private readonly interruptFlag: Int32Array | null;
  private deadline = Infinity;
  private running = false;

  constructor(
    readonly module: GuestModule,
    hostFns: HostTable,
    private readonly opts: InstantiateOptions,
  ) {
    this.hostFns = hostFns;
    this.slot = module.takeSlot();
    this.slot.owner = this;
    this.slot.call.data = opts.data;
    this.memory = this.slot.memory;
    this.tier = this.slot.tier;
    this.fuel = opts.fuelAccount ?? { left: opts.fuel ?? Infinity, budget: opts.fuel ?? 0 };
    this.interruptFlag = opts.interrupt ? new Int32Array(opts.interrupt, 0, 1) : null;
  }

  /** Reset the memory and hand it back to the module's pool. The Instance is unusable afterwards. */
  dispose(): void {
    const slot = this.slot;
    if (slot === null || this.running) return;
    this.slot = null;
    slot.owner = null;
    slot.call.data = undefined;
    this.module.releaseSlot(slot);
  }

  /**
   * @internal the `ecall` import (after the Slot stored the registers in `call`): run the host
   * function and give the new a0 as an integer-valued Number, or NaN with a0 and a1 left in the
   * module's a0/a1 globals (Imports.ecall).
   */
  ecall(pc: number, call: LiveHostCall): number {
    const fn = this.hostFns.get(call.n0, call.n1, call.n2);
    if (fn === undefined) throw this.at(new UnknownHostCall(call.number), pc);
    let r;
    try {
      r = fn(call);
    } catch (e) {
      throw this.at(e instanceof Trap ? e : new HostCallError(call.number, e), pc);
    }
    // the common results here, the rest in result(): a small body that V8 inlines into the import
    // `r === 0n` only once r is known to be a bigint: compared with any other value it is V8's
    // generic StrictEqual builtin, a call on every ecall of a harness whose host functions return
    // both kinds (undefined and pointers compare by identity, inline)
    if (typeof r === 'number') {
      if (Number.isSafeInteger(r)) return r;
    } else if (r === undefined) {
      // a0 unchanged
      const a0 = call.signed(0);
      if (a0 === a0) return a0;
    } else if (typeof r === 'bigint' && r === 0n) {
      return 0;
    }
    return this.result(r, pc, call);
  }

  /** {@link ecall}'s result `r` when it is not a safe integer, 0n, or undefined with an exact a0. */
  private result(r: ReturnType<HostFunction>, pc: number, call: LiveHostCall): number {
    if (typeof r === 'bigint') {
      if (r <= MAX_SAFE && r >= MIN_SAFE) return Number(r);
      return this.slowResult(r, call.signedBig(1));
    } else if (r === undefined) {
      const a0 = call.signed(0);
      return a0 === a0 ? a0 : this.slowResult(call.signedBig(0), call.signedBig(1));
    } else if (
      typeof r === 'object' &&
      (typeof r[0] === 'bigint' || Number.isSafeInteger(r[0])) &&
      (typeof r[1] === 'bigint' || Number.isSafeInteger(r[1]))
    ) {
      return this.slowResult(BigInt(r[0]), BigInt(r[1]));
    }
    const why = new RangeError(`host function returned ${String(r)}: not a safe integer or a bigint`);
    throw this.at(new HostCallError(call.number, why), pc);
  }

  /** Results beyond a Number's exact range travel through the a0/a1 globals (the setter wraps modulo 2^64). */
  private slowResult(a0: bigint, a1: bigint): number {
    const slot = this.slot as Slot;
    slot.a0.value = a0;
    slot.a1.value = a1;
    return NaN;
  }

  /**
   * @internal a Wasm image's `berm.syscall` (after the WasmSlot filled `call`): run the host
   * function registered under the number and give the new a0 (a0 unchanged is the pointer).
   */
  syscall(call: HostCall & { readonly ptr: number }): bigint {
    const n = call.number;
    const fn = this.hostFns.get(Number(n & 0x3fffffffn), Number((n >> 30n) & 0x3fffffffn), Number(n >> 60n));
    if (fn === undefined) throw new UnknownHostCall(n);
    let r;
    try {
      r = fn(call);
    } catch (e) {
      throw e instanceof Trap ? e : new HostCallError(n, e);
    }
    if (typeof r === 'number' && Number.isSafeInteger(r)) return BigInt.asIntN(64, BigInt(r));
    if (typeof r === 'bigint') return BigInt.asIntN(64, r);
    if (r === undefined) return BigInt(call.ptr);
    if (
      typeof r === 'object' &&
      (typeof r[0] === 'bigint' || Number.isSafeInteger(r[0])) &&
      (typeof r[1] === 'bigint' || Number.isSafeInteger(r[1]))
    )
      return BigInt.asIntN(64, BigInt(r[0]));
    const why = new RangeError(`host function returned ${String(r)}: not a safe integer or a bigint`);
    throw new HostCallError(n, why);
  }

  /** @internal the `poll` import: interrupt flag, deadline, fuel budget */
  poll(pc: number): number {
    const own = this.interruptFlag;
    if (own ? Atomics.load(own, 0) !== 0 : this.module.engine.interruptHandle.take())
      throw this.at(new Interrupted(), pc);
    // no clock read without a deadline (process.hrtime: a call into C++ and an array per poll)
    if (this.deadline !== Infinity && monotonicMs() > this.deadline)
      throw this.at(new Interrupted('deadline passed'), pc);
    const fuel = this.fuel;
    if (fuel.left <= 0) throw this.at(new OutOfFuel(fuel.budget), pc);
    const grant = Math.min(FUEL_SLICE, fuel.left);
    fuel.left -= grant;
    return grant;
  }

  /** @internal Fill in pc, symbol and offset of a trap. */
  at(t: Trap, pc: number): Trap {
    if (t.pc >= 0) return t;
    t.pc = pc >>> 0;
    const f = this.module.functionAt(t.pc);
    if (f) {
      t.symbol = f.name;
      t.offset = t.pc - f.start;
    }
    return t;
  }

  /**
   * Guest frames named in a V8 stack trace: translated functions are named f_<hex address> and
   * entry stubs entry_<hex address>_<n>. Functions Binaryen inlined into their callers are absent.
   */
  private backtrace(stack: string | undefined): GuestFrame[] {
    if (this.slot instanceof WasmSlot) return this.wasmBacktrace(stack);
    const out: GuestFrame[] = [];
    for (const m of (stack ?? '').matchAll(/at (?:f|entry)_([0-9a-f]+)(?:_\d+)? \(wasm:/g)) {
      const address = parseInt(m[1], 16);
      const f = this.module.functionAt(address);
      out.push({ symbol: f?.name ?? `0x${m[1]}`, address });
      if (out.length >= 16) break;
    }
    return out;
  }

  /**
   * Guest frames of a Wasm image in a V8 stack trace (`wasm-function[N]:0xOFFSET`, the offset in
   * the instrumented module, mapped back to the original module's through its offset map).
   */
  private wasmBacktrace(stack: string | undefined): GuestFrame[] {
    const out: GuestFrame[] = [];
    const map = offsetMapOf(this.module.wasm);
    for (const m of (stack ?? '').matchAll(/wasm-function\[\d+\]:0x([0-9a-f]+)/g)) {
      const at = map === null ? -1 : originalOffset(map, parseInt(m[1], 16));
      const f = at < 0 ? null : this.module.functionAt(at);
      if (f === null) continue;
      out.push({ symbol: f.name, address: f.start, pc: at } as GuestFrame);
      if (out.length >= 16) break;
    }
    return out;
  }

  /**
   * Call an exported guest function with up to 8 integer arguments in a0..a7.
   * @returns [a0, a1] as unsigned 64-bit bigints.
   * @throws a Trap subclass when the guest traps; RangeError for unknown symbols or too many args.
   */
  call(symbol: string, ...args: (bigint | number)[]): [bigint, bigint] {
    if (args.length > 8) throw new RangeError(`at most 8 integer arguments (a0..a7), got ${args.length}`);
    if (this.slot === null) throw new Error('instance was disposed');
    const fn =
      this.slot instanceof WasmSlot
        ? this.slot.entry(symbol)
        : (this.slot.wasm.exports[Exports.entryPrefix + symbol] as
            ((...a: bigint[]) => [bigint, bigint]) | undefined);
    if (typeof fn !== 'function') throw new RangeError(`no exported guest function named ${symbol}`);
    if (this.running) throw new Error('instance is already running (host functions must not re-enter it)');
    // a tool call passes none: no array of zeros, no conversions
    const a = args.length === 0 ? null : [0, 1, 2, 3, 4, 5, 6, 7].map((i) => reg(args, i));
    this.deadline = this.opts.timeoutMs === undefined ? Infinity : monotonicMs() + this.opts.timeoutMs;
    // an interrupt aimed at an earlier run that had already finished must not hit this one
    if (this.interruptFlag === null) this.module.engine.interruptHandle.take();
    this.running = true;
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 24;
    try {
      const r =
        a === null ? fn(0n, 0n, 0n, 0n, 0n, 0n, 0n, 0n) : fn(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
      return [U64(r[0]), U64(r[1])];
    } catch (e) {
      throw this.asTrap(e);
    } finally {
      Error.stackTraceLimit = limit;
      this.running = false;
    }
  }

  /** Run the ELF entry point (`_start`). @throws RangeError for a Wasm image (it has none). */
  run(): [bigint, bigint] {
    if (this.slot instanceof WasmSlot) throw new RangeError('a WebAssembly image has no entry point to run');
    const f = this.module.functionAt(this.module.elf.entry);
    if (!f || f.start !== this.module.elf.entry)
      throw new RangeError('the entry point is not a function start');
    const name = f.names.find((n) => this.module.hasExport(n));
    if (name === undefined) throw new RangeError('the entry point is not exported');
    return this.call(name);
  }

  private asTrap(e: unknown): unknown {
    if (e instanceof WebAssembly.RuntimeError && this.slot instanceof WasmSlot) {
      const t = /unreachable/i.test(e.message) ? new Unreachable() : new WasmTrap(e.message);
      t.backtrace = this.backtrace(e.stack);
      const top = t.backtrace[0] as (GuestFrame & { pc?: number }) | undefined;
      if (top !== undefined) this.at(t, top.pc ?? top.address);
      return t;
    }
    if (e instanceof Trap) {
      if (e.backtrace.length === 0) e.backtrace = this.backtrace(e.stack);
      // a trap thrown by a Wasm image's host call: its site is the innermost guest frame
      const top = e.backtrace[0] as (GuestFrame & { pc?: number }) | undefined;
      if (e.pc < 0 && top?.pc !== undefined) this.at(e, top.pc);
      return e;
    }
    if (e instanceof RangeError && /call stack/i.test(e.message)) {
      const t = new StackOverflow('the host call stack ran out (recursion too deep)');
      t.backtrace = this.backtrace(e.stack);
      if (t.backtrace.length > 0) {
        t.pc = t.backtrace[0].address;
        t.symbol = t.backtrace[0].symbol;
      }
      return t;
    }
    return e;
  }
}

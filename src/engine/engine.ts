/**
 * The engine (issue 3 "Engine API"): compile an ELF to a module (translated or loaded from the
 * disk cache), register host functions in a linker, instantiate fresh stores, call guest functions.
 * Binaryen is imported only on a cache miss.
 */
import { readFileSync } from 'node:fs';
import { cacheKey, defaultCacheDir, WasmCache } from '../cache/cache.js';
import { readElf } from '../elf/reader.js';
import type { ElfImage, GuestFunction } from '../elf/types.js';
import { fnv1a64 } from '../util/fnv.js';
import {
  checkOptions,
  computeLayout,
  DEFAULT_TRANSLATE_OPTIONS,
  Exports,
  IMPORT_MODULE,
  Imports,
  STACK_GUARD,
  TRANSLATOR_VERSION,
  translatorDigest,
  TrapKind,
  type GuestLayout,
  type TranslateOptions,
} from '../translate/abi.js';
import type { HostCall, HostFunction } from './host.js';
import { WasmGuestMemory } from './memory.js';
import {
  BadIndirectTarget,
  Breakpoint,
  FellOffFunction,
  HostCallError,
  IllegalInstruction,
  Interrupted,
  MemoryFault,
  OutOfFuel,
  StackOverflow,
  Trap,
  UnknownHostCall,
  type GuestFrame,
} from './traps.js';

/** Engine configuration; every field is optional. */
export interface EngineConfig {
  /** guest memory bytes, a power of two from 64 KiB to 1 GiB (default 64 MiB) */
  memorySize?: number;
  /** stack bytes at the top of guest memory (default min(1 MiB, memorySize / 4)) */
  stackSize?: number;
  /** Binaryen optimisation level 0..3 (default 2) */
  optimizeLevel?: number;
  /** cache directory; null disables the disk cache (default: defaultCacheDir()) */
  cacheDir?: string | null;
  /** disposed instances whose memory is kept for reuse, per module (default 4; 0 disables reuse) */
  poolSize?: number;
}

/** How a module was obtained, with timings in milliseconds. */
export interface CompileInfo {
  cached: boolean;
  key: string;
  wasmBytes: number;
  /** total time of compile(), ms */
  totalMs: number;
  /** translation phases on a miss, ms */
  translate?: { build: number; optimize: number; emit: number };
  /** time to compile the Wasm binary to machine code with V8 (synchronous compile), ms */
  wasmCompileMs: number;
}

/**
 * A shared interrupt flag. `interrupt()` may be called from any thread that holds the buffer
 * (post `buffer` to a worker and call `raiseInterrupt(buffer)` there).
 */
export class InterruptHandle {
  readonly buffer = new SharedArrayBuffer(4);
  private readonly flag = new Int32Array(this.buffer);
  /** Request that running guests stop with Interrupted at their next check (within a fuel slice). */
  interrupt(): void {
    Atomics.store(this.flag, 0, 1);
  }
  /** @internal consume a pending request */
  take(): boolean {
    return Atomics.exchange(this.flag, 0, 0) !== 0;
  }
}

/** Raise an interrupt on the handle whose `buffer` this is; for use from another thread. */
export function raiseInterrupt(buffer: SharedArrayBuffer): void {
  Atomics.store(new Int32Array(buffer), 0, 1);
}

/** Owns configuration, the disk cache and the interrupt handle. */
export class Engine {
  readonly options: TranslateOptions;
  readonly cache: WasmCache | null;
  readonly interruptHandle = new InterruptHandle();
  readonly poolSize: number;

  /** @throws RangeError on an invalid memory size, stack size or optimisation level. */
  constructor(config: EngineConfig = {}) {
    const memorySize = config.memorySize ?? DEFAULT_TRANSLATE_OPTIONS.memorySize;
    this.options = {
      memorySize,
      stackSize: config.stackSize ?? Math.min(DEFAULT_TRANSLATE_OPTIONS.stackSize, memorySize / 4),
      optimizeLevel: config.optimizeLevel ?? DEFAULT_TRANSLATE_OPTIONS.optimizeLevel,
    };
    checkOptions(this.options);
    this.poolSize = config.poolSize ?? 4;
    const dir = config.cacheDir === undefined ? defaultCacheDir() : config.cacheDir;
    this.cache = dir === null ? null : new WasmCache(dir);
  }

  /** Cache key of an ELF under this engine's options. */
  keyFor(elf: Uint8Array): string {
    const o = this.options;
    return cacheKey([
      elf,
      `berm-translator-${TRANSLATOR_VERSION}-${translatorDigest()}`,
      `${o.memorySize}/${o.stackSize}/${o.optimizeLevel}`,
    ]);
  }

  /**
   * Compile an ELF (bytes or a file path) to a module, from the cache when possible.
   * @throws ElfError for malformed input (with the fix in its message); Error when the image does
   *   not fit the configured memory.
   */
  async compile(source: Uint8Array | string): Promise<GuestModule> {
    const t0 = performance.now();
    const bytes = typeof source === 'string' ? new Uint8Array(readFileSync(source)) : source;
    const image = readElf(bytes);
    const layout = computeLayout(image.imageStart, image.imageEnd, this.options);
    const key = this.keyFor(bytes);
    let wasm = this.cache?.get(key) ?? null;
    const cached = wasm !== null;
    let timings: CompileInfo['translate'];
    if (wasm === null) {
      const { translate } = await import('../translate/module.js');
      const t = translate(image, this.options);
      wasm = t.wasm;
      timings = t.timings;
      this.cache?.put(key, wasm);
    }
    const c0 = performance.now();
    let compiled: WebAssembly.Module;
    try {
      compiled = new WebAssembly.Module(wasm);
    } catch (e) {
      if (cached) {
        // a cache entry that V8 refuses is as good as corrupt: rebuild it
        this.cache?.clear();
        return this.compile(bytes);
      }
      throw e;
    }
    const c1 = performance.now();
    return new GuestModule(this, image, layout, compiled, {
      cached,
      key,
      wasmBytes: wasm.length,
      totalMs: c1 - t0,
      translate: timings,
      wasmCompileMs: c1 - c0,
    });
  }
}

/** A compiled guest image. Instantiate it through a Linker. */
export class GuestModule {
  private readonly exportNames: Set<string>;
  constructor(
    readonly engine: Engine,
    readonly image: ElfImage,
    readonly layout: GuestLayout,
    readonly wasm: WebAssembly.Module,
    readonly info: CompileInfo,
  ) {
    this.exportNames = new Set(
      WebAssembly.Module.exports(wasm)
        .filter((e) => e.name.startsWith(Exports.entryPrefix))
        .map((e) => e.name.slice(Exports.entryPrefix.length)),
    );
  }

  private readonly pool: Slot[] = [];

  /** @internal a reset slot from the pool, or a new one */
  takeSlot(): Slot {
    return this.pool.pop() ?? new Slot(this);
  }
  /** @internal reset a slot and keep it for reuse (up to the engine's pool size) */
  releaseSlot(slot: Slot): void {
    if (this.pool.length >= this.engine.poolSize) return;
    slot.reset();
    this.pool.push(slot);
  }

  /** Names callable with Instance.call: global function symbols and the ELF entry. */
  exports(): string[] {
    return [...this.exportNames];
  }
  hasExport(symbol: string): boolean {
    return this.exportNames.has(symbol);
  }

  /** The function containing `pc`, or null. */
  functionAt(pc: number): GuestFunction | null {
    const fns = this.image.functions;
    let lo = 0;
    let hi = fns.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const f = fns[mid];
      if (pc < f.start) hi = mid - 1;
      else if (pc >= f.start + f.size) lo = mid + 1;
      else return f;
    }
    return null;
  }
}

/** Per-instance options. */
export interface InstantiateOptions {
  /** value handed to host functions as HostCall.data */
  data?: unknown;
  /** instruction budget (Infinity by default) */
  fuel?: number;
  /** wall-clock deadline of each call, milliseconds from its start */
  timeoutMs?: number;
}

/** Fuel is granted in slices so the interrupt flag and deadline are looked at often (~0.1 ms apart; a poll costs ~20 ns). */
const FUEL_SLICE = 1 << 14;

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
class HostTable {
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

/** The HostCall handed to host functions; one per Instance, refilled for every ecall. */
class LiveHostCall implements HostCall {
  n0 = 0;
  n1 = 0;
  n2 = 0;
  raw: [bigint, bigint, bigint, bigint, bigint, bigint] = [0n, 0n, 0n, 0n, 0n, 0n];
  private cached: [bigint, bigint, bigint, bigint, bigint, bigint] | null = null;
  constructor(
    readonly memory: WasmGuestMemory,
    readonly data: unknown,
  ) {}
  get number(): bigint {
    return BigInt(this.n0) | (BigInt(this.n1) << 30n) | (BigInt(this.n2) << 60n);
  }
  /** Converted to unsigned on first use: most host functions read one or two arguments. */
  get args(): readonly [bigint, bigint, bigint, bigint, bigint, bigint] {
    if (this.cached === null) {
      const r = this.raw;
      this.cached = [U64(r[0]), U64(r[1]), U64(r[2]), U64(r[3]), U64(r[4]), U64(r[5])];
    }
    return this.cached;
  }
  refill(
    n0: number,
    n1: number,
    n2: number,
    a0: bigint,
    a1: bigint,
    a2: bigint,
    a3: bigint,
    a4: bigint,
    a5: bigint,
  ): void {
    this.n0 = n0;
    this.n1 = n1;
    this.n2 = n2;
    const r = this.raw;
    r[0] = a0;
    r[1] = a1;
    r[2] = a2;
    r[3] = a3;
    r[4] = a4;
    r[5] = a5;
    this.cached = null;
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

/** The internal signal thrown by the `trap` import and caught at the call boundary. */
function trapFromKind(kind: number, value: bigint): Trap {
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
      return new StackOverflow(`sp 0x${BigInt.asUintN(64, value).toString(16)} is below the stack limit`);
    default:
      return new FellOffFunction();
  }
}

const U64 = (v: bigint | number): bigint => BigInt.asUintN(64, BigInt(v));

/**
 * A memory and a Wasm instance bound to it, reused across Instances of one module. The imports
 * dispatch to whichever Instance currently owns the slot.
 */
class Slot {
  readonly memory: WasmGuestMemory;
  readonly wasm: WebAssembly.Instance;
  readonly a1: WebAssembly.Global;
  readonly dirtyLo: WebAssembly.Global;
  readonly dirtyHi: WebAssembly.Global;
  owner: Instance | null = null;

  constructor(readonly module: GuestModule) {
    const { layout } = module;
    const pages = layout.size / 65536;
    const mem = new WebAssembly.Memory({ initial: pages, maximum: pages });
    this.memory = new WasmGuestMemory(
      mem,
      layout.base,
      layout.size,
      layout.stackLimit - STACK_GUARD - layout.base,
    );
    this.loadImage();
    const owner = () => this.owner!;
    this.wasm = new WebAssembly.Instance(module.wasm, {
      [IMPORT_MODULE]: {
        [Imports.memory]: mem,
        [Imports.ecall]: (
          pc: number,
          n0: number,
          n1: number,
          n2: number,
          a0: bigint,
          a1: bigint,
          a2: bigint,
          a3: bigint,
          a4: bigint,
          a5: bigint,
        ) => owner().ecall(pc, n0, n1, n2, a0, a1, a2, a3, a4, a5),
        [Imports.trap]: (kind: number, pc: number, value: bigint) => {
          throw owner().at(trapFromKind(kind, value), pc);
        },
        [Imports.poll]: (pc: number) => owner().poll(pc),
        // cycle, time and instret all read a monotonic nanosecond clock (no exact count is kept)
        [Imports.csr]: () => process.hrtime.bigint(),
      },
    });
    this.a1 = this.wasm.exports[Exports.a1] as WebAssembly.Global;
    this.dirtyLo = this.wasm.exports[Exports.dirtyLo] as WebAssembly.Global;
    this.dirtyHi = this.wasm.exports[Exports.dirtyHi] as WebAssembly.Global;
  }

  private loadImage(): void {
    const u8 = new Uint8Array(this.memory.memory.buffer);
    const { layout, image } = this.module;
    for (const seg of image.segments) u8.set(seg.data, seg.vaddr - layout.base);
  }

  /**
   * Return the memory to its initial state: zero what guest stores and host writes touched
   * ([0, hi) and [lo, size), tracked exactly by the translated stores), then reload the image.
   */
  reset(): void {
    const { layout, image } = this.module;
    const size = layout.size;
    const imageEnd = image.imageEnd - layout.base;
    const lo = Math.min(Number(this.dirtyLo.value), this.memory.dirtyLo);
    const hi = Math.max(Number(this.dirtyHi.value), this.memory.dirtyHi, imageEnd);
    // Never fill pages nobody touched: zeroing them would make the kernel back them with memory.
    const u8 = new Uint8Array(this.memory.memory.buffer);
    u8.fill(0, 0, hi);
    if (lo < size) u8.fill(0, Math.max(lo, hi), size);
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
  private slot: Slot | null;
  private readonly hostFns: HostTable;
  private readonly hostCall: LiveHostCall;
  private fuelLeft: number;
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
    this.memory = this.slot.memory;
    this.hostCall = new LiveHostCall(this.memory, opts.data);
    this.fuelLeft = opts.fuel ?? Infinity;
  }

  /** Reset the memory and hand it back to the module's pool. The Instance is unusable afterwards. */
  dispose(): void {
    const slot = this.slot;
    if (slot === null || this.running) return;
    this.slot = null;
    slot.owner = null;
    this.module.releaseSlot(slot);
  }

  /** @internal the `ecall` import: the number arrives in three Smi-sized pieces */
  ecall(
    pc: number,
    n0: number,
    n1: number,
    n2: number,
    a0: bigint,
    a1: bigint,
    a2: bigint,
    a3: bigint,
    a4: bigint,
    a5: bigint,
  ): bigint | number {
    const fn = this.hostFns.get(n0, n1, n2);
    const call = this.hostCall;
    call.refill(n0, n1, n2, a0, a1, a2, a3, a4, a5);
    if (fn === undefined) throw this.at(new UnknownHostCall(call.number), pc);
    let r;
    try {
      r = fn(call);
    } catch (e) {
      throw this.at(e instanceof Trap ? e : new HostCallError(call.number, e), pc);
    }
    // JS-to-Wasm i64 conversion wraps modulo 2^64 (ToBigInt64), so unsigned results need no asIntN
    if (r === undefined) return a0;
    if (typeof r === 'bigint') return r;
    if (typeof r === 'number') return BigInt(r);
    this.slot!.a1.value = BigInt(r[1]);
    return BigInt(r[0]);
  }

  /** @internal the `poll` import: interrupt flag, deadline, fuel budget */
  poll(pc: number): number {
    if (this.module.engine.interruptHandle.take()) throw this.at(new Interrupted(), pc);
    if (performance.now() > this.deadline) throw this.at(new Interrupted('deadline passed'), pc);
    if (this.fuelLeft <= 0) throw this.at(new OutOfFuel(this.opts.fuel ?? 0), pc);
    const grant = Math.min(FUEL_SLICE, this.fuelLeft);
    this.fuelLeft -= grant;
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
   * Call an exported guest function with up to 8 integer arguments in a0..a7.
   * @returns [a0, a1] as unsigned 64-bit bigints.
   * @throws a Trap subclass when the guest traps; RangeError for unknown symbols or too many args.
   */
  call(symbol: string, ...args: (bigint | number)[]): [bigint, bigint] {
    if (args.length > 8) throw new RangeError(`at most 8 integer arguments (a0..a7), got ${args.length}`);
    if (this.slot === null) throw new Error('instance was disposed');
    const fn = this.slot.wasm.exports[Exports.entryPrefix + symbol] as
      ((...a: bigint[]) => [bigint, bigint]) | undefined;
    if (typeof fn !== 'function') throw new RangeError(`no exported guest function named ${symbol}`);
    if (this.running) throw new Error('instance is already running (host functions must not re-enter it)');
    const a = new Array<bigint>(8).fill(0n);
    args.forEach((v, i) => (a[i] = BigInt.asIntN(64, BigInt(v))));
    this.deadline = this.opts.timeoutMs === undefined ? Infinity : performance.now() + this.opts.timeoutMs;
    this.running = true;
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 24;
    try {
      const r = fn(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
      return [U64(r[0]), U64(r[1])];
    } catch (e) {
      throw this.asTrap(e);
    } finally {
      Error.stackTraceLimit = limit;
      this.running = false;
    }
  }

  /** Run the ELF entry point (`_start`). */
  run(): [bigint, bigint] {
    const f = this.module.functionAt(this.module.image.entry);
    if (!f || f.start !== this.module.image.entry)
      throw new RangeError('the entry point is not a function start');
    const name = f.names.find((n) => this.module.hasExport(n));
    if (name === undefined) throw new RangeError('the entry point is not exported');
    return this.call(name);
  }

  private asTrap(e: unknown): unknown {
    if (e instanceof Trap) {
      if (e.backtrace.length === 0) e.backtrace = this.backtrace(e.stack);
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

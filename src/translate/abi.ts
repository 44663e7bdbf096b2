/**
 * The contract between translated Wasm modules and the engine that instantiates them: import
 * names, trap kinds and the layout constants both sides compute. This file must not import Binaryen:
 * the engine loads it on the warm-cache path.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Bumped whenever generated code changes meaning; part of every cache key. */
export const TRANSLATOR_VERSION = 3;

/** Wasm import module name for everything the engine provides. */
export const IMPORT_MODULE = 'berm';

/** Import names (module IMPORT_MODULE). Signatures are given as Wasm types. */
export const Imports = {
  /**
   * the guest's linear memory: the guest's bytes (Wasm address = guest address - base), then one
   * page the guest cannot address, whose first 48 bytes are the ecall argument area
   * ({@link ECALL_ARGS}); {@link memoryPages} gives its size
   */
  memory: 'memory',
  /**
   * (pc: i32, n0: i32, n1: i32, n2: i32) -> f64, where the call number is
   * n0 | n1 << 30 | n2 << 60; a0..a5 are in the ecall argument area ({@link ECALL_ARGS}), stored
   * just before the call. The result is the new a0 as an integer-valued f64 (sign-extended to 64
   * bits; a1 unchanged), or NaN: then a0 and a1 are read from the a0 and a1 globals, which the
   * engine set
   */
  ecall: 'ecall',
  /**
   * (kind: i32, pc: i32, valueLo: i32, valueHi: i32) -> f64, never returns: throws the trap; the
   * value (a fault address, a bad target) is valueLo | valueHi << 32
   */
  trap: 'trap',
  /**
   * (pc: i32, 0, 0, 0) -> f64: called when fuel runs out; returns the next fuel slice (an integer)
   * or throws
   */
  poll: 'poll',
  /**
   * (csr: i32, pc: i32, 0, 0) -> f64: Zicsr counter reads (cycle, time, instret) in whole
   * milliseconds (an integer; the module multiplies it to nanoseconds)
   */
  csr: 'csr',
} as const;

/**
 * The ecall argument area: a0..a5 of the current ecall as six i64 (little-endian, as Wasm stores
 * them) at Wasm address `memorySize + 8 * k`, in the page past the guest's memory. Every guest
 * access is bounds-checked against the memory size, and the host's GuestMemory against the same
 * bounds, so neither guest nor host functions can reach it; the engine reads the arguments from
 * it only when a host function asks for them. Passing them as twelve i32 import parameters
 * instead cost more than the rest of a host call (V8's import wrapper and twelve field stores).
 */
export const ECALL_ARGS = {
  /** Wasm address of a0 for a memory of `memorySize` guest bytes (a<k> is 8 * k higher) */
  offset: (memorySize: number): number => memorySize,
  /** bytes: a0..a5 */
  bytes: 48,
} as const;

/** Wasm pages of a module's memory for `memorySize` guest bytes: those, and the page after them. */
export function memoryPages(memorySize: number): number {
  return memorySize / 65536 + 1;
}

/**
 * Whether a module imports a shared memory: yes, on both tiers. V8 counts an unshared
 * WebAssembly.Memory's whole size as external memory of the isolate
 * (`BackingStore::PerIsolateAccountingLength`; a shared one counts 0), with two costs for the
 * first 64 MiB guest memory of a process, which has nothing to collect:
 * - V8's soft limit for external memory is 64 MiB: the memory starts incremental marking and a full
 *   collection ("external memory pressure" in `node --trace-gc`), 5-15 ms in the middle of the
 *   cold path to a first call;
 * - while its JSArrayBuffer is young, the next backing store V8 allocates (the instance's own
 *   globals, in `new WebAssembly.Instance`) starts a scavenge first
 *   (`Heap::AllocateExternalBackingStore`, young backing stores over twice the semi-space size):
 *   measured on a warm `berm call` of echo-gcc-O2's optimised entry, instantiation took 2.0-6.4 ms
 *   with an unshared memory and 0.24-0.29 ms with the shared memory of its baseline entry.
 * Non-atomic loads and stores compile to the same code for a shared memory; the host sees a
 * SharedArrayBuffer only inside the engine (its reads copy, src/engine/memory.ts). V8 still
 * collects dropped memories in a long-lived process: every shared memory but a process's first
 * comes with a ballast ArrayBuffer of its size that V8 counts (src/engine/instance.ts, Slot).
 * Threads proposal 4.4 (limits flag 3); Binaryen needs its Atomics feature for it.
 */
export const SHARED_MEMORY = true;

/** A Wasm value type by name; `pair` is the (i64, i64) tuple guest functions return. */
export type ValType = 'i32' | 'i64' | 'f64' | 'pair';

/** A function signature as data: parameter types and one result type ('none' for no result). */
export interface Signature {
  readonly params: readonly ValType[];
  readonly result: ValType | 'none';
}

/** The function imports (every import but the memory). */
export type FunctionImport = Exclude<keyof typeof Imports, 'memory'>;

/**
 * The signature of each function import, as the module declares it and the engine must provide
 * it (the parameter meanings are on {@link Imports}).
 */
export const IMPORT_SIGNATURES = {
  // one signature for all four: V8 compiles a wasm-to-JS wrapper per distinct import signature
  // with TurboFan while it compiles the module (about 0.15 ms each after the first, on every warm
  // compile); the module's own helpers adapt trap, poll and csr to it (image.ts)
  // pc, the call number in three pieces (a0..a5 are in the ecall argument area)
  ecall: { params: ['i32', 'i32', 'i32', 'i32'], result: 'f64' },
  trap: { params: ['i32', 'i32', 'i32', 'i32'], result: 'f64' },
  poll: { params: ['i32', 'i32', 'i32', 'i32'], result: 'f64' },
  csr: { params: ['i32', 'i32', 'i32', 'i32'], result: 'f64' },
} as const satisfies Record<FunctionImport, Signature>;

/** The JavaScript value V8 passes for a Wasm value type (i64 as BigInt; 'none' returns nothing). */
type JsValue<V> = V extends 'i64' ? bigint : V extends 'none' ? void : number;
/** The JavaScript arguments of a parameter list, position by position. */
type JsParams<P extends readonly ValType[]> = { -readonly [I in keyof P]: JsValue<P[I]> };

/**
 * The host functions an engine provides, typed from {@link IMPORT_SIGNATURES}: an import object
 * written `satisfies HostImports` fails to compile when a signature changes and it does not.
 */
export type HostImports = {
  [K in FunctionImport]: (
    ...args: JsParams<(typeof IMPORT_SIGNATURES)[K]['params']>
  ) => JsValue<(typeof IMPORT_SIGNATURES)[K]['result']>;
};

/**
 * Names the lazy tier's modules link by (src/translate/lazy-image.ts): a function module imports
 * its shell's exports (globals, table) under `shellModule`; the shell calls the engine's `lazyImport`
 * `(slot: i32, 0, 0, 0) -> f64` (IMPORT_SIGNATURES' shape; the result is dropped) to have the guest
 * function of a table slot translated and put in the slot.
 */
export const LazyAbi = {
  shellModule: 'shell',
  lazyImport: 'lazy',
  /** prefix of the shell's exports of its globals, before the internal name */
  exportPrefix: '__berm_lazy$',
  /** the shell's export of its funcref table: a slot per guest function, then the helpers */
  tableExport: '__berm_lazy$table',
} as const;

/** Export names of the module's globals. */
export const Exports = {
  /** i64, mutable: a0 set by the engine when the ecall import returns NaN */
  a0: '__berm_a0',
  /** i64, mutable: a1 set by the engine when the ecall import returns NaN */
  a1: '__berm_a1',
  /** i32, mutable: instruction budget left in the current slice */
  fuel: '__berm_fuel',
  /** i32, mutable: lowest Wasm offset stored to at or above the dirty split (memory size if none) */
  dirtyLo: '__berm_dirty_lo',
  /** i32, mutable: end of the highest store below the dirty split (0 if none) */
  dirtyHi: '__berm_dirty_hi',
  /** prefix of the entry stubs: `__berm_entry$<symbol>(a0..a7) -> (a0, a1)` */
  entryPrefix: '__berm_entry$',
} as const;

/** Trap kinds passed to the `trap` import. */
export enum TrapKind {
  /** value: the faulting guest address */
  MemoryFault = 0,
  /** value: the target address */
  BadIndirectTarget = 1,
  Breakpoint = 2,
  /** value: the raw encoding */
  IllegalInstruction = 3,
  /** value: sp at function entry */
  StackOverflow = 4,
  /** value: the pc that execution fell through to (past the end of a function) */
  FellOffFunction = 5,
}

/** Options that change the generated code; every field is part of the cache key. */
export interface TranslateOptions {
  /** guest memory size in bytes, a power of two from 64 KiB to 1 GiB */
  memorySize: number;
  /** bytes reserved for the stack at the top of guest memory (power of two, < memorySize / 2) */
  stackSize: number;
  /** Binaryen optimisation level 0..3 */
  optimizeLevel: number;
}

/** Defaults: 64 MiB memory and 1 MiB stack, Binaryen -O2. */
export const DEFAULT_TRANSLATE_OPTIONS: TranslateOptions = {
  memorySize: 64 * 1024 * 1024,
  stackSize: 1024 * 1024,
  optimizeLevel: 2,
};

/** Where a guest image sits in its memory. All addresses are guest virtual addresses. */
export interface GuestLayout {
  /** lowest guest address backed by memory: the lowest PT_LOAD vaddr rounded down to 4 KiB */
  base: number;
  /** memory size in bytes (Wasm address = guest address - base) */
  size: number;
  /**
   * first heap byte: the end of the image rounded up to 4 KiB. A reset zeroes [0, dirty_hi) whole
   * (docs/engine.md), the gap between image and heap included, so the gap is kept under a page:
   * rounded up to 64 KiB, every call that touched the heap zeroed up to 64 KiB nobody wrote
   */
  heapStart: number;
  /** heap bytes, up to the guard below the stack */
  heapSize: number;
  /** lowest valid sp: the bottom of the stack region */
  stackLimit: number;
  /** sp on entry: base + size - 16 */
  initialSp: number;
}

/** Guard between heap and stack, bytes. */
export const STACK_GUARD = 64 * 1024;

/** The image does not fit the configured memory; the message names the smallest size that does. */
export class LayoutError extends Error {
  override name = 'LayoutError';
}

/**
 * Translation of an image failed: the emitter, Binaryen's validator or optimiser, or V8 refused
 * what was produced. The message names the guest function (`f_<hex address> (<symbols>)`) when
 * the failure could be pinned to one, and what failed. A bug of the translator, reported as bad
 * input of this image rather than a crash: the image cannot be run by this berm version.
 */
export class TranslateError extends Error {
  override name = 'TranslateError';
  /** the Wasm name of the guest function (`f_<hex>`) the failure was pinned to, or null */
  readonly functionName: string | null;
  constructor(message: string, functionName: string | null = null) {
    super(message);
    this.functionName = functionName;
  }
}

/**
 * Compute the guest layout: [image][heap][guard] ... [stack].
 * @throws LayoutError when the image does not fit the memory with its stack and guard.
 */
export function computeLayout(imageStart: number, imageEnd: number, opts: TranslateOptions): GuestLayout {
  const base = Math.floor(imageStart / 4096) * 4096;
  const size = opts.memorySize;
  const heapStart = Math.ceil(imageEnd / 4096) * 4096;
  const stackLimit = base + size - opts.stackSize;
  const heapEnd = stackLimit - STACK_GUARD;
  if (heapStart > heapEnd) throw doesNotFit(base, imageEnd, heapStart, opts);
  return { base, size, heapStart, heapSize: heapEnd - heapStart, stackLimit, initialSp: base + size - 16 };
}

/** The LayoutError of {@link computeLayout}, naming the smallest memory that fits. */
function doesNotFit(base: number, imageEnd: number, heapStart: number, opts: TranslateOptions): LayoutError {
  const size = opts.memorySize;
  let need = size;
  while (need < 1 << 30 && base + need - Math.min(opts.stackSize, need / 4) - STACK_GUARD < heapStart)
    need *= 2;
  return new LayoutError(
    `the image (0x${base.toString(16)}..0x${imageEnd.toString(16)}) does not fit a ${size >> 10} KiB memory ` +
      `with a ${opts.stackSize >> 10} KiB stack and a ${STACK_GUARD >> 10} KiB guard: use a memory of at least ${need >> 10} KiB`,
  );
}

/**
 * Validate translation options.
 * @throws RangeError naming the bad field.
 */
export function checkOptions(opts: TranslateOptions): void {
  const pow2 = (n: number) => Number.isInteger(n) && n > 0 && (n & (n - 1)) === 0;
  if (!pow2(opts.memorySize) || opts.memorySize < 65536 || opts.memorySize > 1 << 30) {
    throw new RangeError(`memorySize ${opts.memorySize}: must be a power of two from 64 KiB to 1 GiB`);
  }
  if (!pow2(opts.stackSize) || opts.stackSize < 4096 || opts.stackSize > opts.memorySize / 2) {
    throw new RangeError(`stackSize ${opts.stackSize}: must be a power of two from 4 KiB to half the memory`);
  }
  if (!Number.isInteger(opts.optimizeLevel) || opts.optimizeLevel < 0 || opts.optimizeLevel > 3) {
    throw new RangeError(`optimizeLevel ${opts.optimizeLevel}: must be 0..3`);
  }
}

let digest: string | null = null;

/**
 * The digest of the sources a build compiled: scripts/build.mjs rewrites this line of the
 * compiled abi.js with {@link sourceDigest} of src/translate, so a built berm never reads its
 * sources at run time. null when running from the TypeScript sources.
 */
const BUILT_DIGEST: string | null = null;

/**
 * A digest of the code that decides what a translation contains (this folder, the decoder, the
 * relocation-target rules), so a changed translator never reads a stale cache entry even when
 * TRANSLATOR_VERSION was not bumped: fixed by the build, or computed once per process from the
 * sources when running from them.
 */
export function translatorDigest(): string {
  digest ??= BUILT_DIGEST ?? sourceDigest(dirname(fileURLToPath(import.meta.url)));
  return digest;
}

/**
 * The version of the Binaryen package this module loads (the package.json of the first
 * node_modules/binaryen found from this file's folder upward, as Node resolves a package), or ''
 * when there is none: the optimising tier's output is Binaryen's as much as berm's. (Not through
 * node:module's createRequire: loading node:module costs a CLI start four of Node's modules.)
 */
export function binaryenVersion(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ;) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'node_modules', 'binaryen', 'package.json'), 'utf8')) as {
        version?: unknown;
      };
      return typeof pkg.version === 'string' ? pkg.version : '';
    } catch {
      // not here (or unreadable): the folder above
    }
    const up = dirname(dir);
    if (up === dir) return '';
    dir = up;
  }
}

/**
 * sha256 (first 16 hex digits) over TRANSLATOR_VERSION, the Binaryen version `binaryen`, and the
 * name and bytes of every .ts/.js file (not .d.ts) of `translateDir` and of its sibling folders
 * riscv/ and elf/, in name order, then of the sibling util/ folder's leb.ts/leb.js (the LEB128
 * encoder the byte writer's output is made of). A missing folder or file is skipped.
 * @param binaryen the Binaryen version to digest (default: the installed one, {@link binaryenVersion})
 */
export function sourceDigest(translateDir: string, binaryen: string = binaryenVersion()): string {
  const h = createHash('sha256');
  h.update(`v${TRANSLATOR_VERSION}`);
  h.update(`binaryen ${binaryen}\0`);
  const dirs = [translateDir, join(translateDir, '..', 'riscv'), join(translateDir, '..', 'elf')];
  for (const dir of dirs) {
    let names: string[] = [];
    try {
      names = readdirSync(dir)
        .filter((n) => /\.(ts|js)$/.test(n) && !n.endsWith('.d.ts'))
        .sort();
    } catch {
      continue;
    }
    for (const n of names) {
      h.update(n);
      h.update(readFileSync(join(dir, n)));
    }
  }
  for (const n of ['leb.js', 'leb.ts']) {
    let bytes: Buffer;
    try {
      bytes = readFileSync(join(translateDir, '..', 'util', n));
    } catch {
      continue;
    }
    h.update(`util/${n}`);
    h.update(bytes);
  }
  return h.digest('hex').slice(0, 16);
}

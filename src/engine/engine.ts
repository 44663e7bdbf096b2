/**
 * The engine (issue 3 "Engine API"): compile an ELF to a module (translated or loaded from the
 * disk cache). Binaryen is imported only on a cache miss. Linking and instances live in
 * linker.ts and instance.ts; this module re-exports them so callers need one import.
 */
import { readFileSync } from 'node:fs';
import { cacheKey, defaultCacheDir, WasmCache } from '../cache/cache.js';
import { readElf } from '../elf/reader.js';
import type { ElfImage, GuestFunction } from '../elf/types.js';
import {
  checkOptions,
  computeLayout,
  DEFAULT_TRANSLATE_OPTIONS,
  Exports,
  TRANSLATOR_VERSION,
  TranslateError,
  translatorDigest,
  type GuestLayout,
  type TranslateOptions,
} from '../translate/abi.js';
import { Slot } from './instance.js';

export { Instance, type InstantiateOptions } from './instance.js';
export { basicHostFunctions, Linker } from './linker.js';

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
      let t;
      try {
        t = translate(image, this.options);
      } catch (e) {
        if (e instanceof TranslateError) throw e;
        throw new TranslateError(`translation failed: ${e instanceof Error ? e.message : String(e)}`);
      }
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
        this.cache?.delete(key);
        return this.compile(bytes);
      }
      this.cache?.delete(key);
      throw refusedByV8(image, e);
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

/**
 * V8 refused a module we translated: a translator bug, reported as a TranslateError naming the
 * guest function from V8's message (`Compiling function #N:"f_<hex>" failed: ...`).
 */
function refusedByV8(image: ElfImage, e: unknown): TranslateError {
  const text = e instanceof Error ? e.message : String(e);
  const m = /"(f_([0-9a-f]+))"/.exec(text);
  let where = '';
  if (m) {
    const fn = image.functions.find((f) => f.start === parseInt(m[2], 16));
    where = ` in ${m[1]}${fn && fn.names.length > 0 ? ` (${fn.names.join(', ')})` : ''}`;
  }
  return new TranslateError(`V8 refused the translated module${where}: ${text}`, m ? m[1] : null);
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

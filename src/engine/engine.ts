/**
 * The engine: compile an ELF to a module (translated or loaded from the
 * disk cache). Binaryen is imported only on a cache miss. Linking and instances live in
 * linker.ts and instance.ts; this module re-exports them so callers need one import.
 */
import { hash } from 'node:crypto';
import { cacheKey, defaultCacheDir, WasmCache } from '../cache/cache.js';
import { readElf } from '../elf/reader.js';
import { restoreImage, summarizeImage } from '../elf/summary.js';
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
import { loadBaseline } from './baseline-script.js';
import {
  imageKind,
  isWasmImage,
  readWasmImage,
  WasmImageError,
  type GuestImage,
  type WasmImage,
} from './image.js';
import { Slot } from './instance.js';
import { WasmSlot } from './wasm-slot.js';
import { DEFAULT_KEEPER_LIMITS, SlotKeeper, type KeeperLimits } from './slot-keeper.js';
import { INSTRUMENT_VERSION, instrument, memoryLimits } from '../wasm/instrument.js';
import { WASM_PAGE } from '../wasm/reader.js';
import { BackgroundOptimizer } from './optimizer.js';
import { LazyCode } from './lazy.js';
import type { LazyShell } from '../translate/lazy-image.js';
import { appendSummary, findSummary } from './summary-section.js';
import {
  checkTieringBudget,
  compileWithTieringBudget,
  enableBranchHints,
  enableWasmInlining,
  restoreStackSizeFlag,
} from './v8-flags.js';
import { warmWrapperCompiler } from './warmup.js';
import { monotonicMs } from '../util/clock.js';
import { readRegularFile } from '../util/read-file.js';

// before any module is compiled: the optimising tier's branch hints and V8's Wasm inlining, and
// V8's default --stack-size value back for the code caches the build made (see v8-flags.ts)
restoreStackSizeFlag();
enableBranchHints();
enableWasmInlining();
// V8's wrapper compiler started on a background thread while the process goes on (warmup.ts)
warmWrapperCompiler();

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
  /**
   * Which translation `compile()` returns (default 'auto'):
   * - 'auto': the optimised tier when the cache has it; otherwise the baseline tier (written
   *   directly, no Binaryen, tens of milliseconds), while a worker thread optimises the image in
   *   the background, stores it in the cache and swaps it into the returned module for later
   *   instances (`GuestModule.optimized` settles then);
   * - 'optimized': the optimising tier only, translated in the foreground (`berm compile`, CI);
   * - 'baseline': the baseline tier only;
   * - 'lazy': the lazy tier only (see {@link EngineConfig.lazy}), whatever the cache holds and
   *   for every instance; no whole module is translated, cached or read.
   */
  tier?: Tier;
  /**
   * With tier 'auto': on a miss of both tiers, start on the lazy tier (default false; docs/engine.md):
   * each guest function translated when a call first reaches it, the whole baseline tier cached
   * and swapped in after the caller's turn. Off by default: a cold first call measured slower
   * (bench/README.md, "Lazy translation"). Modules posted to other threads must be whole.
   */
  lazy?: boolean;
  /**
   * With tier 'auto': start the background optimiser on a cache miss (default true). A process
   * that exits after one call (the CLI's call and exec) passes false: the worker would import
   * Binaryen and be cut off at exit on every run, never reaching the cache.
   */
  optimizeInBackground?: boolean;
  /**
   * V8's dynamic-tiering budget for the modules compile() makes (v8-flags.ts
   * compileWithTieringBudget): how much a function runs in Liftoff before V8 recompiles it with
   * TurboFan; default V8's own (1.8 M units). A process that exits after one call (the CLI's call
   * and exec) raises it: TurboFan work still in flight holds its exit. The background optimiser's
   * upgraded modules (tier 'auto'), which serve long-lived processes, keep V8's default.
   */
  wasmTieringBudget?: number;
  /**
   * Bounds of the instance slots kept between invocations over all modules (slot-keeper.ts;
   * default DEFAULT_KEEPER_LIMITS)
   */
  keep?: Partial<KeeperLimits>;
  /** a full collection, asked when idle slots were dropped (slot-keeper.ts); default none */
  reclaim?: () => void;
}

/** Translation tiers; see {@link EngineConfig.tier}. */
export type Tier = 'auto' | 'optimized' | 'baseline' | 'lazy';

/** How a module was obtained, with timings in milliseconds. */
export interface CompileInfo {
  /** the tier of the module compile() returned (lazy: a shell whose functions are translated on first reach) */
  tier: 'baseline' | 'optimized' | 'lazy';
  cached: boolean;
  key: string;
  wasmBytes: number;
  /** lowercase hex sha256 of the image's bytes (an ELF's or a Wasm module's) */
  elfSha256: string;
  /** the image's kind: a translated ELF or an instrumented Wasm module (absent: 'elf') */
  format?: 'elf' | 'wasm';
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
  /** the instance slots kept for reuse, over every module of this engine */
  readonly keeper: SlotKeeper<Slot | WebAssembly.Memory>;
  readonly tier: Tier;
  private readonly optimizeInBackground: boolean;
  private readonly lazy: boolean;
  private readonly wasmTieringBudget: number | undefined;
  private optimizer: BackgroundOptimizer | null = null;
  /** the parts of this engine's cache keys after the ELF's digest, by tier (see keyOf) */
  private readonly keyParts: Record<'baseline' | 'optimized', string[]>;
  /** background optimisations in flight, by optimised-tier cache key */
  private readonly inFlight = new Map<
    string,
    Promise<{ compiled: WebAssembly.Module; bytes: number } | null>
  >();

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
    this.keeper = new SlotKeeper({ ...DEFAULT_KEEPER_LIMITS, ...config.keep }, config.reclaim ?? null);
    this.tier = config.tier ?? 'auto';
    this.optimizeInBackground = config.optimizeInBackground ?? true;
    this.lazy = config.lazy ?? false;
    this.wasmTieringBudget = config.wasmTieringBudget;
    if (this.wasmTieringBudget !== undefined) checkTieringBudget(this.wasmTieringBudget);
    if (!['auto', 'optimized', 'baseline', 'lazy'].includes(this.tier)) {
      throw new RangeError(`tier ${String(this.tier)}: must be auto, optimized, baseline or lazy`);
    }
    const o = this.options;
    const translator = `berm-translator-${TRANSLATOR_VERSION}-${translatorDigest()}`;
    this.keyParts = {
      baseline: [translator, `${o.memorySize}/${o.stackSize}/baseline`],
      optimized: [translator, `${o.memorySize}/${o.stackSize}/optimized-O${o.optimizeLevel}`],
    };
    const dir = config.cacheDir === undefined ? defaultCacheDir() : config.cacheDir;
    this.cache = dir === null ? null : new WasmCache(dir);
  }

  /**
   * Cache key of an ELF under this engine's options, for one tier: the baseline tier's key names
   * no optimisation level, the optimised tier's names Binaryen's.
   */
  keyFor(elf: Uint8Array, tier: 'baseline' | 'optimized' = 'optimized'): string {
    return this.keyOf(this.inspect(elf).sha256, tier);
  }

  /** Parsed images by the bytes they came from (the same array is parsed and hashed once). */
  private readonly images = new WeakMap<Uint8Array, { sha256: string; image: GuestImage }>();
  /** sha256 (hex) by the ELF bytes it was computed from */
  private readonly digests = new WeakMap<Uint8Array, string>();

  /** The sha256 of an ELF's bytes, computed once per byte array. */
  private digestOf(elf: Uint8Array): string {
    let sha256 = this.digests.get(elf);
    if (sha256 === undefined) {
      sha256 = hash('sha256', elf, 'hex');
      this.digests.set(elf, sha256);
    }
    return sha256;
  }

  /**
   * The image of an ELF for compiling it: from `found`, the summary inside its cached module
   * (src/engine/summary-section.ts: no second cache read), else {@link inspect}.
   * @throws ElfError for malformed input (with the fix in its message).
   */
  private imageOf(elf: Uint8Array, found: { text: string } | null): ElfImage {
    const known = this.images.get(elf);
    if (known) return known.image as ElfImage;
    const image = found === null ? null : restoreImage(found.text, elf);
    if (image === null) return this.inspectElf(elf).image;
    this.images.set(elf, { sha256: this.digestOf(elf), image });
    return image;
  }

  /** `wasm` with the summary of `image` appended (what the cache keeps), or `wasm` when there is none. */
  private withSummary(elf: Uint8Array, image: ElfImage, wasm: Uint8Array): Uint8Array {
    const text = summarizeImage(image, elf);
    return text === null ? wasm : appendSummary(wasm, text);
  }

  /**
   * The parsed image of a harness of either kind (picked by its magic bytes, src/engine/image.ts)
   * and the sha256 of its bytes, each computed once per byte array. Do not modify `bytes`
   * afterwards: the result is remembered for that array.
   * @throws ElfError for a malformed ELF; WasmImageError for a Wasm module outside the harness ABI
   */
  inspect(bytes: Uint8Array): { sha256: string; image: GuestImage } {
    if (imageKind(bytes) !== 'wasm') return this.inspectElf(bytes);
    let known = this.images.get(bytes);
    if (known) return known;
    known = { sha256: this.digestOf(bytes), image: readWasmImage(bytes, this.options.memorySize) };
    this.images.set(bytes, known);
    return known;
  }

  /**
   * The parsed image of an ELF and the sha256 of its bytes, each computed once per byte array.
   * With a cache, the image's summary (src/elf/summary.ts) is kept beside the modules, keyed by
   * the digest, so a later process restores it instead of parsing the symbol and relocation
   * tables again. Do not modify `elf` afterwards: the result is remembered for that array.
   * @throws ElfError for malformed input (with the fix in its message).
   */
  private inspectElf(elf: Uint8Array): { sha256: string; image: ElfImage } {
    const seen = this.images.get(elf);
    if (seen) return seen as { sha256: string; image: ElfImage };
    const sha256 = this.digestOf(elf);
    const key = cacheKey([sha256, `berm-image-${TRANSLATOR_VERSION}-${translatorDigest()}`]);
    const kept = this.cache?.get(key, 'image') ?? null;
    let image = kept === null ? null : restoreImage(Buffer.from(kept).toString('utf8'), elf);
    if (image === null) {
      const parsed = (image = readElf(elf));
      // written after the caller's turn (WasmCache.putLater): a cold compile is on its way to a call
      this.cache?.putLater(
        key,
        () => {
          const text = summarizeImage(parsed, elf);
          return text === null ? null : Buffer.from(text);
        },
        'image',
      );
    }
    const known = { sha256, image };
    this.images.set(elf, known);
    return known;
  }

  /**
   * The cache key of the ELF whose digest is `elfDigest` for one tier: sha256 over the digest, the
   * translator's version and digest, and the memory, stack and tier (with Binaryen's level).
   */
  private keyOf(elfDigest: string, tier: 'baseline' | 'optimized'): string {
    return cacheKey([elfDigest, ...this.keyParts[tier]]);
  }

  /**
   * Compile an ELF (bytes or a file path) to a module, from the cache when possible, in the
   * engine's tier (see {@link EngineConfig.tier}).
   * @throws InputFileError (src/util/read-file.ts) when a path names no readable regular file of
   *   at most 1 GiB (a FIFO or device is refused at once, never read); ElfError for malformed
   *   input (with the fix in its message); LayoutError when the image
   *   does not fit the configured memory; TranslateError when translation fails or V8 refuses
   *   the result (naming the guest function where it can).
   */
  async compile(source: Uint8Array | string): Promise<GuestModule> {
    const t0 = monotonicMs();
    // only a regular file of at most 1 GiB, read through the descriptor it was opened as
    // (readFileSync waited for ever for a FIFO's writer and read /dev/zero until memory ran out)
    const bytes = typeof source === 'string' ? readRegularFile(source) : source;
    if (imageKind(bytes) === 'wasm') return this.compileWasm(bytes, t0);
    // the cached module first: it carries the image's summary (imageOf), so a warm compile reads
    // one cache entry; a malformed ELF throws in imageOf (it has no cached module)
    const optKey = this.keyOf(this.digestOf(bytes), 'optimized');
    if (this.tier === 'auto' || this.tier === 'optimized') {
      const hit = this.cache?.get(optKey) ?? null;
      const mod = hit === null ? null : this.fromCache(bytes, hit, optKey, 'optimized', t0);
      if (mod !== null) return mod;
    }
    return this.compileMiss(bytes, optKey, t0);
  }

  /**
   * The module for a cached translation `wasm`, or null when V8 refuses it (the entry is then
   * removed: as good as corrupt). The warm path, kept apart from translation: in a fresh process
   * V8 parses each function on its first call, so a warm compile runs no code it does not need.
   * @throws ElfError, LayoutError as {@link compile}.
   */
  private fromCache(
    bytes: Uint8Array,
    wasm: Uint8Array,
    key: string,
    tier: 'baseline' | 'optimized',
    t0: number,
  ): GuestModule | null {
    const found = findSummary(wasm);
    const image = this.imageOf(bytes, found);
    const layout = computeLayout(image.imageStart, image.imageEnd, this.options);
    const c0 = monotonicMs();
    let compiled: WebAssembly.Module;
    try {
      // without the summary section when it is the last one (as the engine appends it): V8 would
      // copy and hash it with the module's bytes, and keep it for the module's life
      compiled = compileWithTieringBudget(
        found !== null && found.moduleBytes < wasm.length ? wasm.subarray(0, found.moduleBytes) : wasm,
        this.wasmTieringBudget,
      );
    } catch {
      this.cache?.delete(key);
      return null;
    }
    const c1 = monotonicMs();
    return new GuestModule(this, image, layout, compiled, {
      tier,
      cached: true,
      key,
      wasmBytes: found?.moduleBytes ?? wasm.length,
      elfSha256: this.digestOf(bytes),
      totalMs: c1 - t0,
      wasmCompileMs: c1 - c0,
    });
  }

  /** {@link compile} without a usable optimised-tier entry in the cache. */
  private async compileMiss(bytes: Uint8Array, optKey: string, t0: number): Promise<GuestModule> {
    if (this.tier === 'optimized') {
      return this.translated(bytes, t0, optKey, 'optimized', async (image) => {
        const { translate } = await import('../translate/module.js');
        return translate(image, this.options);
      });
    }
    const baseKey = this.keyOf(this.digestOf(bytes), 'baseline');
    const baseHit = this.tier === 'lazy' ? null : (this.cache?.get(baseKey) ?? null);
    let mod = baseHit === null ? null : this.fromCache(bytes, baseHit, baseKey, 'baseline', t0);
    if (mod === null && (this.tier === 'lazy' || (this.tier === 'auto' && this.lazy))) {
      mod = await this.lazyModule(bytes, t0, baseKey);
    } else if (mod === null) {
      mod = await this.translated(bytes, t0, baseKey, 'baseline', async (image) => {
        const { translator } = await loadBaseline();
        return translator.translateBaseline(image, this.options);
      });
    }
    if (this.tier === 'auto' && this.optimizeInBackground) {
      mod.optimized = this.upgradeLater(mod, bytes, optKey);
    }
    return mod;
  }

  /** Translate the image `bytes` hold, compile the result with V8 and cache it. */
  private async translated(
    bytes: Uint8Array,
    t0: number,
    key: string,
    tier: 'baseline' | 'optimized',
    translate: (image: ElfImage) => Promise<{
      wasm: Uint8Array;
      timings: { build: number; optimize: number; emit: number };
    }>,
  ): Promise<GuestModule> {
    const image = this.imageOf(bytes, null);
    const layout = computeLayout(image.imageStart, image.imageEnd, this.options);
    let t;
    try {
      t = await translate(image);
    } catch (e) {
      throw asTranslateError(e);
    }
    const wasm = t.wasm;
    const c0 = monotonicMs();
    const compiled = this.compileOrRefuse(image, wasm, key);
    const c1 = monotonicMs();
    // written after the caller's turn (WasmCache.putLater): the caller is waiting to make a call
    this.cache?.putLater(key, () => this.withSummary(bytes, image, wasm));
    return new GuestModule(this, image, layout, compiled, {
      tier,
      cached: false,
      key,
      wasmBytes: wasm.length,
      elfSha256: this.digestOf(bytes),
      totalMs: c1 - t0,
      translate: t.timings,
      wasmCompileMs: c1 - c0,
    });
  }

  /**
   * The lazy tier's module of the ELF `bytes`: its shell compiled, its functions left for their
   * first reach (src/engine/lazy.ts). The whole baseline tier is translated after the caller's
   * turn (tier 'auto' only): cached under `key` (with a cache; WasmCache.putLater) and swapped in
   * for later instances once V8 compiled it, unless the optimised tier came first.
   * @throws TranslateError when the shell cannot be built or V8 refuses it
   */
  private async lazyModule(bytes: Uint8Array, t0: number, key: string): Promise<GuestModule> {
    const image = this.imageOf(bytes, null);
    const layout = computeLayout(image.imageStart, image.imageEnd, this.options);
    const { translator } = await loadBaseline();
    const lazy = new translator.LazyTranslator(image, layout, this.options);
    let shell: LazyShell;
    try {
      shell = lazy.shell();
    } catch (e) {
      throw asTranslateError(e);
    }
    const c0 = monotonicMs();
    const compiled = this.compileOrRefuse(image, shell.wasm);
    const c1 = monotonicMs();
    const mod = new GuestModule(this, image, layout, compiled, {
      tier: 'lazy',
      cached: false,
      key,
      wasmBytes: shell.wasm.length,
      elfSha256: this.digestOf(bytes),
      totalMs: c1 - t0,
      translate: shell.timings,
      wasmCompileMs: c1 - c0,
    });
    mod.lazy = new LazyCode(lazy, compiled);
    const whole = (): Uint8Array | null => {
      let wasm: Uint8Array;
      try {
        wasm = translator.translateBaseline(image, this.options).wasm;
      } catch {
        return null; // the lazy tier stays; its functions report their own failures
      }
      // compiled on a later turn: never started by a flush at exit (V8's threads would hold it)
      const swap = () =>
        WebAssembly.compile(wasm).then(
          (m) => {
            if (mod.info.tier === 'lazy') mod.upgrade(m, key, wasm.length, 'baseline');
          },
          () => {}, // V8 refused the whole module: the lazy tier stays
        );
      setImmediate(swap).unref();
      return this.withSummary(bytes, image, wasm);
    };
    // tier 'lazy' stays lazy: no whole module, in the cache or here
    if (this.tier === 'auto' && this.cache !== null) this.cache.putLater(key, whole);
    else if (this.tier === 'auto') setImmediate(whole).unref();
    return mod;
  }

  /**
   * `wasm` compiled.
   * @throws TranslateError when V8 refuses it (refusedByV8; the cache entry `key` is removed)
   */
  private compileOrRefuse(image: ElfImage, wasm: Uint8Array, key?: string): WebAssembly.Module {
    try {
      return compileWithTieringBudget(wasm, this.wasmTieringBudget);
    } catch (e) {
      if (key !== undefined) this.cache?.delete(key);
      throw refusedByV8(image, e);
    }
  }

  /**
   * Optimise in the background, cache the result and swap it into `mod` for later instances.
   * @returns a promise of true once swapped in, false when the optimising tier failed (the
   *   baseline module stays; the failure is not cached, so a later compile tries again).
   */
  private upgradeLater(mod: GuestModule, bytes: Uint8Array, key: string): PromiseLike<boolean> {
    let job = this.inFlight.get(key);
    if (!job) {
      const optimizer = (this.optimizer ??= new BackgroundOptimizer());
      // started on the next turn of the event loop: the worker thread's start (and its import
      // of Binaryen) then does not compete with the caller's instantiation and first call
      job = new Promise<void>((go) => setImmediate(go))
        .then(() =>
          // closed meanwhile: no new worker
          this.optimizer === optimizer
            ? optimizer.optimize(bytes, this.options)
            : Promise.reject(new Error('the engine was closed')),
        )
        .then(
          // cached only once V8 accepted it: a refused module cached would be read, refused and
          // deleted by every later warm compile before it translated the baseline tier again
          async ({ wasm }) => {
            const compiled = await WebAssembly.compile(wasm);
            this.cache?.put(key, this.withSummary(bytes, mod.elf, wasm));
            return { compiled, bytes: wasm.length };
          },
        )
        // the optimiser failed, the engine was closed, or V8 refused the module: no upgrade
        .catch(() => null)
        .finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, job);
    }
    const upgraded = job.then((done) => {
      if (done === null) return false;
      mod.upgrade(done.compiled, key, done.bytes, 'optimized');
      return true;
    });
    // waiting on it keeps the worker (and so the process) alive; nobody waiting does not
    const optimizer = this.optimizer!;
    return { then: (ok, err) => optimizer.hold(upgraded).then(ok, err) };
  }

  /** The layout a Wasm image is given: its own memory from 0, bounded by the configured size; no host heap. */
  private wasmLayout(): GuestLayout {
    const size = this.options.memorySize;
    return { base: 0, size, heapStart: 0, heapSize: 0, stackLimit: 0, initialSp: 0 };
  }

  /**
   * Compile a Wasm harness image: check it against the harness ABI (src/wasm/reader.ts), instrument
   * it for fuel, interrupts and the memory limit (src/wasm/instrument.ts) and compile the result;
   * the instrumented module is cached by the image's digest like a translated ELF.
   * @throws WasmImageError for a module V8 refuses or one outside the harness ABI
   */
  private compileWasm(bytes: Uint8Array, t0: number): GuestModule {
    const sha256 = this.digestOf(bytes);
    const key = cacheKey([
      sha256,
      `berm-wasm-instrument-${INSTRUMENT_VERSION}`,
      `${this.options.memorySize}`,
    ]);
    const hit = this.cache?.get(key) ?? null;
    if (hit !== null) {
      const image = this.inspect(bytes).image as WasmImage;
      const c0 = monotonicMs();
      try {
        const compiled = compileWithTieringBudget(hit, this.wasmTieringBudget);
        const c1 = monotonicMs();
        return new GuestModule(this, image, this.wasmLayout(), compiled, {
          tier: 'optimized',
          cached: true,
          key,
          wasmBytes: hit.length,
          elfSha256: sha256,
          format: 'wasm',
          totalMs: c1 - t0,
          wasmCompileMs: c1 - c0,
        });
      } catch {
        this.cache?.delete(key);
      }
    }
    // V8 validates the original first: a malformed module is refused with V8's own words
    if (!WebAssembly.validate(bytes)) {
      let why = 'V8 refused it';
      try {
        new WebAssembly.Module(bytes);
      } catch (e) {
        why = e instanceof Error ? e.message : String(e);
      }
      throw new WasmImageError(`not a valid WebAssembly module: ${why}`);
    }
    const image = this.inspect(bytes).image as WasmImage;
    const b0 = monotonicMs();
    const wasm = instrument(bytes, image.module, this.options.memorySize);
    const c0 = monotonicMs();
    let compiled: WebAssembly.Module;
    try {
      compiled = compileWithTieringBudget(wasm, this.wasmTieringBudget);
    } catch (e) {
      throw new WasmImageError(
        `V8 refused the instrumented module (a berm bug): ${e instanceof Error ? e.message : String(e)}`,
      );
    }
    const c1 = monotonicMs();
    this.cache?.putLater(key, () => wasm);
    return new GuestModule(this, image, this.wasmLayout(), compiled, {
      tier: 'optimized',
      cached: false,
      key,
      wasmBytes: wasm.length,
      elfSha256: sha256,
      format: 'wasm',
      totalMs: c1 - t0,
      translate: { build: c0 - b0, optimize: 0, emit: 0 },
      wasmCompileMs: c1 - c0,
    });
  }

  /**
   * The module of an image compiled elsewhere (another thread posted `wasm` and its `info`), for
   * either kind: the image is read (or restored) here, the layout computed as compile() would.
   * @throws ElfError, LayoutError, WasmImageError as {@link compile}; TypeError for the lazy tier's
   */
  moduleFor(bytes: Uint8Array, wasm: WebAssembly.Module, info: CompileInfo): GuestModule {
    // its functions are translated by the engine that compiled it
    if (info.tier === 'lazy') throw new TypeError('a lazy-tier module cannot move to another engine');
    const image = this.inspect(bytes).image;
    const layout = isWasmImage(image)
      ? this.wasmLayout()
      : computeLayout(image.imageStart, image.imageEnd, this.options);
    return new GuestModule(this, image, layout, wasm, info);
  }

  /** Stop the background optimiser (pending upgrades settle as false). */
  async close(): Promise<void> {
    await this.optimizer?.close();
    this.optimizer = null;
  }
}

/** `e` as a TranslateError (itself when it is one). */
function asTranslateError(e: unknown): TranslateError {
  if (e instanceof TranslateError) return e;
  return new TranslateError(`translation failed: ${e instanceof Error ? e.message : String(e)}`);
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

/** The largest Wasm image memory (bytes, at its initial size) kept for reuse: zeroing costs ~0.1 ms/MiB. */
const POOLED_WASM_MEMORY = 8 * 1024 * 1024;

/** A compiled guest image. Instantiate it through a Linker. */
export class GuestModule {
  private readonly exportNames: Set<string>;
  constructor(
    readonly engine: Engine,
    /** the image: an ELF's (translated) or a Wasm module's (instrumented) */
    readonly image: GuestImage,
    readonly layout: GuestLayout,
    public wasm: WebAssembly.Module,
    readonly info: CompileInfo,
  ) {
    this.exportNames = isWasmImage(image)
      ? new Set([...image.module.exportNames.values()].flat())
      : new Set(
          WebAssembly.Module.exports(wasm)
            .filter((e) => e.name.startsWith(Exports.entryPrefix))
            .map((e) => e.name.slice(Exports.entryPrefix.length)),
        );
  }

  /**
   * With the 'auto' tier: settles true once the optimised tier replaced the baseline module for
   * instances created from then on, false if optimisation failed. Resolved true for a module
   * compiled in its final tier. Awaiting it keeps the process alive until then.
   */
  optimized: PromiseLike<boolean> = Promise.resolve(true);

  /** With the lazy tier: the shell (`lazy.shell`) and its functions' modules, made on first reach */
  lazy: LazyCode | null = null;

  /** @internal a whole-image tier is ready: new instances use `wasm`; pooled ones are dropped */
  upgrade(wasm: WebAssembly.Module, key: string, wasmBytes: number, tier: 'baseline' | 'optimized'): void {
    this.wasm = wasm;
    this.engine.keeper.forget(this);
    this.info.tier = tier;
    this.info.key = key;
    this.info.wasmBytes = wasmBytes;
  }

  /** Whether this module runs a Wasm image (instrumented) rather than a translated ELF. */
  get isWasm(): boolean {
    return isWasmImage(this.image);
  }

  /** The ELF image of a translated module. @throws TypeError for a Wasm image */
  get elf(): ElfImage {
    if (isWasmImage(this.image)) throw new TypeError('a WebAssembly image has no ELF image');
    return this.image;
  }

  /**
   * @internal a reset slot from the pool, or a new one; for a Wasm image always a fresh instance
   * (its memory and globals are the module's own and are never reused)
   */
  takeSlot(): Slot | WasmSlot {
    if (isWasmImage(this.image)) return new WasmSlot(this);
    return (this.engine.keeper.take(this) as Slot | undefined) ?? new Slot(this);
  }

  /** Drop the instance slots kept for this module (it is no longer deployed). */
  release(): void {
    this.engine.keeper.forget(this);
  }

  /**
   * @internal a memory for a new instance of a Wasm image: of the limits its instrumented module
   * imports (src/wasm/instrument.ts memoryLimits), all zero, at its initial size; a pooled one
   * when there is one (making a memory is most of what a new instance costs in V8)
   */
  takeWasmMemory(): WebAssembly.Memory {
    // a Wasm image's module keeps memories only (its instances are never reused)
    const pooled = this.engine.keeper.take(this) as WebAssembly.Memory | undefined;
    if (pooled !== undefined) return pooled;
    const { initial, maximum } = memoryLimits(
      (this.image as WasmImage).module,
      this.engine.options.memorySize,
    );
    return new WebAssembly.Memory({ initial, maximum });
  }
  /**
   * @internal reset a slot and keep it for reuse (up to the engine's pool size). A slot of an
   * earlier tier (its instance was live when the optimised tier was swapped in) is dropped: kept,
   * it would be handed out again and again, and a caller making one instance at a time would run
   * the baseline tier forever.
   */
  releaseSlot(slot: Slot | WasmSlot): void {
    if (slot instanceof WasmSlot) {
      // its memory, when still at its initial size (a grown memory cannot shrink) and small
      // enough to zero quickly, is kept for the next instance
      const mem = slot.memory.memory;
      const { initial } = memoryLimits((this.image as WasmImage).module, this.engine.options.memorySize);
      const bytes = mem.buffer.byteLength;
      if (
        bytes === initial * WASM_PAGE &&
        bytes <= POOLED_WASM_MEMORY &&
        this.engine.keeper.count(this) < this.engine.poolSize
      ) {
        new Uint8Array(mem.buffer).fill(0);
        this.engine.keeper.keep(this, mem, bytes);
      }
      return;
    }
    if (slot.compiled !== this.wasm || this.engine.keeper.count(this) >= this.engine.poolSize) return;
    slot.reset();
    this.engine.keeper.keep(this, slot, slot.resident);
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

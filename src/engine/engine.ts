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
import { Slot } from './instance.js';
import { BackgroundOptimizer } from './optimizer.js';
import { appendSummary, findSummary } from './summary-section.js';
import { enableBranchHints, enableWasmInlining, restoreStackSizeFlag } from './v8-flags.js';
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
   * - 'baseline': the baseline tier only.
   */
  tier?: Tier;
  /**
   * With tier 'auto': start the background optimiser on a cache miss (default true). A process
   * that exits after one call (the CLI's call and exec) passes false: the worker would import
   * Binaryen and be cut off at exit on every run, never reaching the cache.
   */
  optimizeInBackground?: boolean;
}

/** Translation tiers; see {@link EngineConfig.tier}. */
export type Tier = 'auto' | 'optimized' | 'baseline';

/** How a module was obtained, with timings in milliseconds. */
export interface CompileInfo {
  /** the tier of the module compile() returned */
  tier: 'baseline' | 'optimized';
  cached: boolean;
  key: string;
  wasmBytes: number;
  /** lowercase hex sha256 of the ELF bytes */
  elfSha256: string;
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
  readonly tier: Tier;
  private readonly optimizeInBackground: boolean;
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
    this.tier = config.tier ?? 'auto';
    this.optimizeInBackground = config.optimizeInBackground ?? true;
    if (!['auto', 'optimized', 'baseline'].includes(this.tier)) {
      throw new RangeError(`tier ${String(this.tier)}: must be auto, optimized or baseline`);
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

  /** Parsed images by the ELF bytes they came from (the same array is parsed and hashed once). */
  private readonly images = new WeakMap<Uint8Array, { sha256: string; image: ElfImage }>();
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
    if (known) return known.image;
    const image = found === null ? null : restoreImage(found.text, elf);
    if (image === null) return this.inspect(elf).image;
    this.images.set(elf, { sha256: this.digestOf(elf), image });
    return image;
  }

  /** `wasm` with the summary of `image` appended (what the cache keeps), or `wasm` when there is none. */
  private withSummary(elf: Uint8Array, image: ElfImage, wasm: Uint8Array): Uint8Array {
    const text = summarizeImage(image, elf);
    return text === null ? wasm : appendSummary(wasm, text);
  }

  /**
   * The parsed image of an ELF and the sha256 of its bytes, each computed once per byte array.
   * With a cache, the image's summary (src/elf/summary.ts) is kept beside the modules, keyed by
   * the digest, so a later process restores it instead of parsing the symbol and relocation
   * tables again. Do not modify `elf` afterwards: the result is remembered for that array.
   * @throws ElfError for malformed input (with the fix in its message).
   */
  inspect(elf: Uint8Array): { sha256: string; image: ElfImage } {
    let known = this.images.get(elf);
    if (known) return known;
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
    known = { sha256, image };
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
    // the cached module first: it carries the image's summary (imageOf), so a warm compile reads
    // one cache entry; a malformed ELF throws in imageOf (it has no cached module)
    const optKey = this.keyOf(this.digestOf(bytes), 'optimized');
    if (this.tier !== 'baseline') {
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
      compiled = new WebAssembly.Module(
        found !== null && found.moduleBytes < wasm.length ? wasm.subarray(0, found.moduleBytes) : wasm,
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
    const baseHit = this.cache?.get(baseKey) ?? null;
    let mod = baseHit === null ? null : this.fromCache(bytes, baseHit, baseKey, 'baseline', t0);
    if (mod === null) {
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
      if (e instanceof TranslateError) throw e;
      throw new TranslateError(`translation failed: ${e instanceof Error ? e.message : String(e)}`);
    }
    const wasm = t.wasm;
    const c0 = monotonicMs();
    let compiled: WebAssembly.Module;
    try {
      compiled = new WebAssembly.Module(wasm);
    } catch (e) {
      this.cache?.delete(key);
      throw refusedByV8(image, e);
    }
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
            this.cache?.put(key, this.withSummary(bytes, mod.image, wasm));
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
      mod.upgrade(done.compiled, key, done.bytes);
      return true;
    });
    // waiting on it keeps the worker (and so the process) alive; nobody waiting does not
    const optimizer = this.optimizer!;
    return { then: (ok, err) => optimizer.hold(upgraded).then(ok, err) };
  }

  /** Stop the background optimiser (pending upgrades settle as false). */
  async close(): Promise<void> {
    await this.optimizer?.close();
    this.optimizer = null;
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
    public wasm: WebAssembly.Module,
    readonly info: CompileInfo,
  ) {
    this.exportNames = new Set(
      WebAssembly.Module.exports(wasm)
        .filter((e) => e.name.startsWith(Exports.entryPrefix))
        .map((e) => e.name.slice(Exports.entryPrefix.length)),
    );
  }

  private pool: Slot[] = [];

  /**
   * With the 'auto' tier: settles true once the optimised tier replaced the baseline module for
   * instances created from then on, false if optimisation failed. Resolved true for a module
   * compiled in its final tier. Awaiting it keeps the process alive until then.
   */
  optimized: PromiseLike<boolean> = Promise.resolve(true);

  /** @internal the optimised tier is ready: new instances use `wasm`; pooled ones are dropped */
  upgrade(wasm: WebAssembly.Module, key: string, wasmBytes: number): void {
    this.wasm = wasm;
    this.pool = [];
    this.info.tier = 'optimized';
    this.info.key = key;
    this.info.wasmBytes = wasmBytes;
  }

  /** @internal a reset slot from the pool, or a new one */
  takeSlot(): Slot {
    return this.pool.pop() ?? new Slot(this);
  }
  /**
   * @internal reset a slot and keep it for reuse (up to the engine's pool size). A slot of an
   * earlier tier (its instance was live when the optimised tier was swapped in) is dropped: kept,
   * it would be handed out again and again, and a caller making one instance at a time would run
   * the baseline tier forever.
   */
  releaseSlot(slot: Slot): void {
    if (slot.compiled !== this.wasm || this.pool.length >= this.engine.poolSize) return;
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

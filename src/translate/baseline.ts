/**
 * The baseline tier: the image written straight to Wasm bytes by ByteModule, with no Binaryen and
 * no optimisation, so a guest starts within tens of milliseconds; V8 compiles the module (Liftoff
 * first, TurboFan for hot code). The optimising tier (module.ts) replaces it later.
 */
import type { ElfImage } from '../elf/types.js';
import { checkOptions, computeLayout, type TranslateOptions } from './abi.js';
import { ByteModule } from './bytes.js';
import { buildImage, type Translation } from './image.js';

/** A baseline translation with, per Wasm function name, where each guest instruction's code begins. */
export interface ListedTranslation extends Translation {
  /**
   * `[pc, offset]` pairs in code order, the offset in bytes from the start of the function body's
   * instructions (after its local declarations); a pc may appear more than once (code emitted
   * twice) and an instruction that became no code shares its offset with the next.
   */
  pcOffsets: Map<string, [number, number][]>;
}

/**
 * Translate a parsed image to an unoptimised Wasm module. `opts.optimizeLevel` is ignored.
 * @throws RangeError for bad options; LayoutError when the image does not fit the memory layout;
 *   TranslateError naming the guest function whose translation failed.
 */
export function translateBaseline(image: ElfImage, opts: TranslateOptions): Translation;
/**
 * With `listing`: the same module (byte for byte), and where each guest instruction's code is
 * ({@link ListedTranslation}); recording it costs the normal path nothing.
 */
export function translateBaseline(image: ElfImage, opts: TranslateOptions, listing: true): ListedTranslation;
export function translateBaseline(image: ElfImage, opts: TranslateOptions, listing = false): Translation {
  checkOptions(opts);
  const layout = computeLayout(image.imageStart, image.imageEnd, opts);
  const t0 = performance.now();
  let code = 0;
  for (const f of image.functions) code += f.size;
  const m = new ByteModule(code);
  if (listing) m.recordPcs();
  const { indirectTargets } = buildImage(m, m.types, { kind: 'direct', bytes: m }, image, layout, opts);
  const t1 = performance.now();
  const wasm = m.emitBinary();
  const t2 = performance.now();
  const timings = { build: t1 - t0, optimize: 0, emit: t2 - t1 };
  if (listing) {
    const listed: ListedTranslation = {
      wasm,
      layout,
      indirectTargets,
      timings,
      pcOffsets: m.pcOffsets ?? new Map(),
    };
    return listed;
  }
  return { wasm, layout, indirectTargets, timings };
}

// the lazy tier's translator travels with the baseline tier's (src/engine/baseline-script.ts)
export { LazyTranslator, type LazyShell } from './lazy-image.js';

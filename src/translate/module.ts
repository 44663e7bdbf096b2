/**
 * The optimising tier: the image built into a Binaryen module (Relooper control flow), validated,
 * optimised and written. Imports Binaryen; the engine loads this file only when it needs the tier.
 */
import binaryen from 'binaryen';
import type { ElfImage } from '../elf/types.js';
import { checkOptions, computeLayout, TranslateError, type TranslateOptions } from './abi.js';
import type { Types } from './builder.js';
import { buildImage, describeFunction, errorText, type Translation } from './image.js';

export { readImage, type Translation } from './image.js';

/** Functions longer than this (in instructions) are not given to Binaryen's optimiser. */
export const MAX_OPTIMIZED_INSTRUCTIONS = 3000;

const FEATURES =
  binaryen.Features.MVP |
  binaryen.Features.MutableGlobals |
  binaryen.Features.SignExt |
  binaryen.Features.TailCall |
  binaryen.Features.Multivalue |
  binaryen.Features.BulkMemory |
  binaryen.Features.NontrappingFPToInt;

const TYPES: Types = {
  none: binaryen.none,
  i32: binaryen.i32,
  i64: binaryen.i64,
  f64: binaryen.f64,
  tuple: (ts) => binaryen.createType(ts),
};

/**
 * Translate a parsed image to an optimised Wasm module (Binaryen at `opts.optimizeLevel`).
 * @throws RangeError for bad options; LayoutError when the image does not fit the memory layout;
 *   TranslateError (naming the function where it can) when emission, validation or the optimiser fails.
 */
export function translate(image: ElfImage, opts: TranslateOptions): Translation {
  return translateWith(image, opts, false);
}

/** `perFunction`: optimise function by function (no whole-module passes such as inlining). */
function translateWith(image: ElfImage, opts: TranslateOptions, perFunction: boolean): Translation {
  checkOptions(opts);
  const layout = computeLayout(image.imageStart, image.imageEnd, opts);
  const t0 = performance.now();
  const m = new binaryen.Module();
  let disposed = false;
  try {
    m.setFeatures(FEATURES);
    const relooper = () => new binaryen.Relooper(m);
    const { indirectTargets, sizes } = buildImage(
      m,
      TYPES,
      { kind: 'relooper', relooper },
      image,
      layout,
      opts,
    );
    const huge = [...sizes].filter(([, n]) => n > MAX_OPTIMIZED_INSTRUCTIONS).map(([name]) => name);

    if (!m.validate()) {
      throw new TranslateError('the translated module failed Binaryen validation (see the report above)');
    }
    const t1 = performance.now();
    binaryen.setOptimizeLevel(opts.optimizeLevel);
    binaryen.setShrinkLevel(0);
    // names stay in the binary so trap backtraces can name guest functions
    binaryen.setDebugInfo(true);
    if (opts.optimizeLevel > 0 && huge.length === 0 && !perFunction) {
      try {
        m.optimize();
      } catch (e) {
        // pin the failure to a function: optimise a fresh translation function by function
        const why = errorText(e, binaryen);
        m.dispose();
        disposed = true;
        translateWith(image, opts, true);
        throw new TranslateError(`Binaryen's optimiser failed in a whole-module pass: ${why}`);
      }
    } else if (opts.optimizeLevel > 0) {
      // Binaryen's optimiser is superlinear in function size (10,000 instructions: ~11 s; 100,000:
      // ~11 min): with a huge function present, optimise the others one by one and leave it as is.
      const skip = new Set(huge);
      for (let i = 0; i < m.getNumFunctions(); i++) {
        const f = m.getFunctionByIndex(i);
        const info = binaryen.getFunctionInfo(f);
        if (info.module || skip.has(info.name)) continue;
        try {
          m.optimizeFunction(f);
        } catch (e) {
          const start = parseInt(info.name.slice(2), 16);
          const what = info.name.startsWith('f_') ? describeFunction(image, start) : info.name;
          throw new TranslateError(
            `Binaryen's optimiser failed on ${what}: ${errorText(e, binaryen)}`,
            info.name,
          );
        }
      }
    }
    const t2 = performance.now();
    const wasm = m.emitBinary();
    const t3 = performance.now();
    return { wasm, layout, indirectTargets, timings: { build: t1 - t0, optimize: t2 - t1, emit: t3 - t2 } };
  } finally {
    if (!disposed) m.dispose();
  }
}

/**
 * The optimising tier: the image built into a Binaryen module (Relooper control flow), validated,
 * optimised and written. Imports Binaryen; the engine loads this file only when it needs the tier.
 */
import binaryen from 'binaryen';
import type { ElfImage } from '../elf/types.js';
import { checkOptions, computeLayout, TranslateError, type TranslateOptions } from './abi.js';
import type { Types } from './builder.js';
import { Names } from './emit.js';
import { addBranchHints } from './hints.js';
import { buildImage, describeFunction, errorText, type Translation } from './image.js';

export { readImage, type Translation } from './image.js';

/**
 * Functions longer than this (in instructions) get {@link LINEAR_PASSES} instead of the full
 * pipeline: Binaryen's code-folding, merge-blocks and coalesce-locals grow faster than the
 * function (measured on one function of 150/300/600 loops and jump tables, 10/20/39 KB of text:
 * code-folding 5.9 s for 20 KB and 13.4 s for 39 KB on their own; the full -O2 pipeline went
 * from 3.4 s to 17 s).
 */
export const MAX_OPTIMIZED_INSTRUCTIONS = 2000;

/**
 * The passes a long function gets: each measured linear in function size (same functions), and
 * together they do most of -O2's work on translated code (constant folding of the bounds checks,
 * locals coalesced so V8 allocates fewer registers, dead code after traps removed). Not
 * simplify-locals: on a long block whose instructions form one dependency chain it sinks each
 * value into the next use, building one expression as deep as the chain, which took time
 * quadratic in the chain (simplify-locals-nostructure 4.7 s of 5.2 s for a 10,000-instruction
 * chain; 6.4 / 18.2 / 85.5 s for 10k / 20k / 40k) and overflowed the host stack when Binaryen wrote
 * the module. Without it the same functions take 0.4 / 0.6 / 1.2 s; rs_dense's long functions
 * compile in the same time and their Wasm is 1.2 % larger (V8's TurboFan builds SSA from the
 * locals itself).
 */
export const LINEAR_PASSES = [
  'dce',
  'remove-unused-names',
  'remove-unused-brs',
  'optimize-instructions',
  'pick-load-signs',
  'precompute',
  'vacuum',
  'reorder-locals',
  'local-cse',
  'vacuum',
  'remove-unused-brs',
  'vacuum',
];

/**
 * The whole-module passes run after every function was optimised on its own, instead of
 * Binaryen's -O2 module pipeline (`Module.optimize()`, which adds inlining, duplicate-function
 * elimination, directize, simplify-globals and more, each re-optimising what it changed).
 * Measured (process CPU time of `translate()`; bench/README.md, "Optimiser
 * configuration"): on rs_json-O2 the -O2 module pipeline took 24 s, one-caller inlining capped at
 * 20 nodes 16.6 s, function passes + these two 14.8 s, function passes alone 7.9 s; guest speed
 * geomean against native gcc -O2 (compute-gcc-O2, same runs) 3.25x for -O2 and for these passes,
 * 3.41-3.57x without dead-argument elimination (qsort 2.57x against 2.13x: the 9-register call
 * convention's unused parameters are what it removes). Inlining bought no measurable speed.
 */
export const MODULE_PASSES = ['dae-optimizing', 'remove-unused-module-elements'];

const FEATURES =
  binaryen.Features.MVP |
  binaryen.Features.Atomics |
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
  checkOptions(opts);
  const layout = computeLayout(image.imageStart, image.imageEnd, opts);
  const t0 = performance.now();
  const m = new binaryen.Module();
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
    // the dispatcher is a decision tree with one leaf (a compare and a tail call, about the size
    // of an instruction's code) per indirect target: long for images with thousands of them
    if (indirectTargets.length > MAX_OPTIMIZED_INSTRUCTIONS) huge.push(Names.dispatch);

    if (!m.validate()) {
      throw new TranslateError('the translated module failed Binaryen validation (see the report above)');
    }
    const t1 = performance.now();
    binaryen.setOptimizeLevel(opts.optimizeLevel);
    binaryen.setShrinkLevel(0);
    // names stay in the binary so trap backtraces can name guest functions
    binaryen.setDebugInfo(true);
    if (opts.optimizeLevel > 0) {
      // Function by function: Binaryen's -O2 function pipeline, or the linear passes for a long
      // function (the full pipeline is superlinear in function size). A failure names its function.
      const long = new Set(huge);
      for (let i = 0; i < m.getNumFunctions(); i++) {
        const f = m.getFunctionByIndex(i);
        const info = binaryen.getFunctionInfo(f);
        if (info.module) continue;
        try {
          if (long.has(info.name)) m.runPassesOnFunction(f, LINEAR_PASSES);
          else m.optimizeFunction(f);
        } catch (e) {
          const start = parseInt(info.name.slice(2), 16);
          const what = info.name.startsWith('f_') ? describeFunction(image, start) : info.name;
          throw new TranslateError(
            `Binaryen's optimiser failed on ${what}: ${errorText(e, binaryen)}`,
            info.name,
          );
        }
      }
      // then the chosen whole-module passes (see MODULE_PASSES; dead-argument elimination
      // re-optimises the functions it changes with the full pipeline, so not with long ones)
      const passes = huge.length === 0 ? MODULE_PASSES : MODULE_PASSES.filter((p) => p !== 'dae-optimizing');
      try {
        m.runPasses(passes);
      } catch (e) {
        throw new TranslateError(
          `Binaryen's optimiser failed in a whole-module pass: ${errorText(e, binaryen)}`,
        );
      }
    }
    const t2 = performance.now();
    // the fuel poll and trap arms marked unlikely (hints.ts; V8 reads them: engine/v8-flags.ts)
    const wasm = addBranchHints(m.emitBinary());
    const t3 = performance.now();
    return { wasm, layout, indirectTargets, timings: { build: t1 - t0, optimize: t2 - t1, emit: t3 - t2 } };
  } finally {
    m.dispose();
  }
}

/**
 * The optimising tier: the image built into a Binaryen module (Relooper control flow), validated,
 * optimised and written. Imports Binaryen; the engine loads this file only when it needs the tier.
 */
import binaryen from 'binaryen';
import type { ElfImage } from '../elf/types.js';
import {
  checkOptions,
  computeLayout,
  TranslateError,
  type GuestLayout,
  type TranslateOptions,
} from './abi.js';
import type { Types } from './builder.js';
import { Names } from './emit.js';
import { addBranchHints } from './hints.js';
import { buildImage, describeFunction, errorText, type Translation } from './image.js';

export { readImage, type Translation } from './image.js';

/**
 * Functions longer than this (in instructions) get {@link Pipeline.long} instead of
 * {@link Pipeline.functions}: Binaryen's code-folding, merge-blocks and coalesce-locals grow faster
 * than the function (measured on one function of 150/300/600 loops and jump tables, 10/20/39 KB of
 * text: code-folding 5.9 s for 20 KB and 13.4 s for 39 KB on their own; the full -O2 pipeline went
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
 * Binaryen's -O2 function pipeline (PassRunner::addDefaultFunctionOptimizationPasses at
 * optimize level 2, shrink level 0, multivalue enabled, no GC), written out: what
 * `Module.optimizeFunction` runs, pass for pass (bench/opt-passes.ts checks that both write the
 * same bytes).
 */
export const O2_FUNCTION_PASSES = [
  'dce',
  'remove-unused-names',
  'remove-unused-brs',
  'remove-unused-names',
  'optimize-instructions',
  'pick-load-signs',
  'precompute',
  'code-pushing',
  'tuple-optimization',
  'simplify-locals-nostructure',
  'vacuum',
  'reorder-locals',
  'remove-unused-brs',
  'coalesce-locals',
  'simplify-locals',
  'vacuum',
  'reorder-locals',
  'coalesce-locals',
  'reorder-locals',
  'vacuum',
  'merge-blocks',
  'remove-unused-brs',
  'remove-unused-names',
  'merge-blocks',
  'precompute',
  'optimize-instructions',
  'rse',
  'vacuum',
];

/**
 * What the optimising tier runs on a built module, in order: `before` on the whole module, then
 * each function on its own (`functions`, or `long` for a function over
 * {@link MAX_OPTIMIZED_INSTRUCTIONS} instructions and for a dispatcher over that many targets),
 * then `after` on the whole module. Names are Binaryen pass names. A whole-module pass whose name
 * ends in `-optimizing` re-optimises what it changed with Binaryen's full function pipeline, which
 * is superlinear in function size: it is left out when the module has a long function.
 */
export interface Pipeline {
  readonly before: readonly string[];
  readonly functions: readonly string[];
  readonly long: readonly string[];
  readonly after: readonly string[];
}

/**
 * The function passes {@link PIPELINE} keeps of {@link O2_FUNCTION_PASSES}, in -O2's order: the
 * control-flow and locals clean-up of the Relooper's output. Measured by bench/opt-passes.ts
 * (bench/README.md, "Optimiser passes by gain per millisecond"): without them coremark_mix runs
 * 1.3-1.4x slower (V8 does not undo the Relooper's block structure), and this exact sequence is
 * what it needs (dropping both simplify-locals-nostructure and merge-blocks, or the first
 * remove-unused-brs, loses it all); the passes dropped from -O2 (optimize-instructions,
 * precompute, pick-load-signs, coalesce-locals, reorder-locals, code-pushing, rse, dce,
 * tuple-optimization) bought no guest speed outside noise and cost 44-47 % of -O2's function time.
 */
export const STRUCTURE_PASSES = [
  'remove-unused-names',
  'remove-unused-brs',
  'remove-unused-names',
  'simplify-locals-nostructure',
  'vacuum',
  'remove-unused-brs',
  'simplify-locals',
  'vacuum',
  'merge-blocks',
  'remove-unused-brs',
  'remove-unused-names',
  'merge-blocks',
  'vacuum',
];

/**
 * The pipeline {@link translate} runs (bench/README.md, "Optimiser passes by gain per
 * millisecond"). Dead-argument elimination is what V8 cannot do itself: the call convention passes
 * nine registers, and removing the unused ones is most of what the module passes buy (qsort
 * 1.06x slower without). It runs first, on the module as built, without re-optimising what it
 * changed: `dae-optimizing` after the function passes ran Binaryen's whole -O2 function pipeline
 * again on every function it changed (half the optimise time of big-gcc-O2, 61 % of rs_json-O0's),
 * and the speed geomean stayed within noise without it (fib_rec alone 1.02-1.15x slower).
 * Whole-module -O2's inlining bought no measurable speed either.
 */
export const PIPELINE: Pipeline = {
  before: ['dae'],
  functions: STRUCTURE_PASSES,
  long: LINEAR_PASSES,
  after: ['remove-unused-module-elements'],
};

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

/** A guest image built into a Binaryen module, not yet optimised: `module.dispose()` it. */
export interface BuiltModule {
  module: binaryen.Module;
  layout: GuestLayout;
  indirectTargets: number[];
  /** the guest functions, by Wasm name, with their instruction counts */
  sizes: Map<string, number>;
  /** the functions that get {@link Pipeline.long} (over MAX_OPTIMIZED_INSTRUCTIONS) */
  long: Set<string>;
}

/**
 * Build a parsed image into a validated Binaryen module (Relooper control flow) and set
 * Binaryen's global options for optimising and writing it (`opts.optimizeLevel`, shrink level 0,
 * names kept so trap backtraces can name guest functions).
 * @throws RangeError for bad options; LayoutError when the image does not fit the memory layout;
 *   TranslateError (naming the function where it can) when emission or validation fails.
 */
export function buildModule(image: ElfImage, opts: TranslateOptions): BuiltModule {
  checkOptions(opts);
  const layout = computeLayout(image.imageStart, image.imageEnd, opts);
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
    const long = new Set([...sizes].filter(([, n]) => n > MAX_OPTIMIZED_INSTRUCTIONS).map(([name]) => name));
    // the dispatcher is a decision tree with one leaf (a compare and a tail call, about the size
    // of an instruction's code) per indirect target: long for images with thousands of them
    if (indirectTargets.length > MAX_OPTIMIZED_INSTRUCTIONS) long.add(Names.dispatch);
    if (!m.validate()) {
      throw new TranslateError('the translated module failed Binaryen validation (see the report above)');
    }
    binaryen.setOptimizeLevel(opts.optimizeLevel);
    binaryen.setShrinkLevel(0);
    binaryen.setDebugInfo(true);
    return { module: m, layout, indirectTargets, sizes, long };
  } catch (e) {
    m.dispose();
    throw e;
  }
}

/**
 * Translate a parsed image to an optimised Wasm module: {@link buildModule}, then `pipeline`
 * ({@link PIPELINE}; another one only to measure alternatives, as bench/opt-passes.ts does) unless
 * `opts.optimizeLevel` is 0, then the binary with branch hints.
 * @throws RangeError for bad options; LayoutError when the image does not fit the memory layout;
 *   TranslateError (naming the function where it can) when emission, validation or the optimiser fails.
 */
export function translate(
  image: ElfImage,
  opts: TranslateOptions,
  pipeline: Pipeline = PIPELINE,
): Translation {
  const t0 = performance.now();
  const { module: m, layout, indirectTargets, long } = buildModule(image, opts);
  try {
    const t1 = performance.now();
    if (opts.optimizeLevel > 0) optimize(m, image, pipeline, long);
    const t2 = performance.now();
    // the fuel poll and trap arms marked unlikely (hints.ts; V8 reads them: engine/v8-flags.ts)
    const wasm = addBranchHints(m.emitBinary());
    const t3 = performance.now();
    return { wasm, layout, indirectTargets, timings: { build: t1 - t0, optimize: t2 - t1, emit: t3 - t2 } };
  } finally {
    m.dispose();
  }
}

/** Run a whole-module pass list on `m`. @throws TranslateError when Binaryen fails. */
function runModulePasses(m: binaryen.Module, passes: readonly string[]): void {
  if (passes.length === 0) return;
  try {
    m.runPasses(passes);
  } catch (e) {
    throw new TranslateError(`Binaryen's optimiser failed in a whole-module pass: ${errorText(e, binaryen)}`);
  }
}

/**
 * Run `pipeline` on the built module `m`, whose functions named in `long` get the long-function
 * passes.
 * @throws TranslateError when a pass fails (naming the guest function for a function pass).
 */
function optimize(m: binaryen.Module, image: ElfImage, pipeline: Pipeline, long: Set<string>): void {
  // a pass re-optimising with the full pipeline (superlinear) only when no function is long
  const whole = (passes: readonly string[]) =>
    long.size === 0 ? passes : passes.filter((p) => !p.endsWith('-optimizing'));
  runModulePasses(m, whole(pipeline.before));
  // function by function, so a failure names its function
  for (let i = 0; i < m.getNumFunctions(); i++) {
    const f = m.getFunctionByIndex(i);
    const info = binaryen.getFunctionInfo(f);
    if (info.module) continue;
    const passes = long.has(info.name) ? pipeline.long : pipeline.functions;
    if (passes.length === 0) continue;
    try {
      m.runPassesOnFunction(f, passes);
    } catch (e) {
      const start = parseInt(info.name.slice(2), 16);
      const what = info.name.startsWith('f_') ? describeFunction(image, start) : info.name;
      throw new TranslateError(
        `Binaryen's optimiser failed on ${what}: ${errorText(e, binaryen)}`,
        info.name,
      );
    }
  }
  runModulePasses(m, whole(pipeline.after));
}

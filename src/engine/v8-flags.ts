/**
 * V8 options the engine's compiled modules rely on, set once per process before its first
 * WebAssembly compile; and the dynamic-tiering budget of one compile
 * ({@link compileWithTieringBudget}), which one-shot processes raise.
 *
 * Branch hints (WebAssembly branch hinting, a standard since 2024; V8 reads the
 * `metadata.code.branch_hint` section by default from V8 13.6 / Chrome 136, and before that behind
 * `--experimental-wasm-branch-hinting`, present from V8 9 on): the optimising tier marks the fuel
 * poll and trap arms unlikely (src/translate/hints.ts), and TurboFan then moves them to deferred
 * code, where the values live across their call are saved, instead of saving them at every
 * definition inside the loop. The flag changes nothing for a module without the section, and the
 * section changes no result: it only decides code placement and register allocation.
 * Set for V8 up to 12 only: a newer V8 either reads hints by default or may no longer know the
 * flag (V8 prints an error for an unknown one).
 *
 * Wasm-into-Wasm inlining (`--wasm-inlining`, off by default in V8 11): TurboFan inlines small
 * callees at direct call sites (`call`, `return_call`) when it tiers a function up. Translated
 * code calls a lot of small functions the guest compiler did not inline: a recursive function
 * into itself (fib_rec), the indirect-call dispatcher and a comparator behind it (qsort). It is a
 * compiler optimisation of the same Wasm semantics: results, traps, fuel charges and polls are
 * those of the module (the poll and trap imports are never inlined), and V8's stack check stays at
 * the entry of every real frame, so deep recursion still ends in a RangeError (StackOverflow).
 * Set for V8 11 only, the V8 of Node 20, where it was measured (bench/README.md); other versions
 * are left at their default. V8 11.3 still calls the flag experimental (`node --v8-options`:
 * "enable inlining of wasm functions into wasm functions (experimental)"; it is on by default only
 * from V8 12), so a process can refuse it: `--no-wasm-inlining` on node's command line (which the
 * engine would otherwise override, setting the flag after start-up) or BERM_WASM_INLINING=0 in
 * the environment (bin/launch.js follows the same rule).
 */
import { setFlagsFromString } from 'node:v8';

/**
 * V8's default for its --stack-size flag on this architecture, in KB: V8_DEFAULT_STACK_SIZE_KB in
 * V8's src/common/globals.h, 864 on arm, arm64 and ia32, 984 on the others.
 */
export const V8_DEFAULT_STACK_SIZE_KB = ['arm', 'arm64', 'ia32'].includes(process.arch) ? 864 : 984;

/**
 * Give V8's --stack-size flag its default value back when node started with another one
 * (`node --stack-size=4000`, as the launchers, the tests and the embedding guide run it), keeping
 * the larger stack: V8 sets a thread's stack limit from the flag once, at isolate start, but folds
 * every flag off its default into the hash it checks before taking a code cache. The code caches
 * the build makes (the baseline translator's script, src/engine/cached-script.ts; the CLI bundle)
 * are made under the default value (bin/launch.js restores it first thing, with the same reasons
 * at length), so a process that kept --stack-size=4000 would have them refused. Idempotent.
 * @returns whether the flag was set now
 */
export function restoreStackSizeFlag(execArgv: readonly string[] = process.execArgv): boolean {
  if (!execArgv.some((a) => /^--stack[-_]size=/.test(a))) return false;
  setFlagsFromString(`--stack-size=${V8_DEFAULT_STACK_SIZE_KB}`);
  return true;
}

let set = false;
let inlining = false;

/**
 * Turn on V8's reading of branch hints in this process (idempotent; see the module comment for
 * which V8 versions).
 * @returns whether the flag was set now or before.
 */
export function enableBranchHints(v8Version = process.versions.v8): boolean {
  const major = Number(/^(\d+)\./.exec(v8Version)?.[1] ?? NaN);
  if (!(major >= 9 && major <= 12)) return false;
  if (!set) {
    setFlagsFromString('--experimental-wasm-branch-hinting');
    set = true;
  }
  return true;
}

/**
 * Whether this process refuses Wasm inlining (see the module comment): `execArgv` (node's own
 * options) holds `--no-wasm-inlining` or `--no-wasm_inlining`, or `env.BERM_WASM_INLINING` is "0".
 */
export function wasmInliningRefused(
  execArgv: readonly string[] = process.execArgv,
  env: NodeJS.ProcessEnv = process.env,
): boolean {
  return env.BERM_WASM_INLINING === '0' || execArgv.some((a) => /^--no-wasm[-_]inlining$/.test(a));
}

/**
 * Turn on V8's Wasm-into-Wasm inlining in this process (idempotent; see the module comment for
 * which V8 versions and why it keeps every guarantee), unless the process refuses it
 * ({@link wasmInliningRefused}).
 * @returns whether the flag was set now or before.
 */
export function enableWasmInlining(
  v8Version = process.versions.v8,
  refused = wasmInliningRefused(),
): boolean {
  const major = Number(/^(\d+)\./.exec(v8Version)?.[1] ?? NaN);
  if (major !== 11 || refused) return false;
  if (!inlining) {
    setFlagsFromString('--wasm-inlining');
    inlining = true;
  }
  return true;
}

/**
 * V8's default for its --wasm-tiering-budget flag in V8 11 (`node --v8-options`: "budget for
 * dynamic tiering (rough approximation of bytes executed)", default 1800000).
 */
export const V8_WASM_TIERING_BUDGET_DEFAULT = 1_800_000;

/**
 * Whether this process chose its own dynamic-tiering budget: `execArgv` (node's own options) holds
 * `--wasm-tiering-budget=N` or `--wasm_tiering_budget=N`. Such a process keeps it: the engine's
 * budget ({@link compileWithTieringBudget}) would otherwise replace it, and setting the flag back
 * afterwards would leave V8's default in its place.
 */
export function wasmTieringBudgetChosen(execArgv: readonly string[] = process.execArgv): boolean {
  return execArgv.some((a) => /^--wasm[-_]tiering[-_]budget(=|$)/.test(a));
}

/**
 * Compile `bytes` to a module whose functions V8 recompiles with TurboFan only after each has
 * spent `budget` (V8's --wasm-tiering-budget units, "a rough approximation of bytes executed")
 * in its first tier, Liftoff.
 *
 * Why: V8 compiles a module's functions with Liftoff when first called and, under dynamic tiering,
 * recompiles a function with TurboFan on a background thread once it has run through its budget
 * (by default 1.8 M units: well under a millisecond of a hot loop). A process that exits right
 * after its one call waits for those compilations at exit: Node's exit shuts V8's platform down,
 * which joins its worker threads, and a running compile job finishes its queue first. A warm
 * `berm call` of text-clang-O0 wrote its answer at ~60 ms and exited ~100 ms later, waiting for
 * TurboFan on the one function (15 KB of Wasm) that had gone through its budget. A higher budget
 * lets a short call finish in Liftoff while a long one still tiers up its hot functions.
 *
 * V8 11 (Node 20) reads the flag when it creates the module (each function's budget starts from
 * it) and when a function's budget runs out: the flag is set for this synchronous compile only
 * and put back to V8's default at once, so other modules, later compiles and V8's other readers
 * see the default. V8 shares one compiled module between compiles of the same bytes in a process:
 * a module compiled before, under another budget, keeps the budgets it was made with. Only on
 * V8 11, where this was measured (bench/README.md), and only when the process did not choose a
 * budget itself ({@link wasmTieringBudgetChosen}); otherwise, and with `budget` undefined, a plain
 * `new WebAssembly.Module(bytes)`.
 * @param budget a positive integer of at most 2^31 - 1 (V8 keeps budgets as 32-bit integers)
 * @throws RangeError for another budget; WebAssembly.CompileError as `new WebAssembly.Module`
 */
export function compileWithTieringBudget(
  bytes: Uint8Array,
  budget: number | undefined,
  v8Version = process.versions.v8,
  chosen = wasmTieringBudgetChosen(),
): WebAssembly.Module {
  if (budget === undefined) return new WebAssembly.Module(bytes);
  checkTieringBudget(budget);
  const major = Number(/^(\d+)\./.exec(v8Version)?.[1] ?? NaN);
  if (major !== 11 || chosen) return new WebAssembly.Module(bytes);
  setFlagsFromString(`--wasm-tiering-budget=${budget}`);
  try {
    return new WebAssembly.Module(bytes);
  } finally {
    setFlagsFromString(`--wasm-tiering-budget=${V8_WASM_TIERING_BUDGET_DEFAULT}`);
  }
}

/**
 * Check a dynamic-tiering budget ({@link compileWithTieringBudget}).
 * @throws RangeError unless `budget` is an integer from 1 to 2^31 - 1
 */
export function checkTieringBudget(budget: number): void {
  if (!Number.isInteger(budget) || budget < 1 || budget > 0x7fff_ffff)
    throw new RangeError(`Wasm tiering budget ${budget}: must be an integer from 1 to 2147483647`);
}

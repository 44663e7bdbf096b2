/**
 * V8 options the engine's compiled modules rely on, set once per process before its first
 * WebAssembly compile.
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
 */
import { setFlagsFromString } from 'node:v8';

let set = false;

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

let lazy = false;

/**
 * Turn on V8's lazy validation of Wasm function bodies in this process (idempotent): a module's
 * function bodies are then validated when each is first compiled, on its first call, rather than
 * all before `new WebAssembly.Module` returns. Why: a warm compile is mostly V8's compile of the
 * cached module, and most of that is validating ~90 KB of code the first call mostly does not
 * run (text-clang-O0's 107 KB module in fresh processes, Node 20, load 5: median 1.16 against
 * 1.74 ms). What keeps it safe: the engine caches a module only after V8 validated it whole
 * ({@link compileFresh}, or `WebAssembly.validate` before a background upgrade is cached), the cache
 * key names the V8 version, and each entry's sha256 header rules out later damage. A body that
 * still failed (a cache entry forged with a matching header) throws WebAssembly.CompileError from
 * the call that first reaches it. The flag stays on for the process's lifetime: V8 11 aborts the
 * process (a failed CHECK in CompileLazy) when a lazily validated body fails while the flag is off.
 * Other code in the process that compiles Wasm sees the same deferral; `WebAssembly.validate`
 * still validates whole.
 * Applied on V8 11 (Node 20), where the flag and the behaviour above were checked; elsewhere a no-op.
 * @returns whether lazy validation is on.
 */
export function enableLazyValidation(v8Version = process.versions.v8): boolean {
  if (!v8Version.startsWith('11.')) return false;
  if (!lazy) {
    setFlagsFromString('--wasm-lazy-validation');
    lazy = true;
  }
  return true;
}

/**
 * Compile a module just translated, validated whole whatever {@link enableLazyValidation} set.
 * @throws WebAssembly.CompileError with V8's own message (which names the failing function) when
 *   V8 refuses the module.
 */
export function compileFresh(wasm: Uint8Array): WebAssembly.Module {
  if (!lazy || WebAssembly.validate(wasm)) return new WebAssembly.Module(wasm);
  // refused: compile once more, eagerly, for V8's message (the flag is off only for this compile),
  // with an empty custom section appended (id 0, size 1, a name of length 0; no effect on the
  // module): other bytes, so V8's native module cache cannot answer with a module of the same
  // bytes compiled lazily before
  const other = new Uint8Array(wasm.length + 3);
  other.set(wasm);
  other.set([0, 1, 0], wasm.length);
  setFlagsFromString('--no-wasm-lazy-validation');
  try {
    new WebAssembly.Module(other);
  } finally {
    setFlagsFromString('--wasm-lazy-validation');
  }
  throw new WebAssembly.CompileError('WebAssembly.validate refused the module');
}

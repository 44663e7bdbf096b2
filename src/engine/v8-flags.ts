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

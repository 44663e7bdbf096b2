/**
 * A monotonic clock in milliseconds, for timings and deadlines.
 *
 * `performance.now()` has the same meaning, but the first use of the `performance` global makes
 * Node load `node:perf_hooks` and its dozen internal modules, and under a non-default V8 flag (the
 * CLI sets the engine's Wasm flags before its bundle runs, bin/launch.js) V8 refuses Node's
 * embedded code cache for every built-in module loaded afterwards, so each one is parsed and
 * compiled from source: ~3 ms of a CLI tool call's start for a clock. `process.hrtime` is part of
 * Node's bootstrap.
 */

/**
 * Milliseconds since an arbitrary fixed origin (the `process.hrtime` epoch); only differences
 * mean anything. Monotonic: unaffected by changes of the wall clock.
 */
export function monotonicMs(): number {
  const t = process.hrtime();
  return t[0] * 1e3 + t[1] / 1e6;
}

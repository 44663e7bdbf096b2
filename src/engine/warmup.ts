/**
 * Start V8's Wasm wrapper compiler on a background thread when the engine loads, so that the first
 * guest module a process compiles does not pay for the compiler's first use on the main thread.
 *
 * Why: V8 (11.3, Node 20) compiles, while it compiles a module, a wasm-to-JS wrapper for each
 * distinct function-import signature and a JS-to-wasm wrapper for each export signature its
 * generic wrapper does not cover (the entry stubs' two i64 results), both with TurboFan. The first
 * TurboFan compile in a process costs ~0.5 ms more than later ones (measured on the cached
 * optimised module of text-clang-O0, `new WebAssembly.Module` in fresh processes, n=40: min 1.31 /
 * q1 2.30 ms alone, min 0.88 / q1 1.05 ms right after a small unrelated module with a function
 * import had been compiled, which itself took min 0.59 / q1 0.86 ms). Every guest
 * module has such imports and exports, so every process that compiles one pays this once; here it
 * is paid on a V8 worker thread (`WebAssembly.compile` runs off the main thread) while the
 * process goes on loading its other modules and reading its inputs, instead of inside the
 * caller's compile.
 *
 * What it costs: one compile of the ~70-byte module below per process that loads the engine
 * (about 0.6 ms of CPU on another thread), and nothing on the main thread but starting it. Its
 * result is dropped; a failure (a V8 that refuses the module) is ignored: it only loses the
 * head start.
 */

/**
 * A module with one function import and one export of the signatures guest modules have
 * (src/translate/abi.ts IMPORT_SIGNATURES: `(i32, i32, i32, i32) -> f64`; the entry stubs:
 * `(i64 x 8) -> (i64, i64)`), written out in the binary format (core spec 5.5: type, import,
 * function, export and code sections). The export's body returns two zeros.
 */
const WARMUP_MODULE = Uint8Array.from([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
  // type section: [0] (i32 x 4) -> f64, [1] (i64 x 8) -> (i64, i64)
  0x01, 0x16, 0x02, 0x60, 0x04, 0x7f, 0x7f, 0x7f, 0x7f, 0x01, 0x7c, 0x60, 0x08, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e,
  0x7e, 0x7e, 0x7e, 0x02, 0x7e, 0x7e,
  // import section: "berm" "h", function of type 0
  0x02, 0x0a, 0x01, 0x04, 0x62, 0x65, 0x72, 0x6d, 0x01, 0x68, 0x00, 0x00,
  // function section: one function of type 1
  0x03, 0x02, 0x01, 0x01,
  // export section: "e" = function 1 (the import is function 0)
  0x07, 0x05, 0x01, 0x01, 0x65, 0x00, 0x01,
  // code section: no locals; i64.const 0, i64.const 0, end
  0x0a, 0x08, 0x01, 0x06, 0x00, 0x42, 0x00, 0x42, 0x00, 0x0b,
]);

let started = false;

/**
 * Start the background compile once per process (later calls do nothing).
 * @returns false when it had been started already, or when this process has no WebAssembly
 */
export function warmWrapperCompiler(): boolean {
  if (started) return false;
  started = true;
  // `node --jitless` has no WebAssembly global: loading the engine must not throw for that; the
  // launchers refuse such a process with a clear message, and a library user gets V8's own error
  // at the first compile
  if (typeof WebAssembly !== 'object') return false;
  WebAssembly.compile(WARMUP_MODULE).catch(() => undefined);
  return true;
}

/** @internal the module's bytes, for the test that V8 accepts them */
export const warmupModuleBytes = (): Uint8Array => WARMUP_MODULE.slice();

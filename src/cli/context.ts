/**
 * What every subcommand shares: exit codes, the I/O streams, global options and their parsing,
 * engine construction, and the mapping of errors to exit codes and messages.
 */
import { statSync, type Stats } from 'node:fs';
import * as path from 'node:path';
import { createRequire } from 'node:module';
import { demangle } from '../util/demangle.js';
import { InputFileError, readRegularFile } from '../util/read-file.js';
import { InvalidArgumentError } from './commander.js';
import { stderr, stdout } from './output.js';
import { defaultCacheDir } from '../cache/cache.js';
import { Engine, type CompileInfo, type Tier } from '../engine/engine.js';
import { Trap } from '../engine/traps.js';
import { ElfError } from '../elf/reader.js';
import { WasmImageError } from '../engine/image.js';
import { HarnessError } from '../harness/harness.js';
import { LayoutError, TranslateError } from '../translate/abi.js';
import { ManifestError } from '../harness/manifest.js';

/** Exit codes of every berm command (also in `berm --help` and README.md). */
export const ExitCode = {
  /** success */
  Ok: 0,
  /**
   * the tool failed through berm.fail, or its result was over 4 MiB or not UTF-8, or it returned
   * without a result; the message is on stdout
   */
  ToolFailed: 1,
  /** bad input or usage: malformed ELF or manifest, unknown tool or symbol, bad arguments */
  BadInput: 2,
  /** the guest trapped (MemoryFault, Interrupted, OutOfFuel, ...) */
  Trap: 3,
  /** an internal error of berm */
  Internal: 4,
} as const;

/** One of the {@link ExitCode} values. */
export type ExitCodeValue = (typeof ExitCode)[keyof typeof ExitCode];

/** Text of the exit-code table for `berm --help`. */
export const EXIT_CODES_HELP = `Exit codes:
  0  ok
  1  the tool failed through berm.fail, or its result was over the 4 MiB limit or not
     valid UTF-8, or it returned without a result (the message is on stdout)
  2  bad input or usage (malformed ELF, unknown tool or symbol, arguments not JSON or not
     matching the tool's schema, bad option values); a refusal by a registry or bermd, or
     one that cannot be reached
  3  the guest trapped (trap name, pc, symbol and backtrace on stderr)
  4  internal error (client verbs: an error of bermd other than a trap)`;

/** An expected failure with its exit code; printed without a stack trace. */
export class CliError extends Error {
  override name = 'CliError';
  constructor(
    message: string,
    readonly exitCode: ExitCodeValue = ExitCode.BadInput,
  ) {
    super(message);
  }
}

/** Where a command writes and reads; the process streams by default (tests may substitute). */
export interface Io {
  /** write to stdout */
  out(text: string): void;
  /** write to stderr */
  err(text: string): void;
  /** read all of stdin as UTF-8 (processIo: at most STDIN_LIMIT_BYTES, else CliError) */
  readStdin(): Promise<string>;
  /**
   * read all of stdin as raw bytes, undecoded (`call --no-validate -`: the tool sees exactly the
   * bytes, invalid UTF-8 included); same limit. Absent: callers encode readStdin's text.
   */
  readStdinBytes?(): Promise<Uint8Array>;
  /** true when stderr is a terminal (progress bars) */
  stderrIsTTY: boolean;
  /**
   * true when stdin is a terminal (`berm run` then sends no arguments instead of waiting for
   * typed ones); absent counts as false
   */
  stdinIsTTY?: boolean;
  /** the stream progress bars draw on */
  progressStream: NodeJS.WritableStream;
}

/**
 * Most bytes `readStdin` reads (16 MiB): above every argument limit (a call's arguments are at
 * most 1 MiB, bermd's request body 2 MiB by default), so a larger input is refused without being
 * held in memory.
 */
export const STDIN_LIMIT_BYTES = 16 << 20;

/**
 * The process's own standard output and error, written synchronously to fds 1 and 2
 * (src/cli/output.ts), and stdin. `readStdin` throws CliError (exit 2) after
 * {@link STDIN_LIMIT_BYTES} bytes instead of reading on. `stderrIsTTY` and `progressStream` look
 * at `process.stderr` only when asked: Node makes that stream on first use.
 */
export function processIo(): Io {
  return {
    out: (s) => stdout.write(s),
    err: (s) => stderr.write(s),
    readStdin: async () => (await readProcessStdin()).toString('utf8'),
    readStdinBytes: readProcessStdin,
    get stderrIsTTY() {
      return process.stderr.isTTY === true;
    },
    get stdinIsTTY() {
      // node:tty is loaded only when asked: at the top it loads net and its bindings, about 1 ms
      // of every CLI start
      const tty = createRequire(import.meta.url)('node:tty') as typeof import('node:tty');
      return tty.isatty(0);
    },
    get progressStream() {
      return process.stderr;
    },
  };
}

/** All of the process's stdin, at most STDIN_LIMIT_BYTES (else CliError, exit 2). */
async function readProcessStdin(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const c of process.stdin) {
    total += (c as Buffer).length;
    if (total > STDIN_LIMIT_BYTES) {
      // stop reading: an endless writer (`yes | berm call ... -`) gets EPIPE, not our memory
      process.stdin.destroy();
      throw new CliError(
        `stdin holds more than ${STDIN_LIMIT_BYTES} bytes of arguments (the most berm reads); ` +
          'tool arguments are at most 1 MiB for call and the daemon body limit for invoke',
      );
    }
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks);
}

/** Global options as commander hands them over (after the parsers below). */
export interface GlobalOptions {
  cacheDir?: string;
  /** false with --no-cache */
  cache: boolean;
  memory?: number;
  fuel?: number;
  timeout?: number;
  verbose?: boolean;
  json?: boolean;
  debug?: boolean;
}

/**
 * Parse a memory size: bytes, or a number with K, M or G (powers of 1024; `KiB`, `MB` etc. also
 * accepted). Must be a power of two from 64 KiB to 1 GiB.
 * @throws InvalidArgumentError (commander reports it and berm exits 2)
 */
export function parseMemorySize(text: string): number {
  const m = /^(\d+)\s*([kmg])?(?:i?b)?$/i.exec(text.trim());
  if (!m) throw new InvalidArgumentError(`expected a size such as 64M, 1M or 65536, got '${text}'`);
  const unit = { k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[(m[2] ?? '').toLowerCase()] ?? 1;
  const n = Number(m[1]) * unit;
  const pow2 = Number.isSafeInteger(n) && n > 0 && 2 ** Math.round(Math.log2(n)) === n;
  if (!pow2 || n < 65536 || n > 2 ** 30) {
    throw new InvalidArgumentError(`'${text}' must be a power of two from 64K to 1G (e.g. 64M)`);
  }
  return n;
}

/**
 * Parse a positive integer option (fuel, milliseconds).
 * @throws InvalidArgumentError
 */
export function parsePositiveInt(text: string): number {
  if (!/^\d+$/.test(text.trim()))
    throw new InvalidArgumentError(`expected a positive integer, got '${text}'`);
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n <= 0) {
    throw new InvalidArgumentError(`expected a positive integer, got '${text}'`);
  }
  return n;
}

/** Wall-clock limit of a `call` or `exec` when neither --timeout nor $BERM_TIMEOUT sets one, ms. */
export const DEFAULT_CALL_TIMEOUT_MS = 60_000;

/**
 * The wall-clock limit of one call in ms: --timeout, else $BERM_TIMEOUT (a positive integer), else
 * {@link DEFAULT_CALL_TIMEOUT_MS}. A spinning guest is stopped without any flag.
 * @throws CliError (exit 2) when $BERM_TIMEOUT is set but not a positive integer
 */
export function callTimeoutOf(opts: GlobalOptions, env: NodeJS.ProcessEnv = process.env): number {
  if (opts.timeout !== undefined) return opts.timeout;
  const fromEnv = env.BERM_TIMEOUT;
  if (fromEnv !== undefined && fromEnv !== '') {
    try {
      return parsePositiveInt(fromEnv);
    } catch {
      throw new CliError(`$BERM_TIMEOUT must be a positive number of milliseconds, got '${fromEnv}'`);
    }
  }
  return DEFAULT_CALL_TIMEOUT_MS;
}

/** The cache directory the options select, or null with --no-cache. */
export function cacheDirOf(opts: GlobalOptions): string | null {
  if (!opts.cache) return null;
  return opts.cacheDir ?? defaultCacheDir();
}

/**
 * The directory `cache ls/clear` work on (ignores --no-cache). A missing directory is an empty
 * cache; one that exists but is not a directory is refused.
 * @throws CliError (exit 2) when the path names something other than a directory
 */
export function cacheDirForListing(opts: GlobalOptions): string {
  const dir = opts.cacheDir ?? defaultCacheDir();
  let st: Stats | undefined;
  try {
    st = statSync(dir);
  } catch {
    st = undefined;
  }
  if (st && !st.isDirectory())
    throw new CliError(`cache directory ${dir}: exists and is not a directory; ${CACHE_FIX}`);
  return dir;
}

/**
 * Label the cache entry of a compiled module with the ELF it came from, for `berm cache ls`.
 * @param source the path the user named
 * @param elf the ELF bytes that were compiled
 */
export function labelCacheEntry(engine: Engine, key: string, source: string, elf: Uint8Array): void {
  engine.cache?.label(key, {
    source: path.resolve(source),
    sha256: engine.inspect(elf).sha256,
    bytes: elf.length,
  });
}

/**
 * V8's dynamic-tiering budget (--wasm-tiering-budget units, "a rough approximation of bytes
 * executed" per function) for the modules of a process that exits after one call: call, exec and
 * `call --config` (engine/v8-flags.ts compileWithTieringBudget). At V8's default (1.8 M) a
 * function is queued for TurboFan after well under a millisecond of hot code, and the process then
 * waits at exit for a compile whose code it will not run: a warm `berm call` of text-clang-O0 wrote
 * its answer at ~60 ms and exited ~100 ms later. 10^9, 555 times the default: the first calls of
 * the bench's start-up fixtures stay in Liftoff (big-gcc-O2's big_run needs more than 3 x 10^7,
 * the most of them), and a function that stays hot for longer (fib_rec of compute-gcc-O2 from
 * n = 31, some tens of ms) still gets TurboFan: `exec fib_rec 41` took 1.68 s of CPU against
 * 1.47 s at the default and 5.1 s without TurboFan at all (bench/README.md, "Process start").
 */
export const ONE_SHOT_TIERING_BUDGET = 1_000_000_000;

/** The fix printed with an unusable cache directory. */
const CACHE_FIX =
  'choose a writable directory with --cache-dir or $BERM_CACHE_DIR (default $XDG_CACHE_HOME/berm, else ~/.cache/berm), or run with --no-cache';

/**
 * An engine configured by the global options. `tier`: see EngineConfig.tier (`berm compile`
 * writes the optimised tier; running commands start on the baseline tier when it is not cached).
 * @throws CliError (exit 2) for a bad memory size, or a cache directory that cannot be created or
 *   written (a file, a place under /proc, a read-only disk): failing is better than silently
 *   caching nothing.
 */
export function engineFor(opts: GlobalOptions, tier?: Tier): Engine {
  try {
    // every command using this engine exits after its work: a background optimiser would be cut
    // off before it reached the cache (only `berm compile` writes the optimised tier), and V8's
    // TurboFan compiles still in flight would hold the exit (ONE_SHOT_TIERING_BUDGET)
    const engine = new Engine({
      cacheDir: cacheDirOf(opts),
      memorySize: opts.memory,
      tier,
      optimizeInBackground: false,
      wasmTieringBudget: ONE_SHOT_TIERING_BUDGET,
    });
    const problem = engine.cache?.problem();
    if (problem) throw new CliError(`cache directory ${problem}; ${CACHE_FIX}`);
    return engine;
  } catch (e) {
    if (e instanceof RangeError) throw new CliError(e.message);
    throw e;
  }
}

/**
 * Read an input file; a missing or unreadable file, or one that is not a regular file (FIFO,
 * device, directory), is bad input (exit 2). Bounded by the file's real size (src/util/read-file.ts).
 * @throws CliError
 */
export function readInputFile(path: string): Uint8Array {
  try {
    return readRegularFile(path);
  } catch (e) {
    if (e instanceof InputFileError) throw new CliError(e.message);
    throw e;
  }
}

/** `12.3 ms` */
export function ms(n: number): string {
  return `${n.toFixed(1)} ms`;
}

/** One human line describing how a module was obtained, for --verbose and `compile`. */
export function describeCompile(info: CompileInfo): string {
  const wasm = info.format === 'wasm';
  const how = info.cached ? 'cache hit' : wasm ? 'instrumented' : 'translated';
  const parts = [`${how}, ${info.wasmBytes} bytes of Wasm, total ${ms(info.totalMs)}`];
  if (info.translate && wasm) parts.push(`instrument ${ms(info.translate.build)}`);
  else if (info.translate) {
    const t = info.translate;
    parts.push(`build ${ms(t.build)}, optimize ${ms(t.optimize)}, emit ${ms(t.emit)}`);
  }
  parts.push(`V8 compile ${ms(info.wasmCompileMs)}`, `${info.tier} tier`);
  return parts.join('; ');
}

/** `0x` and 16 hex digits of the unsigned 64-bit value. */
export function hex64(v: bigint): string {
  return '0x' + BigInt.asUintN(64, v).toString(16).padStart(16, '0');
}

/** A trap as a JSON-friendly object. */
export function trapJson(t: Trap): Record<string, unknown> {
  return {
    status: 'trap',
    trap: t.name,
    message: t.message,
    pc: t.pc,
    symbol: t.symbol,
    offset: t.offset,
    where: t.where(),
    backtrace: t.backtrace.map((f) => f.symbol),
  };
}

/**
 * Human report of a trap: name, message, where, backtrace; Rust symbol names demangled
 * (`berm::cap::invoke`, not `_RNvNtCs..._4berm3cap6invoke`; --json keeps them as in the ELF).
 */
export function trapText(t: Trap): string {
  const where = t.symbol ? t.where().replace(`(${t.symbol}+`, `(${demangle(t.symbol)}+`) : t.where();
  const lines = [`berm: guest trap ${t.name}: ${t.message}`, `  at ${where}`];
  if (t.backtrace.length > 0)
    lines.push(`  backtrace: ${t.backtrace.map((f) => demangle(f.symbol)).join(' <- ')}`);
  return lines.join('\n') + '\n';
}

/** The exit code an error maps to. */
export function exitCodeOf(e: unknown): ExitCodeValue {
  if (e instanceof CliError) return e.exitCode;
  if (e instanceof Trap) return ExitCode.Trap;
  if (
    e instanceof ElfError ||
    e instanceof WasmImageError ||
    e instanceof ManifestError ||
    e instanceof HarnessError ||
    e instanceof LayoutError ||
    e instanceof TranslateError
  ) {
    return ExitCode.BadInput;
  }
  return ExitCode.Internal;
}

/**
 * Report an error on stderr (and as one JSON object on stdout with --json); a JS stack trace only
 * for internal errors with --debug.
 * @param file the ELF the command was reading: an error about its contents (ElfError,
 *   ManifestError, LayoutError, TranslateError) names it instead of the error's class, e.g.
 *   `berm: README.md: not an ELF file (bad magic): ...`
 * @returns the exit code
 */
export function reportError(
  io: Io,
  e: unknown,
  opts: Pick<GlobalOptions, 'json' | 'debug'>,
  file?: string,
): ExitCodeValue {
  const code = exitCodeOf(e);
  if (e instanceof Trap) {
    io.err(trapText(e));
    if (opts.json) io.out(JSON.stringify(trapJson(e)) + '\n');
  } else {
    const err = e instanceof Error ? e : new Error(String(e));
    const aboutFile =
      file !== undefined &&
      (err instanceof ElfError ||
        err instanceof WasmImageError ||
        err instanceof ManifestError ||
        err instanceof LayoutError ||
        err instanceof TranslateError);
    const kind = err instanceof CliError ? '' : aboutFile ? `${file}: ` : `${err.name}: `;
    const prefix = code === ExitCode.Internal ? 'berm: internal error: ' : 'berm: ';
    io.err(`${prefix}${kind}${err.message}\n`);
    if (code === ExitCode.Internal && !opts.debug) io.err('(run with --debug for a stack trace)\n');
    if (opts.json) {
      io.out(JSON.stringify({ status: 'error', error: err.name, message: err.message }) + '\n');
    }
  }
  if (opts.debug && e instanceof Error && e.stack) io.err(e.stack + '\n');
  return code;
}

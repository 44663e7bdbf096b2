/**
 * `berm exec FILE SYMBOL [INT...]`: call a raw exported guest function with up to 8 integer
 * arguments in a0..a7 and print a0 and a1 in hex. The heap and log host calls are linked
 * (basicHostFunctions), so raw entry points that allocate or log work.
 */
import type { Command } from 'commander';
import { basicHostFunctions, Linker } from '../../engine/engine.js';
import { DEFAULT_CALL_LIMITS } from '../../harness/harness.js';
import {
  callTimeoutOf,
  CliError,
  describeCompile,
  engineFor,
  ExitCode,
  hex64,
  labelCacheEntry,
  readInputFile,
} from '../context.js';
import type { CliContext } from '../program.js';
import { monotonicMs } from '../../util/clock.js';

const MIN = -(1n << 63n);
const MAX = (1n << 64n) - 1n;

/**
 * Parse one integer argument: decimal or 0x hex, optionally negative (two's complement), within
 * -2^63 .. 2^64-1.
 * @returns the value as a signed 64-bit bigint
 * @throws CliError (exit 2) naming the bad argument
 */
export function parseGuestInt(text: string): bigint {
  const m = /^([+-]?)(0x[0-9a-f]+|0b[01]+|0o[0-7]+|\d+)$/i.exec(text.trim());
  if (!m) {
    throw new CliError(
      `'${text}' is not an integer argument: use decimal or 0x hex, e.g. 42, -7, 0xff, -0x10`,
    );
  }
  const v = BigInt(m[2]) * (m[1] === '-' ? -1n : 1n);
  if (v < MIN || v > MAX) throw new CliError(`'${text}' does not fit in 64 bits`);
  return BigInt.asIntN(64, v);
}

/** Most guest log lines `exec --verbose` prints per call (the harness layer's default too). */
export const EXEC_MAX_LOG_LINES = DEFAULT_CALL_LIMITS.maxLogLines;

/** Register `exec`. */
export function registerExec(program: Command, ctx: CliContext): void {
  program
    .command('exec')
    .description('call a raw exported function with integer arguments in a0..a7; prints a0 and a1 in hex')
    .argument('<file>', 'ELF')
    .argument('<symbol>', 'exported (global) function symbol')
    // so that `-0x10` reaches the integer parser (unknown options end up there and are rejected)
    .allowUnknownOption()
    .argument('[ints...]', 'up to 8 integers: decimal or 0x hex, negative allowed (two’s complement)')
    .action((file: string, symbol: string, ints: string[], _opts: unknown, cmd: Command) =>
      ctx.run(
        cmd,
        async () => {
          const g = ctx.globals(cmd);
          const { io } = ctx;
          if (ints.length > 8) throw new CliError(`at most 8 integer arguments (a0..a7), got ${ints.length}`);
          const args = ints.map(parseGuestInt);
          const engine = engineFor(g);
          const elf = readInputFile(file);
          const module = await engine.compile(elf);
          labelCacheEntry(engine, module.info.key, file, elf);
          if (g.verbose) io.err(`berm: ${file}: ${describeCompile(module.info)}\n`);
          if (!module.hasExport(symbol)) {
            throw new CliError(`${file} exports no function named ${symbol} (see berm inspect --functions)`);
          }
          const linker = new Linker(module.engine);
          // As for tool calls (src/harness), a guest's log flood is cut per call and the drop reported.
          let logged = 0;
          let dropped = 0;
          const log = g.verbose
            ? (line: string) => {
                if (logged >= EXEC_MAX_LOG_LINES) dropped++;
                else {
                  logged++;
                  io.err(`[log] ${line}\n`);
                }
              }
            : undefined;
          const reportDropped = () => {
            if (dropped > 0) {
              io.err(
                `[log] [berm: ${dropped} more log line(s) dropped; the limit is ${EXEC_MAX_LOG_LINES} per call]\n`,
              );
            }
          };
          for (const [name, fn] of basicHostFunctions(module, log)) linker.define(name, fn);
          const inst = linker.instantiate(module, { fuel: g.fuel, timeoutMs: callTimeoutOf(g) });
          const t0 = monotonicMs();
          let a0: bigint;
          let a1: bigint;
          try {
            [a0, a1] = inst.call(symbol, ...args);
          } finally {
            reportDropped();
          }
          if (g.verbose) io.err(`berm: ${symbol} ran in ${(monotonicMs() - t0).toFixed(1)} ms\n`);
          io.out(
            g.json
              ? JSON.stringify({ status: 'ok', symbol, a0: hex64(a0), a1: hex64(a1) }) + '\n'
              : `a0=${hex64(a0)} a1=${hex64(a1)}\n`,
          );
          return ExitCode.Ok;
        },
        file,
      ),
    );
}

/**
 * Entry of the berm CLI (bin/berm.js runs this module, or the CommonJS bundle scripts/build.mjs
 * makes of it): run the program on the process arguments and exit with its code. The program
 * itself is built in program.ts; `call --config` comes from commands/call-config.ts.
 *
 * No top-level await: the module must also work as the entry of a CommonJS bundle.
 */
import { configCallExtension } from './commands/call-config.js';
import { runCli } from './program.js';

/**
 * A failed write to stdout. A reader that stops early (`berm disasm x.elf | head`) is not an
 * error of ours: EPIPE exits with the command's code. Any other failure (a full disk, /dev/full,
 * EIO) lost output the caller asked for: a line on stderr and exit 1 (or the command's own
 * non-zero code), never 0.
 */
function stdoutFailed(e: NodeJS.ErrnoException): never {
  const code = process.exitCode === undefined ? 0 : Number(process.exitCode);
  if (e.code === 'EPIPE') process.exit(code);
  try {
    process.stderr.write(`berm: writing to stdout failed: ${e.message}\n`);
  } catch {
    // stderr is gone too: the exit code is all that is left
  }
  process.exit(code === 0 ? 1 : code);
}
process.stdout.on('error', stdoutFailed);

void runCli(process.argv.slice(2), { callExtensions: [configCallExtension()] }).then((code) => {
  process.exitCode = code;
  // A write to a file or pipe fails synchronously but the stream emits its 'error' on a later
  // tick; the stream records it at once (writable.errored), so the exit code is decided here.
  const failed = process.stdout.errored;
  if (failed) stdoutFailed(failed as NodeJS.ErrnoException);
  // The command is done (every action awaits its work; background work such as the optimiser's
  // worker never holds the process). Exit now rather than when the event loop drains: that skips
  // the GC work V8 has queued by then (a 64 MiB guest memory starts an incremental marking) and
  // the isolate's teardown, some ms of every short call. Only with stdout and stderr flushed
  // (writes to files and pipes are synchronous on Linux; a pending one means a natural exit).
  if (process.stdout.writableLength === 0 && process.stderr.writableLength === 0) process.exit(code);
});

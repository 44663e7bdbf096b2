/**
 * Entry of the berm CLI (bin/berm.js runs this module, or the CommonJS bundle scripts/build.mjs
 * makes of it): run the program on the process arguments and exit with its code. The program
 * itself is built in program.ts; `call --config` comes from commands/call-config.ts.
 *
 * No top-level await: the module must also work as the entry of a CommonJS bundle.
 */
import { configCallExtension } from './commands/call-config.js';
import { stderr, stdout } from './output.js';
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
  stderr.write(`berm: writing to stdout failed: ${e.message}\n`);
  process.exit(code === 0 ? 1 : code);
}
// Output goes to fd 1 and 2 synchronously (output.ts): a failed write reports at once, in the
// middle of the command, before it decided its exit code (a trap's 3, a failed tool's 1, a usage
// error's 2) and wrote its own stderr lines. The failure is kept (output.ts drops later writes)
// and acted on when the command is done, or on a later turn of the event loop for a command that
// goes on (the foreground queue): what Node's stream did, whose 'error' came a tick later. Once
// stdout fell back to the process stream (EAGAIN), that stream's 'error' comes here too.
let stdoutError: NodeJS.ErrnoException | undefined;
stdout.onError = (e) => {
  stdoutError = e;
  setImmediate(() => stdoutFailed(e));
};

void runCli(process.argv.slice(2), { callExtensions: [configCallExtension()] }).then((code) => {
  process.exitCode = code;
  const out = stdout.stream;
  const err = stderr.stream;
  // A write to a file or pipe through the stream fails synchronously but the stream emits its
  // 'error' on a later tick; the stream records it at once (writable.errored), so the exit code
  // is decided here.
  const failed = stdoutError ?? out?.errored;
  if (failed) stdoutFailed(failed as NodeJS.ErrnoException);
  // The command is done (every action awaits its work; background work such as the optimiser's
  // worker never holds the process). Exit now rather than when the event loop drains: that skips
  // the GC work V8 has queued by then and the isolate's teardown, some ms of every short call.
  // Only with everything written: always so for the synchronous writes; a stream still holding
  // bytes (a non-blocking pipe whose reader is behind) means a natural exit once it drained.
  if ((out?.writableLength ?? 0) === 0 && (err?.writableLength ?? 0) === 0) process.exit(code);
});

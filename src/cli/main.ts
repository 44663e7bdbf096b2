/**
 * Entry of the berm CLI (bin/berm.js runs this module, or the CommonJS bundle scripts/build.mjs
 * makes of it): run the program on the process arguments and exit with its code. The program
 * itself is built in program.ts; `call --config` comes from commands/call-config.ts.
 *
 * No top-level await: the module must also work as the entry of a CommonJS bundle.
 */
import { configCallExtension } from './commands/call-config.js';
import { runCli } from './program.js';

// A reader that stops early (`berm disasm x.elf | head`) is not an error of ours.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw e;
});

void runCli(process.argv.slice(2), { callExtensions: [configCallExtension()] }).then((code) => {
  process.exitCode = code;
  // The command is done (every action awaits its work; background work such as the optimiser's
  // worker never holds the process). Exit now rather than when the event loop drains: that skips
  // the GC work V8 has queued by then (a 64 MiB guest memory starts an incremental marking) and
  // the isolate's teardown, some ms of every short call. Only with stdout and stderr flushed
  // (writes to files and pipes are synchronous on Linux; a pending one means a natural exit).
  if (process.stdout.writableLength === 0 && process.stderr.writableLength === 0) process.exit(code);
});

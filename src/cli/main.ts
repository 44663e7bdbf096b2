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
});

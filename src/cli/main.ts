/**
 * Entry of the berm CLI (bin/berm.js imports this module): run the program on the process
 * arguments and exit with its code. The program itself is built in program.ts; `call --config`
 * comes from commands/call-config.ts.
 */
import { configCallExtension } from './commands/call-config.js';
import { runCli } from './program.js';

// A reader that stops early (`berm disasm x.elf | head`) is not an error of ours.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw e;
});

process.exitCode = await runCli(process.argv.slice(2), { callExtensions: [configCallExtension()] });

/**
 * `berm new NAME [--lang c|rust] [--target riscv64|wasm32]`: scaffold a harness project by running
 * scripts/new-harness (wasm32: a C harness built as a WebAssembly module, docs/wasm.md).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { CliError, ExitCode } from '../context.js';
import type { CliContext } from '../program.js';

/** Path of the scaffold script in this checkout. */
export const NEW_HARNESS_SCRIPT = fileURLToPath(new URL('../../../scripts/new-harness', import.meta.url));

/** Register `new`. */
export function registerNew(program: Command, ctx: CliContext): void {
  program
    .command('new')
    .description('scaffold a new harness project (guest SDK, C or Rust) in directory NAME')
    .argument('<name>', 'directory to create; its last component names the harness')
    .option('--sdk <path>', 'guest SDK to use (default: the guest-sdk of this checkout)')
    .option('--lang <lang>', 'c or rust (a cargo crate on guest-sdk/rust)', 'c')
    .option('--target <target>', 'riscv64 (an ELF) or wasm32 (a WebAssembly harness; C only)', 'riscv64')
    .action((name: string, opts: { sdk?: string; lang: string; target: string }, cmd: Command) =>
      ctx.run(cmd, () => {
        if (opts.lang !== 'c' && opts.lang !== 'rust') {
          throw new CliError(`--lang must be c or rust, not ${JSON.stringify(opts.lang)}`, ExitCode.BadInput);
        }
        if (opts.target !== 'riscv64' && opts.target !== 'wasm32') {
          throw new CliError(
            `--target must be riscv64 or wasm32, not ${JSON.stringify(opts.target)}`,
            ExitCode.BadInput,
          );
        }
        if (!existsSync(NEW_HARNESS_SCRIPT)) {
          throw new CliError(
            `the scaffold script ${NEW_HARNESS_SCRIPT} is not part of this checkout; ` +
              'update berm, or copy an example from guest-sdk/examples/',
            ExitCode.Internal,
          );
        }
        if (existsSync(name) && (!statSync(name).isDirectory() || readdirSync(name).length > 0)) {
          throw new CliError(
            `${name} already exists and is not an empty folder; name a new one`,
            ExitCode.BadInput,
          );
        }
        const sdk = opts.sdk ? ['--sdk', opts.sdk] : [];
        const target = opts.target === 'wasm32' ? ['--target', 'wasm32'] : [];
        const r = spawnSync(NEW_HARNESS_SCRIPT, [...sdk, '--lang', opts.lang, ...target, name], {
          stdio: ['inherit', 'pipe', 'pipe'],
        });
        if (r.stdout?.length) ctx.io.out(r.stdout.toString());
        if (r.error)
          throw new CliError(`could not run ${NEW_HARNESS_SCRIPT}: ${r.error.message}`, ExitCode.Internal);
        const said = (r.stderr?.toString() ?? '').trim().replace(/^new-harness: /, '');
        if (r.status !== 0)
          throw new CliError(said || `scripts/new-harness ${name} failed (exit ${r.status ?? r.signal})`);
        if (said) ctx.io.err(`${said}\n`);
        return ExitCode.Ok;
      }),
    );
}

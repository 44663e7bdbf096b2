/**
 * What the client verbs share and `inspect` needs without loading the HTTP client: the harness
 * name rule, the `--host`/`--token-file` options, and the rule telling `inspect NAME` (a
 * deployment) from `inspect FILE`. Kept apart from daemon-verbs.ts so that a local `berm inspect
 * FILE` does not import undici.
 */
import { existsSync } from 'node:fs';
import { Option, type Command } from '../commander.js';

/** Harness names bermd accepts: 1 to 64 of a-z, 0-9, '_' and '-'. */
export const HARNESS_NAME = /^[a-z0-9_-]{1,64}$/;

/** Add `--host` and `--token-file` to a command. */
export function addDaemonOptions(cmd: Command): Command {
  return cmd
    .addOption(new Option('--host <url>', 'bermd address (default $BERM_HOST, else http://127.0.0.1:7777)'))
    .addOption(
      new Option('--token-file <file>', "file whose first line is bermd's token (default $BERMD_TOKEN)"),
    );
}

/**
 * Whether `berm inspect ARG` means a daemon deployment rather than a local ELF. An ARG that is not
 * a valid harness name (it has a dot, a slash, an uppercase letter...) is always a file. A valid
 * name is a deployment when `--host` is given, or when no file of that name exists. So
 * `berm inspect build/echo.elf` and `berm inspect echo.elf` read the file, `berm inspect echo`
 * asks the daemon unless ./echo exists (`berm inspect ./echo` reads it), and
 * `berm inspect echo --host URL` always asks the daemon.
 */
export function inspectsDaemon(arg: string, hostGiven: boolean): boolean {
  if (!HARNESS_NAME.test(arg)) return false;
  return hostGiven || !existsSync(arg);
}

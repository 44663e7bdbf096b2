/**
 * `berm run HARNESS TOOL [ARGUMENTS]`: run one tool of a harness deployed on bermd, with upstream's
 * semantics, so scripts written for its CLI read the same outcome here:
 *
 * - the arguments are ARGUMENTS as typed; without them, standard input when it is not a terminal
 *   (a pipe or a file), else nothing (an empty body, which bermd takes as `{}`). Either is trimmed
 *   of surrounding ASCII whitespace: a shell's trailing newline is not part of the argument object.
 * - exit 0: the result on stdout, one newline after it.
 * - exit 2: the harness reported failure (berm.fail); `HARNESS.TOOL failed: MESSAGE` on stderr.
 * - exit 1: anything else (bermd unreachable, unknown harness or tool, arguments refused, a trap,
 *   a refused limit), with the reason on stderr.
 *
 * `--json` prints bermd's answer (`{"done": ...}` or `{"failed": ...}`) instead of the result;
 * `--verbose` streams the tool's log lines to stderr. The foreground queue that `berm run --config
 * FILE --state DIR` used to start is `berm worker`; given those options, `run` says so (exit 2).
 */
import type { Command } from 'commander';
import { demangleIn } from '../../util/demangle.js';
import { Option } from '../commander.js';
import { CliError, ExitCode, reportError, type ExitCodeValue } from '../context.js';
import type { CliContext } from '../program.js';
import type { DaemonFlags } from './daemon-client.js';
import { addDaemonOptions } from './daemon-options.js';
import { withDaemon } from './daemon-verbs.js';

/** Exit code of `berm run` when the harness ran and reported failure (upstream's). */
export const RUN_FAILED = 2;
/** Exit code of `berm run` for every other error (upstream's). */
export const RUN_ERROR = 1;

/** Options of `berm worker` that `run` recognises only to say where they went. */
const WORKER_OPTIONS = ['config', 'state', 'store', 'lease', 'workers', 'limit'] as const;

/**
 * The argument bytes `berm run` sends: `inline` when given, else stdin when it is not a terminal,
 * else nothing; trimmed of ASCII whitespace at both ends (upstream trims bytes, so does this).
 */
export async function runArguments(
  inline: string | undefined,
  stdin: { isTTY: boolean; read(): Promise<string> },
): Promise<string> {
  const raw = inline ?? (stdin.isTTY ? '' : await stdin.read());
  return raw.replace(/^[\t\n\f\r ]+|[\t\n\f\r ]+$/g, '');
}

/** `berm run --config X --state Y ...` as the `berm worker` command line it meant. */
function movedText(flags: Record<string, unknown>): string {
  const words = ['berm', 'worker'];
  for (const k of WORKER_OPTIONS) {
    const v = flags[k];
    for (const one of Array.isArray(v) ? v : v === undefined ? [] : [v])
      words.push(`--${k}`, shellWord(String(one)));
  }
  return (
    'berm: the foreground queue moved from `berm run --config FILE --state DIR` to `berm worker` ' +
    `(same options): ${words.join(' ')}\n` +
    '`berm run HARNESS TOOL [ARGUMENTS]` runs a tool of a harness deployed on bermd\n'
  );
}

/** `w` as one POSIX shell word (single-quoted unless it is plain). */
function shellWord(w: string): string {
  return /^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replaceAll("'", "'\\''")}'`;
}

/** Register `run`. */
export function registerRunTool(program: Command, ctx: CliContext): void {
  const cmd = addDaemonOptions(
    program
      .command('run')
      .description(
        'run a tool of a harness deployed on bermd; ARGUMENTS default to stdin when it is not a terminal; exit 0 done, 2 the tool failed, 1 any other error',
      )
      .argument('[harness]', 'harness name')
      .argument('[tool]', 'tool name')
      .argument('[arguments]', 'the argument object as JSON (default: stdin when piped, else none)'),
  );
  // `berm worker`'s options, parsed only to point there
  cmd.addOption(new Option('--config <file>').hideHelp());
  cmd.addOption(new Option('--state <dir>').hideHelp());
  cmd.addOption(new Option('--store <url>').hideHelp());
  cmd.addOption(new Option('--lease <ms>').hideHelp());
  cmd.addOption(new Option('--workers <n>').hideHelp());
  cmd.addOption(
    new Option('--limit <key=value>')
      .hideHelp()
      .argParser((v, prev: string[] | undefined) => [...(prev ?? []), v]),
  );
  cmd.action(
    (
      harness: string | undefined,
      tool: string | undefined,
      inline: string | undefined,
      flags: DaemonFlags & Record<string, unknown>,
      c: Command,
    ) =>
      ctx.run(c, async (): Promise<ExitCodeValue> => {
        const { io } = ctx;
        const g = ctx.globals(c);
        if (WORKER_OPTIONS.some((k) => flags[k] !== undefined)) {
          io.err(movedText(flags));
          return ExitCode.BadInput;
        }
        if (harness === undefined || tool === undefined) {
          io.err('berm: usage: berm run HARNESS TOOL [ARGUMENTS] (berm run --help)\n');
          return ExitCode.BadInput;
        }
        try {
          const args = await runArguments(inline, {
            isTTY: io.stdinIsTTY === true,
            read: () => io.readStdin(),
          });
          const onLog = g.verbose ? (line: string) => io.err(`[log] ${line}\n`) : undefined;
          const r = await withDaemon(flags, (d) => d.invoke(harness, tool, args, onLog));
          if (g.json) io.out(JSON.stringify(r.body) + '\n');
          if (r.status === 'ok') {
            if (!g.json) io.out(r.result + '\n');
            return ExitCode.Ok;
          }
          if (r.status === 'failed') {
            io.err(`${harness}.${tool} failed: ${r.message}\n`);
            return RUN_FAILED as ExitCodeValue;
          }
          // a trap names the guest function as the ELF does: a Rust one reads better demangled
          throw new CliError(typeof r.body.trap === 'string' ? demangleIn(r.error) : r.error);
        } catch (e) {
          reportError(io, e, { debug: g.debug });
          return RUN_ERROR as ExitCodeValue;
        }
      }),
  );
}

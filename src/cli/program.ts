/**
 * The berm command-line program: global options, subcommands (one module each under commands/),
 * exit codes. `buildProgram` is exported so that later features can extend a subcommand (for
 * example `call --config`, through {@link ProgramOptions.callExtensions}).
 */
import { packageVersion } from '../util/package-version.js';
import { Command, CommanderError, Option } from './commander.js';
import type { CallExtension } from './commands/call.js';
import {
  DEFAULT_CALL_TIMEOUT_MS,
  EXIT_CODES_HELP,
  ExitCode,
  parseMemorySize,
  parsePositiveInt,
  processIo,
  reportError,
  type ExitCodeValue,
  type GlobalOptions,
  type Io,
} from './context.js';

/** What a subcommand module gets to register itself. */
export interface CliContext {
  io: Io;
  /** the global and local options of `cmd` merged */
  globals(cmd: Command): GlobalOptions;
  /**
   * Run an action body: its returned exit code, or the exit code of what it throws (reported on
   * stderr without a stack trace) becomes the program's exit code. `file`: the ELF the body reads,
   * named in the report of an error about its contents (see reportError).
   */
  run(cmd: Command, body: () => Promise<ExitCodeValue> | ExitCodeValue, file?: string): Promise<void>;
}

/** Ways to extend the program. */
export interface ProgramOptions {
  /** streams (default: the process's) */
  io?: Io;
  /** extensions of `call` (extra options, extra invoke options such as capabilities) */
  callExtensions?: CallExtension[];
  /** called last with the built program, to add or change commands */
  extend?: (program: Command, ctx: CliContext) => void;
}

/** A built program and the exit code its last action set. */
export interface BuiltProgram {
  program: Command;
  ctx: CliContext;
  /** exit code set by the action that ran (0 when none ran) */
  exitCode(): ExitCodeValue;
}

type Register = (program: Command, ctx: CliContext, options: ProgramOptions) => void;

/**
 * The subcommand modules, in help order, each with the command words it registers. A module is
 * imported only when needed: a command line whose command word is listed loads that module alone
 * (a tool call loads neither the registry client, the daemon client nor the disassembler); help,
 * no command or a word not listed here load them all.
 */
const COMMANDS: { words: readonly string[]; load: () => Promise<Register> }[] = [
  { words: ['inspect'], load: async () => (await import('./commands/inspect.js')).registerInspect },
  {
    words: ['call'],
    load: async () => {
      const { registerCall } = await import('./commands/call.js');
      return (program, ctx, options) => registerCall(program, ctx, options.callExtensions ?? []);
    },
  },
  {
    words: ['check'],
    load: async () => {
      // a declaration may grant the protocol door's `protocol:*` capabilities: register them first
      await import('../protocol/index.js');
      return (await import('./commands/check.js')).registerCheck;
    },
  },
  { words: ['exec'], load: async () => (await import('./commands/exec.js')).registerExec },
  { words: ['compile'], load: async () => (await import('./commands/compile.js')).registerCompile },
  { words: ['disasm'], load: async () => (await import('./commands/disasm.js')).registerDisasm },
  { words: ['cache'], load: async () => (await import('./commands/cache.js')).registerCache },
  { words: ['new'], load: async () => (await import('./commands/new.js')).registerNew },
  { words: ['push', 'pull'], load: async () => (await import('./commands/push-pull.js')).registerPushPull },
  {
    words: ['deploy', 'ls', 'rm', 'invoke'],
    load: async () => (await import('./commands/daemon-verbs.js')).registerDaemonVerbs,
  },
  {
    words: ['search', 'publish', 'install'],
    load: async () => (await import('./commands/index-verbs.js')).registerIndexVerbs,
  },
  { words: ['wake'], load: async () => (await import('./commands/wake-client.js')).registerWakeClient },
  { words: ['run'], load: async () => (await import('./commands/run.js')).registerRun },
];

/** Global options that take a value (as a separate argument). */
const VALUE_OPTIONS = new Set(['--cache-dir', '--memory', '--fuel', '--timeout']);

/**
 * Options of the client verbs (daemon-options.ts): not global, so they go after the verb. Skipped
 * with their value when looking for the command word, so that one written before the verb is
 * reported as misplaced rather than taken for the verb.
 */
const CLIENT_VALUE_OPTIONS = new Set(['--host', '--token-file']);

/** The command word of `argv`: its first argument that is neither an option nor a global option's value. */
export function commandWord(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') return argv[i + 1];
    if (VALUE_OPTIONS.has(a) || CLIENT_VALUE_OPTIONS.has(a)) i++;
    else if (!a.startsWith('-')) return a;
  }
  return undefined;
}

/** `w` as one POSIX shell word (single-quoted unless it is plain). */
function shellWord(w: string): string {
  return /^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replaceAll("'", "'\\''")}'`;
}

/**
 * The fix for a client option written before the verb (`berm --host URL ls`), which commander
 * reports only as `unknown option '--host'`: the same command line with that option moved to the
 * end, where the verb takes it.
 * @returns the hint line, or undefined when no client option precedes the command word
 */
export function misplacedClientOption(argv: readonly string[]): string | undefined {
  const word = commandWord(argv);
  const end = word === undefined ? argv.length : argv.indexOf(word);
  for (let i = 0; i < end; i++) {
    const a = argv[i];
    const name = a.split('=')[0];
    if (!CLIENT_VALUE_OPTIONS.has(name)) continue;
    const taken = a.includes('=') ? 1 : 2;
    const moved = [...argv.slice(0, i), ...argv.slice(i + taken)];
    const dash = moved.indexOf('--');
    const at = dash < 0 ? moved.length : dash;
    moved.splice(at, 0, ...argv.slice(i, i + taken));
    return (
      `berm: ${name} is an option of the client verbs (ls, deploy, invoke, wake, ...): it goes after ` +
      `the verb: berm ${moved.map(shellWord).join(' ')}`
    );
  }
  return undefined;
}

/**
 * Build the berm program (commander) with its subcommands registered: every one, or only the
 * module registering `word` when one does (see COMMANDS).
 */
export async function buildProgram(options: ProgramOptions = {}, word?: string): Promise<BuiltProgram> {
  const io = options.io ?? processIo();
  let code: ExitCodeValue = ExitCode.Ok;
  const program = new Command('berm');
  const ctx: CliContext = {
    io,
    globals: (cmd) => cmd.optsWithGlobals() as GlobalOptions,
    run: async (cmd, body, file) => {
      const g = ctx.globals(cmd);
      try {
        code = await body();
      } catch (e) {
        code = reportError(io, e, g, file);
      }
    },
  };
  program
    .description(
      'Run statically linked RV64IMAC harness ELFs in a WebAssembly sandbox (each tool call in a fresh instance).',
    )
    .version(packageVersion(), '-V, --version')
    .option(
      '--cache-dir <dir>',
      'Wasm cache directory (default: $BERM_CACHE_DIR, else $XDG_CACHE_HOME/berm, else ~/.cache/berm)',
    )
    .option('--no-cache', 'neither read nor write the Wasm cache')
    .addOption(
      new Option('--memory <size>', 'guest memory, a power of two from 64K to 1G (default 64M)').argParser(
        parseMemorySize,
      ),
    )
    .addOption(
      new Option('--fuel <n>', 'instruction budget of a call (call, exec; run: the fuel limit)').argParser(
        parsePositiveInt,
      ),
    )
    .addOption(
      new Option(
        '--timeout <ms>',
        `wall-clock limit of a whole call in milliseconds, host calls included (call, exec; default: $BERM_TIMEOUT, else ${DEFAULT_CALL_TIMEOUT_MS}; run: the timeoutMs limit)`,
      ).argParser(parsePositiveInt),
    )
    .option('--verbose', 'show guest log lines and compile timings on stderr')
    .option('--json', 'one JSON document on stdout (every command but disasm, new and run)')
    .option('--debug', 'print JS stack traces of internal errors')
    // each verb's --help lists these too: `berm compile --help` must show --json and --cache-dir
    .configureHelp({ showGlobalOptions: true })
    .showSuggestionAfterError()
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.out(s), writeErr: (s) => io.err(s) })
    .addHelpText('after', `\n${EXIT_CODES_HELP}\n`);

  const one = COMMANDS.find((c) => word !== undefined && c.words.includes(word));
  for (const register of await Promise.all((one ? [one] : COMMANDS).map((c) => c.load()))) {
    register(program, ctx, options);
  }
  options.extend?.(program, ctx);
  return { program, ctx, exitCode: () => code };
}

/**
 * Parse `argv` (without the node and script entries) and run the selected command.
 * @returns the exit code
 */
export async function runCli(argv: string[], options: ProgramOptions = {}): Promise<ExitCodeValue> {
  const built = await buildProgram(options, commandWord(argv));
  try {
    await built.program.parseAsync(argv, { from: 'user' });
  } catch (e) {
    if (e instanceof CommanderError) {
      const hint = e.code === 'commander.unknownOption' ? misplacedClientOption(argv) : undefined;
      if (hint !== undefined) built.ctx.io.err(hint + '\n');
      // help and --version exit 0; usage errors (and `berm` without a command) exit 2
      return e.exitCode === 0 ? ExitCode.Ok : ExitCode.BadInput;
    }
    return reportError(built.ctx.io, e, {});
  }
  return built.exitCode();
}

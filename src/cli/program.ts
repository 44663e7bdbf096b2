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
  { words: ['run'], load: async () => (await import('./commands/run.js')).registerRunTool },
  { words: ['worker'], load: async () => (await import('./commands/worker.js')).registerWorker },
];

/** Global options that take a value (as a separate argument). */
const VALUE_OPTIONS = new Set([
  '--cache-dir',
  '--memory',
  '--fuel',
  '--timeout',
  '--host',
  '--token-file',
  '--index',
]);

/** The command word of `argv`: its first argument that is neither an option nor a global option's value. */
export function commandWord(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') return argv[i + 1];
    if (VALUE_OPTIONS.has(a)) i++;
    else if (!a.startsWith('-')) return a;
  }
  return undefined;
}

/**
 * The client verbs' options that are global too (`--index` of search, publish, install):
 * accepted before the verb as well as after it.
 */
const CLIENT_GLOBALS = ['host', 'tokenFile', 'index'] as const;

/**
 * `berm --host URL ls` as `berm ls --host URL`: a client option written before the verb (the
 * program's, hidden in help) is handed to the verb that runs when the verb was not given its own.
 */
function handClientGlobals(program: Command, action: Command): void {
  const global = program.opts() as Record<string, unknown>;
  const own = action.opts() as Record<string, unknown>;
  for (const k of CLIENT_GLOBALS) {
    const declared = action.options.some((o) => o.attributeName() === k);
    if (declared && own[k] === undefined && global[k] !== undefined) action.setOptionValue(k, global[k]);
  }
}

/**
 * Usage errors (a missing argument, an unknown option, a bad value) read as berm's own errors: the
 * `berm:` prefix every other error has instead of commander's `error:`, then the verb's usage line
 * (`usage: berm wake add [options] <harness> <tool>`), on every verb and sub-verb.
 */
function withUsageOnError(cmd: Command, io: Io): void {
  const path: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) path.unshift(c.name());
  const usage = `usage: ${path.join(' ')} ${cmd.usage()}`;
  cmd.configureOutput({
    writeOut: (s) => io.out(s),
    writeErr: (s) => io.err(s),
    outputError: (s, write) =>
      write(`berm: ${s.replace(/^error: /, '')}${s.endsWith('\n') ? '' : '\n'}${usage}\n`),
  });
  for (const sub of cmd.commands) withUsageOnError(sub, io);
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
    .option('--json', 'one JSON document on stdout (every command but disasm, new and worker)')
    .option('--debug', 'print JS stack traces of internal errors')
    // the client verbs' --host and --token-file, written before the verb (each verb lists its own)
    .addOption(new Option('--host <url>').hideHelp())
    .addOption(new Option('--token-file <file>').hideHelp())
    .addOption(new Option('--index <source>').hideHelp())
    .hook('preAction', (_self, action) => handClientGlobals(program, action))
    // each verb's --help lists these too: `berm compile --help` must show --json and --cache-dir
    .configureHelp({ showGlobalOptions: true })
    .showSuggestionAfterError()
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.out(s), writeErr: (s) => io.err(s) })
    .addHelpText(
      'after',
      `\nThe client verbs' --host URL (default $BERM_HOST, else http://127.0.0.1:7777), --token-file FILE\n` +
        `and --index SOURCE go before or after the verb, as --json does.\n\n${EXIT_CODES_HELP}\n`,
    );

  const one = COMMANDS.find((c) => word !== undefined && c.words.includes(word));
  for (const register of await Promise.all((one ? [one] : COMMANDS).map((c) => c.load()))) {
    register(program, ctx, options);
  }
  options.extend?.(program, ctx);
  withUsageOnError(program, io);
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
      // help and --version exit 0; usage errors (and `berm` without a command) exit 2
      return e.exitCode === 0 ? ExitCode.Ok : ExitCode.BadInput;
    }
    return reportError(built.ctx.io, e, {});
  }
  return built.exitCode();
}

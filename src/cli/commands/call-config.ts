/**
 * `berm call --config harnesses.toml HARNESS TOOL [ARGS]`: the `call` extension that runs a tool
 * of a harness declared in an operator's declaration file, with exactly the capabilities the
 * declaration grants. berm.call from the harness reaches the other
 * declared harnesses named in its `callees`. Declaration problems exit 2 with file:line and the fix.
 */
import { CliError, describeCompile, engineFor, processIo, type Io } from '../context.js';
import type { CallExtension } from './call.js';

/**
 * The `--config` extension of `call`.
 * @param io where warnings about other refused entries of the file go (default: the process's)
 */
export function configCallExtension(io: Io = processIo()): CallExtension {
  return {
    configure(cmd) {
      cmd.option(
        '--config <file>',
        'declaration file (harnesses.toml): FILE is then a declared harness name, granted what the file grants',
      );
    },
    async call(opts, name, tool, args, invoke) {
      const file = opts.config;
      if (typeof file !== 'string') return undefined;
      // loaded here, not with the CLI: a plain `call` needs neither TOML, ajv nor the capabilities
      // registers the protocol door's `protocol:*` capabilities, so a declaration may grant them
      // (the agent daemon is reached through $BERM_AGENT_DAEMON; docs/protocol-door.md)
      await import('../../protocol/index.js');
      const { DeclarationError, loadDeclarations } = await import('../../config/declarations.js');
      const { Runtime, RuntimeError } = await import('../../runtime/declared.js');
      try {
        const decls = loadDeclarations(file);
        // The whole call, its berm.call chain and host calls included, runs on the queue's
        // executor: one deadline (counted from the call's start, after the harnesses were
        // compiled; capabilities clamp their own timeouts to it) and one fuel budget
        const runtime = await Runtime.create(engineFor(opts), decls, {
          only: [name],
          invoke: {
            ...(invoke.fuel !== undefined ? { fuel: invoke.fuel } : {}),
            ...(invoke.timeoutMs !== undefined ? { timeoutMs: invoke.timeoutMs } : {}),
            ...(invoke.onLog ? { onLog: invoke.onLog } : {}),
          },
        });
        for (const e of decls.errors) io.err(`berm: warning: ${e.message} (entry skipped)\n`);
        if (opts.verbose) {
          for (const n of runtime.names()) {
            io.err(`berm: ${n}: ${describeCompile(runtime.get(n)!.harness.module.info)}\n`);
          }
        }
        return runtime.call(name, tool, args);
      } catch (e) {
        if (e instanceof DeclarationError || e instanceof RuntimeError) throw new CliError(e.message);
        throw e;
      }
    },
  };
}

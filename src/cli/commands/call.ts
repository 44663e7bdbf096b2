/**
 * `berm call FILE TOOL [ARGS_JSON | -]`: invoke one tool in a fresh instance and print its result.
 * Exit 0 with the result on stdout, 1 with the failure message on stdout (berm.fail), 2 for bad
 * input (malformed ELF, unknown tool, arguments not JSON or not matching the schema), 3 for a trap.
 */
import type { Command } from 'commander';
import { Harness, type InvokeOptions, type ToolResult } from '../../harness/harness.js';
import { parseManifest } from '../../harness/manifest.js';
import { UnknownHostCall } from '../../engine/traps.js';
import { hostCallName } from '../../util/host-call-names.js';
import {
  callTimeoutOf,
  CliError,
  describeCompile,
  engineFor,
  ExitCode,
  labelCacheEntry,
  readInputFile,
  type ExitCodeValue,
  type GlobalOptions,
} from '../context.js';
import type { CliContext } from '../program.js';
import { monotonicMs } from '../../util/clock.js';

/**
 * An extension of `call` (e.g. `--config harnesses.toml` granting capabilities): it may add
 * options to the command and contribute invoke options once the harness is loaded.
 */
export interface CallExtension {
  /** add options to the `call` command */
  configure?(cmd: Command): void;
  /**
   * Invoke options (capabilities, host functions, limits) for this call; merged over berm's own.
   * Throw a CliError for bad configuration (exit 2).
   */
  invokeOptions?(
    opts: GlobalOptions & Record<string, unknown>,
    harness: Harness,
    file: string,
  ): Partial<InvokeOptions> | Promise<Partial<InvokeOptions>>;
  /**
   * Make the call itself instead of loading FILE as an ELF (e.g. `--config`, where FILE names a
   * declared harness): return the tool's result, or undefined to leave the call to berm. Throw as
   * berm would (a Trap exits 3, a CliError or HarnessError 2).
   */
  call?(
    opts: GlobalOptions & Record<string, unknown>,
    file: string,
    tool: string,
    args: string | Uint8Array,
    invoke: InvokeOptions,
  ): ToolResult | undefined | Promise<ToolResult | undefined>;
}

/** Register `call`. */
export function registerCall(program: Command, ctx: CliContext, extensions: CallExtension[] = []): void {
  const cmd = program
    .command('call')
    .description("invoke a tool; ARGS_JSON defaults to '{}', '-' reads the arguments from stdin")
    .argument('<file>', 'harness ELF (with --config: the name of a declared harness)')
    .argument('<tool>', 'tool name (see berm inspect)')
    .argument('[args]', "arguments as JSON, or '-' for stdin", '{}')
    .option(
      '--no-validate',
      "hand the arguments to the tool as raw bytes, unchecked (test a tool's own parsing)",
    );
  for (const e of extensions) e.configure?.(cmd);
  cmd.action((file: string, tool: string, args: string, opts: { validate: boolean }, self: Command) =>
    ctx.run(
      self,
      async (): Promise<ExitCodeValue> => {
        const g = ctx.globals(self) as GlobalOptions & Record<string, unknown>;
        const { io } = ctx;
        // --no-validate hands the tool the bytes as given: stdin is not decoded (invalid UTF-8 stays)
        const argInput: string | Uint8Array = opts.validate
          ? args === '-'
            ? await io.readStdin()
            : args
          : args === '-'
            ? ((await io.readStdinBytes?.()) ?? new TextEncoder().encode(await io.readStdin()))
            : new TextEncoder().encode(args);
        const base: InvokeOptions = {
          fuel: g.fuel,
          timeoutMs: callTimeoutOf(g),
          onLog: g.verbose ? (line) => io.err(`[log] ${line}\n`) : undefined,
        };
        let r: ToolResult | undefined;
        for (const e of extensions) {
          r ??= e.call ? await e.call(g, file, tool, argInput, base) : undefined;
        }
        if (r === undefined) {
          try {
            r = await loadAndInvoke();
          } catch (e) {
            if (e instanceof UnknownHostCall) await nameUngrantedCall(e);
            throw e;
          }
        }
        if (g.json) {
          io.out(JSON.stringify(r) + '\n');
        } else if (r.status === 'ok') {
          io.out(r.result.endsWith('\n') ? r.result : r.result + '\n');
        } else {
          io.out(r.message.endsWith('\n') ? r.message : r.message + '\n');
          io.err(`berm: tool ${tool} failed\n`);
        }
        return r.status === 'ok' ? ExitCode.Ok : ExitCode.ToolFailed;

        async function loadAndInvoke(): Promise<ToolResult> {
          const bytes = readInputFile(file);
          const engine = engineFor(g);
          // a cheap look at the manifest first, so an unknown tool is reported before any
          // translation (the engine keeps the parsed image for the compile)
          const manifest = parseManifest(engine.inspect(bytes).image.manifest);
          if (!manifest.tools.some((t) => t.name === tool)) {
            const known = manifest.tools.map((t) => t.name).join(', ') || 'none';
            throw new CliError(`${file} has no tool named ${tool} (tools: ${known})`);
          }
          const harness = await Harness.load(engine, bytes);
          labelCacheEntry(engine, harness.module.info.key, file, bytes);
          if (g.verbose) io.err(`berm: ${file}: ${describeCompile(harness.module.info)}\n`);
          let invoke: InvokeOptions = base;
          for (const e of extensions) {
            if (e.invokeOptions) invoke = { ...invoke, ...(await e.invokeOptions(g, harness, file)) };
          }
          const t0 = monotonicMs();
          const result = harness.invoke(tool, argInput, invoke);
          if (g.verbose) io.err(`berm: ${tool} ran in ${(monotonicMs() - t0).toFixed(1)} ms\n`);
          return result;
        }
      },
      typeof (self.opts() as { config?: unknown }).config === 'string' ? undefined : file,
    ),
  );
}

/**
 * Name the capability call behind an UnknownHostCall of a plain `berm call FILE`, which links no
 * capability: the capability modules (which register their wire names) load only now, on this
 * error path, so a plain call still starts without them. Rewrites `e.message` in place, e.g.
 * `unknown host call 0x... (berm.fs.read): it is not linked into this instance: capability "fs" is
 * not granted ...; a plain \`berm call FILE\` grants none: declare the harness and use call --config`.
 */
async function nameUngrantedCall(e: UnknownHostCall): Promise<void> {
  if (hostCallName(e.number) === undefined) {
    await import('../../capabilities/index.js');
    await import('../../protocol/index.js');
  }
  if (hostCallName(e.number) === undefined) return;
  e.message =
    new UnknownHostCall(e.number).message +
    '; a plain `berm call FILE` grants none: declare the harness and use call --config';
}

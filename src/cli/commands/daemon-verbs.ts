/**
 * Client verbs against a running bermd, over HTTP only (daemon-client.ts):
 *
 *   berm deploy NAME FILE|REF    PUT the ELF (a path that exists is read; anything else is a
 *                                registry reference, pulled and verified first)
 *   berm ls                      the deployed harnesses
 *   berm inspect NAME --host ..  one deployment (see inspect.ts for telling a name from a file)
 *   berm rm NAME                 undeploy
 *   berm invoke NAME TOOL [ARGS] run a tool; --verbose streams its log lines to stderr (SSE)
 *
 * Each takes `--host URL` and `--token-file FILE` (else $BERM_HOST, $BERMD_TOKEN) and the global
 * `--json`. Exit codes follow the local verbs: 0 ok, 1 the tool failed, 2 refused (bad input,
 * unknown name, missing token, daemon not reachable), 3 the guest trapped, 4 a daemon error.
 */
import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { parseReference } from '../../oci/index.js';
import { demangleIn } from '../../util/demangle.js';
import { CliError, ExitCode, readInputFile, type ExitCodeValue } from '../context.js';
import type { CliContext } from '../program.js';
import { DaemonClient, resolveTarget, type DaemonFlags, type HarnessInfo } from './daemon-client.js';
import { addDaemonOptions, HARNESS_NAME } from './daemon-options.js';
import { pullChecked, registryCall } from './registry-common.js';

export { addDaemonOptions, HARNESS_NAME, inspectsDaemon } from './daemon-options.js';

/** Run `body` with a client of the daemon the flags select; the client is closed afterwards. */
export async function withDaemon<T>(flags: DaemonFlags, body: (c: DaemonClient) => Promise<T>): Promise<T> {
  const client = new DaemonClient(resolveTarget(flags, process.env));
  try {
    return await body(client);
  } finally {
    await client.close();
  }
}

/** `sha256:0123456789ab` -> `0123456789ab` (what a listing shows). */
export function shortDigest(digest: string): string {
  return digest.replace(/^sha256:/, '').slice(0, 12);
}

/** Text of `berm ls`: a NAME / DIGEST / TOOLS table, or a line saying nothing is deployed. */
export function listText(hs: HarnessInfo[]): string {
  if (hs.length === 0) return 'no harnesses deployed\n';
  const w = Math.max(4, ...hs.map((h) => h.name.length));
  const rows = [`${'NAME'.padEnd(w)}  ${'DIGEST'.padEnd(12)}  TOOLS`];
  for (const h of hs) {
    rows.push(
      `${h.name.padEnd(w)}  ${shortDigest(String(h.digest ?? '')).padEnd(12)}  ${(h.tools ?? []).map((t) => t.name).join(', ')}`,
    );
  }
  return rows.join('\n') + '\n';
}

/**
 * The arguments of a deployment's grant as `berm check` prints them (`root = "/srv/data", hosts =
 * ["example.org"]`), or '' when it has none.
 */
export function grantArgsText(granted: NonNullable<HarnessInfo['granted']>): string {
  return Object.entries(granted)
    .filter(([k, v]) => k !== 'capabilities' && v !== undefined)
    .map(([k, v]) => `${k} = ${JSON.stringify(v)}`)
    .join(', ');
}

/** Text of `berm inspect NAME` (a deployment). */
export function harnessText(h: HarnessInfo): string {
  const out: string[] = [];
  const row = (k: string, v: string): number => out.push(`${k.padEnd(14)}${v}`);
  row('name', h.name);
  row('digest', String(h.digest));
  if (h.usage) row('usage', h.usage);
  if (h.deps) row('deps', h.deps.length > 0 ? h.deps.join(', ') : 'none');
  if (h.granted) {
    const caps = h.granted.capabilities ?? [];
    row('granted', caps.length > 0 ? caps.join(', ') : 'none');
    const args = grantArgsText(h.granted);
    if (args) row('grant args', args);
  }
  row('tools', String((h.tools ?? []).length));
  for (const t of h.tools ?? []) {
    out.push(`  ${t.name}${t.description ? ` - ${t.description}` : ''}`);
    if (t.parameters !== undefined) out.push(`    parameters: ${JSON.stringify(t.parameters)}`);
  }
  return out.join('\n') + '\n';
}

/** `berm inspect NAME` against the daemon. */
export async function inspectRemote(
  ctx: CliContext,
  cmd: Command,
  name: string,
  flags: DaemonFlags,
): Promise<ExitCodeValue> {
  const g = ctx.globals(cmd);
  const h = await withDaemon(flags, (c) => c.get(name));
  ctx.io.out(g.json ? JSON.stringify(h, null, 2) + '\n' : harnessText(h));
  return ExitCode.Ok;
}

/** The ELF bytes `deploy` sends: a file that exists, else a pulled (verified) reference. */
async function deploySource(source: string): Promise<{ elf: Uint8Array; from: string; reference?: string }> {
  if (existsSync(source)) return { elf: readInputFile(source), from: source };
  try {
    parseReference(source);
  } catch {
    throw new CliError(
      `${source}: no such file (nor a registry reference host[:port]/repo[:tag|@sha256:...])`,
    );
  }
  const pulled = await registryCall(() => pullChecked(source));
  return { elf: pulled.elf, from: pulled.reference, reference: pulled.reference };
}

function checkName(name: string): void {
  if (!HARNESS_NAME.test(name)) {
    throw new CliError(
      `invalid harness name '${name}': names are 1 to 64 of a-z, 0-9, '_' and '-' (no dots or slashes)`,
    );
  }
}

/**
 * How many pending wakes target `name` (among the earliest 10,000, the most one `GET /wakes`
 * lists); 0 when the daemon cannot list them (the undeploy itself succeeded).
 */
async function wakesLeft(c: DaemonClient, name: string): Promise<number> {
  try {
    return (await c.listWakes(10_000)).wakes.filter((w) => w.harness === name).length;
  } catch {
    return 0;
  }
}

/** Register deploy, ls, rm and invoke. */
export function registerDaemonVerbs(program: Command, ctx: CliContext): void {
  addDaemonOptions(
    program
      .command('deploy')
      .description('deploy a harness to bermd from a file or a registry reference (pulled and verified here)')
      .argument('<name>', 'harness name: 1 to 64 of a-z, 0-9, _ and -')
      .argument('<source>', 'harness ELF path, or a registry reference host[:port]/repo[:tag|@digest]'),
  ).action((name: string, source: string, flags: DaemonFlags, cmd: Command) =>
    ctx.run(cmd, async () => {
      const g = ctx.globals(cmd);
      checkName(name);
      const src = await deploySource(source);
      const h = await withDaemon(flags, (c) => c.deploy(name, src.elf));
      if (g.json) {
        ctx.io.out(JSON.stringify({ ...h, ...(src.reference ? { reference: src.reference } : {}) }) + '\n');
      } else {
        const tools = (h.tools ?? []).map((t) => t.name).join(', ') || 'none';
        const caps = h.granted?.capabilities;
        const args = h.granted ? grantArgsText(h.granted) : '';
        ctx.io.out(
          `deployed ${h.name} ${h.digest}\n  from      ${src.from}\n  tools     ${tools}\n` +
            (caps
              ? `  granted   ${caps.length > 0 ? caps.join(', ') : 'none'}${args ? `; ${args}` : ''}\n`
              : ''),
        );
      }
      return ExitCode.Ok;
    }),
  );

  addDaemonOptions(program.command('ls').description('list the harnesses deployed on bermd')).action(
    (flags: DaemonFlags, cmd: Command) =>
      ctx.run(cmd, async () => {
        const g = ctx.globals(cmd);
        const hs = await withDaemon(flags, (c) => c.list());
        ctx.io.out(g.json ? JSON.stringify(hs) + '\n' : listText(hs));
        return ExitCode.Ok;
      }),
  );

  addDaemonOptions(
    program.command('rm').description('undeploy a harness from bermd').argument('<name>', 'harness name'),
  ).action((name: string, flags: DaemonFlags, cmd: Command) =>
    ctx.run(cmd, async () => {
      const g = ctx.globals(cmd);
      const left = await withDaemon(flags, async (c) => {
        await c.remove(name);
        return wakesLeft(c, name);
      });
      ctx.io.out(g.json ? JSON.stringify({ status: 'ok', name }) + '\n' : `removed ${name}\n`);
      // an undeploy leaves the harness's wakes armed (a redeploy picks its schedules up again);
      // without a word they are dropped one by one as they fall due
      if (left > 0) {
        ctx.io.err(
          `berm: ${left} wake${left === 1 ? '' : 's'} of ${name} stay${left === 1 ? 's' : ''} pending (berm wake ls): ` +
            `each runs if ${name} is deployed again by its due time, else it is dropped then ` +
            '(berm wake rm ID cancels one)\n',
        );
      }
      return ExitCode.Ok;
    }),
  );

  addDaemonOptions(
    program
      .command('invoke')
      .description(
        "run a tool of a deployed harness; ARGS defaults to '{}', '-' reads stdin; --verbose streams its log",
      )
      .argument('<name>', 'harness name')
      .argument('<tool>', 'tool name')
      .argument('[args]', "arguments as JSON, or '-' for stdin", '{}'),
  ).action((name: string, tool: string, args: string, flags: DaemonFlags, cmd: Command) =>
    ctx.run(cmd, async (): Promise<ExitCodeValue> => {
      const g = ctx.globals(cmd);
      const { io } = ctx;
      const argText = args === '-' ? await io.readStdin() : args;
      const onLog = g.verbose ? (line: string) => io.err(`[log] ${line}\n`) : undefined;
      const r = await withDaemon(flags, (c) => c.invoke(name, tool, argText, onLog));
      if (g.json) io.out(JSON.stringify(r.body) + '\n');
      if (r.status === 'ok') {
        if (!g.json) io.out(r.result.endsWith('\n') ? r.result : r.result + '\n');
        return ExitCode.Ok;
      }
      if (r.status === 'failed') {
        if (!g.json) io.out(r.message.endsWith('\n') ? r.message : r.message + '\n');
        io.err(`berm: tool ${tool} failed\n`);
        return ExitCode.ToolFailed;
      }
      // a trap names the guest function as the ELF does: a Rust one reads better demangled
      io.err(`berm: ${typeof r.body.trap === 'string' ? demangleIn(r.error) : r.error}\n`);
      if (typeof r.body.trap === 'string') return ExitCode.Trap;
      return r.httpStatus === 429 ? ExitCode.BadInput : ExitCode.Internal;
    }),
  );
}

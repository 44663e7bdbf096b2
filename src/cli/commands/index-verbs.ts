/**
 * The index verbs (docs/index.md):
 * - `berm search [TERM] [--update]`: what has been published (table `HARNESS DIGEST TOOLS`, or
 *   `nothing published` / `nothing published matches "TERM"`; `--json`: the entries);
 * - `berm publish REF`: ask an index service to list an already pushed harness; the bearer token
 *   is `$BERM_TOKEN` (the index's credential, never bermd's);
 * - `berm install REF [--name NAME] [--config FILE]`: pull, verify (layer digest, the ELF's own
 *   manifest, the index's published digest), store the ELF content-addressed in berm's data
 *   directory, and declare it pinned by sha256 with no capabilities granted.
 * The index is `--index`, else `$BERM_INDEX`, else the reference implementation's public list: a
 * directory, a `.git` URL (cloned shallow into the cache directory) or a service URL.
 */
import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { DeclarationError, loadDeclarations } from '../../config/declarations.js';
import { defaultCacheDir } from '../../cache/cache.js';
import type { IndexEntry } from '../../index/entry.js';
import {
  declareInstalled,
  defaultDataDir,
  defaultHarnessName,
  fetchVerified,
  InstallError,
  requestedGrants,
  storeHarness,
} from '../../index/install.js';
import { DEFAULT_INDEX, IndexError, openIndex, type IndexSource } from '../../index/source.js';
import { CliError, ExitCode, type ExitCodeValue } from '../context.js';
import type { CliContext } from '../program.js';

/** Hex digits of a digest the search table shows (as `berm ls` does). */
const SHORT = 12;

/** The index a command line names: `--index`, else `$BERM_INDEX`, else the public list. */
export function indexName(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  return flag ?? (env.BERM_INDEX || DEFAULT_INDEX);
}

async function open(
  ctx: CliContext,
  cmd: Command,
  flag: string | undefined,
  update = false,
): Promise<IndexSource> {
  const g = ctx.globals(cmd);
  try {
    return await openIndex(indexName(flag), g.cacheDir ?? defaultCacheDir(), update);
  } catch (e) {
    if (e instanceof IndexError) throw new CliError(e.message);
    throw e;
  }
}

/** Run an index request; an IndexError becomes a CliError with the index's own message (exit 2). */
async function indexCall<T>(body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (e) {
    if (e instanceof IndexError || e instanceof InstallError) throw new CliError(e.message);
    throw e;
  }
}

/** The search table: `HARNESS  DIGEST  TOOLS`, the first column as wide as its widest reference. */
export function searchTable(entries: IndexEntry[]): string {
  const width = Math.max('HARNESS'.length, ...entries.map((e) => e.reference.length));
  const row = (a: string, b: string, c: string): string =>
    `${a.padEnd(width)}  ${b.padEnd(SHORT)}  ${c}`.trimEnd() + '\n';
  let out = row('HARNESS', 'DIGEST', 'TOOLS');
  for (const e of entries) {
    const hex = e.digest.startsWith('sha256:') ? e.digest.slice(7) : e.digest;
    out += row(e.reference, hex.slice(0, SHORT), e.tools.map((t) => t.name).join(', '));
  }
  return out;
}

/** Register `search`, `publish` and `install`. */
export function registerIndexVerbs(program: Command, ctx: CliContext): void {
  program
    .command('search')
    .description('search an index for published harnesses (reference, usage, tool names and descriptions)')
    .argument('[term]', 'case-insensitive substring; none lists everything', '')
    .option(
      '--index <source>',
      'a directory, a .git URL or an index service URL (default $BERM_INDEX, else the public list)',
    )
    .option('--update', 'fetch the local copy of a .git index again first')
    .action((term: string, opts: { index?: string; update?: boolean }, cmd: Command) =>
      ctx.run(cmd, async () => {
        const g = ctx.globals(cmd);
        const source = await open(ctx, cmd, opts.index, opts.update === true);
        const { entries } = await indexCall(() => source.search(term));
        if (g.json) ctx.io.out(JSON.stringify(entries) + '\n');
        else if (entries.length === 0)
          ctx.io.out(
            term === '' ? 'nothing published\n' : `nothing published matches ${JSON.stringify(term)}\n`,
          );
        else ctx.io.out(searchTable(entries));
        return ExitCode.Ok;
      }),
    );

  program
    .command('publish')
    .description(
      "list an already pushed harness in an index service (bearer token: $BERM_TOKEN, the index's)",
    )
    .argument('<ref>', 'registry reference the index pulls anonymously, e.g. ghcr.io/org/name:v1')
    .option('--index <url>', 'the index service (default $BERM_INDEX, else the public list)')
    .action((ref: string, opts: { index?: string }, cmd: Command) =>
      ctx.run(cmd, async () => {
        const g = ctx.globals(cmd);
        const source = await open(ctx, cmd, opts.index);
        const token = process.env.BERM_TOKEN?.trim() || undefined;
        const e = await indexCall(() => source.publish(ref, token));
        if (g.json) ctx.io.out(JSON.stringify(e) + '\n');
        else {
          let out = `${e.reference}\n  digest     ${e.digest}\n`;
          if (e.publisher !== undefined) out += `  publisher  ${e.publisher}\n`;
          for (const t of e.tools) out += `  tool       ${t.name}\n`;
          ctx.io.out(out);
        }
        return ExitCode.Ok;
      }),
    );

  program
    .command('install')
    .description(
      "fetch a harness by reference, verify it, store it in berm's data directory and declare it in --config pinned by sha256, granting nothing; without REF, fetch every oci: source of --config not yet installed",
    )
    .argument('[ref]', 'registry reference, e.g. ghcr.io/org/name:v1')
    .option('--name <name>', "the harness name in the declaration (default: the repository's last component)")
    .option('--config <file>', 'the declaration file (created when missing)', 'berm.toml')
    .option(
      '--index <source>',
      'the index whose published digest must match (default $BERM_INDEX; none: no index check)',
    )
    .action(
      (ref: string | undefined, opts: { name?: string; config: string; index?: string }, cmd: Command) =>
        ctx.run(cmd, async () => {
          const wanted = opts.index ?? process.env.BERM_INDEX;
          const source = wanted === undefined || wanted === 'none' ? null : await open(ctx, cmd, wanted);
          if (ref === undefined) return installDeclared(ctx, cmd, opts.config, source);
          return installOne(ctx, cmd, ref, opts, source);
        }),
    );
}

/** `berm install REF`: fetch, verify, store, declare. */
async function installOne(
  ctx: CliContext,
  cmd: Command,
  ref: string,
  opts: { name?: string; config: string },
  source: IndexSource | null,
): Promise<ExitCodeValue> {
  const g = ctx.globals(cmd);
  const name = opts.name ?? defaultHarnessName(ref);
  if (!/^[a-z0-9_-]{1,64}$/.test(name))
    throw new CliError(
      `invalid harness name ${JSON.stringify(name)}: names are 1 to 64 of a-z, 0-9, '_' and '-'`,
    );
  const v = await indexCall(() => fetchVerified(ref, source));
  const hex = v.digest.slice('sha256:'.length);
  const file = storeHarness(defaultDataDir(), v.digest, v.elf);
  const added = await indexCall(async () => declareInstalled(opts.config, name, hex, v.reference));
  const { hosts, callees } = requestedGrants(v.manifest);
  if (g.json) {
    ctx.io.out(
      JSON.stringify({
        status: 'ok',
        name,
        reference: v.reference,
        digest: v.digest,
        file,
        config: opts.config,
        declared: added,
        requests: { hosts, callees },
      }) + '\n',
    );
    return ExitCode.Ok;
  }
  let out = `${v.reference}\n  digest     ${v.digest}${v.published !== undefined ? ' (as the index published it)' : ''}\n  stored     ${file}\n`;
  out += added
    ? `  declared   ${name} in ${opts.config}, sha256 pinned, no capabilities granted\n`
    : `  declared   ${name} in ${opts.config} already\n`;
  out += `  tools      ${v.manifest.tools.map((t) => t.name).join(', ') || 'none'}\n`;
  if (hosts.length + callees.length === 0) out += '  requests   nothing (its manifest declares no deps)\n';
  else {
    out += `  requests   ${[...hosts, ...callees].join(', ')}\nTo grant what it requests, add to its entry in ${opts.config}:\n`;
    const caps = [...(hosts.length > 0 ? ['"http"'] : []), ...(callees.length > 0 ? ['"call"'] : [])];
    out += `  capabilities = [${caps.join(', ')}]\n`;
    if (hosts.length > 0) out += `  hosts = [${hosts.map((h) => JSON.stringify(h)).join(', ')}]\n`;
    if (callees.length > 0) out += `  callees = [${callees.map((h) => JSON.stringify(h)).join(', ')}]\n`;
  }
  ctx.io.out(out);
  return ExitCode.Ok;
}

/** `berm install --config FILE`: fetch every `oci:` source of the file not yet in the store. */
async function installDeclared(
  ctx: CliContext,
  cmd: Command,
  config: string,
  source: IndexSource | null,
): Promise<ExitCodeValue> {
  const g = ctx.globals(cmd);
  let decls;
  try {
    decls = loadDeclarations(config, { checkFiles: false });
  } catch (e) {
    if (e instanceof DeclarationError) throw new CliError(e.message);
    throw e;
  }
  const done: { name: string; reference: string; digest: string; fetched: boolean }[] = [];
  for (const d of decls.harnesses) {
    if (d.reference === undefined) continue;
    if (existsSync(d.source)) {
      done.push({ name: d.name, reference: d.reference, digest: `sha256:${d.sha256}`, fetched: false });
      continue;
    }
    const v = await indexCall(() => fetchVerified(d.reference!, source));
    if (v.digest !== `sha256:${d.sha256}`) {
      throw new CliError(
        `${d.file}:${d.line}: ${d.name}: ${d.reference} is ${v.digest} but the declaration pins sha256 ${d.sha256}; nothing stored (pin the new digest yourself if it is the one you mean to run)`,
      );
    }
    storeHarness(defaultDataDir(), v.digest, v.elf);
    done.push({ name: d.name, reference: d.reference, digest: v.digest, fetched: true });
  }
  if (g.json) ctx.io.out(JSON.stringify({ status: 'ok', config, harnesses: done }) + '\n');
  else if (done.length === 0) ctx.io.out(`${config} names no harness by reference (source = "oci:...")\n`);
  else
    for (const h of done)
      ctx.io.out(
        `${h.name}  ${h.reference}  ${h.fetched ? 'installed' : 'already installed'}  ${h.digest}\n`,
      );
  return ExitCode.Ok;
}

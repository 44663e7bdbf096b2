/**
 * `berm inspect FILE`: manifest, tools, functions and indirect-target counts of a harness ELF.
 * Reads the ELF only (readElf, parseManifest, relocationTargets): it neither translates nor runs.
 */
import type { Command } from 'commander';
import { isWasmImage, readImage, type GuestImage } from '../../engine/image.js';
import { relocationTargets } from '../../elf/targets.js';
import type { ElfImage } from '../../elf/types.js';
import { ManifestError, parseManifest, type Manifest } from '../../harness/manifest.js';
import { DeclarationError, loadDeclarations } from '../../config/declarations.js';
import { CliError, ExitCode, readInputFile, type ExitCodeValue, type GlobalOptions } from '../context.js';
import type { CliContext } from '../program.js';
import type { DaemonFlags } from './daemon-client.js';
import { addDaemonOptions, inspectsDaemon } from './daemon-options.js';

/** What inspect reports (the --json shape). */
export interface InspectReport {
  file: string;
  /** the image's kind: a RISC-V ELF (translated) or a WebAssembly module (instrumented) */
  format: 'elf' | 'wasm';
  entry: number;
  /** symbol at the entry, or null */
  entrySymbol: string | null;
  imageStart: number;
  imageEnd: number;
  segments: { vaddr: number; memsz: number; filesz: number; flags: string }[];
  /** null when the ELF has no .berm.abi section or it is invalid (see manifestError) */
  manifest: Manifest | null;
  manifestError: string | null;
  functionCount: number;
  globalFunctionCount: number;
  functions: { name: string; aliases: string[]; start: number; size: number; global: boolean }[];
  relocationCount: number;
  indirectTargets: {
    /** code addresses named by relocations (candidates of indirect calls and jumps) */
    codeAddresses: number;
    /** of those, function entries (reachable through the dispatch function) */
    functionEntries: number;
    /** of those, addresses inside functions (jump-table cases) */
    other: number;
  };
}

const flagText = (f: number): string => (f & 4 ? 'r' : '-') + (f & 2 ? 'w' : '-') + (f & 1 ? 'x' : '-');
const hex = (n: number): string => `0x${n.toString(16)}`;

/**
 * Build the report of an image (pure; no translation). A Wasm image has no entry, segments or
 * relocations: its image range is its initial memory, its functions are the module's (start =
 * the body's offset in the module).
 */
export function inspectImage(file: string, image: GuestImage): InspectReport {
  if (isWasmImage(image)) {
    const mem = image.module.info.memory;
    const elfLike: ElfImage = {
      entry: 0,
      flags: 0,
      segments: [],
      sections: [],
      symbols: [],
      functions: image.functions,
      relocations: [],
      manifest: image.manifest,
      globalPointer: null,
      imageStart: 0,
      imageEnd: (mem?.min ?? 0) * 65536,
    };
    return { ...inspectImage(file, elfLike), format: 'wasm', entrySymbol: null };
  }
  let manifest: Manifest | null = null;
  let manifestError: string | null = null;
  if (image.manifest !== null) {
    try {
      manifest = parseManifest(image.manifest);
    } catch (e) {
      if (!(e instanceof ManifestError)) throw e;
      manifestError = e.message;
    }
  }
  const entries = new Set(image.functions.map((f) => f.start));
  const targets = [...relocationTargets(image).codeAddresses];
  const functionEntries = targets.filter((a) => entries.has(a)).length;
  const entryFn = image.functions.find((f) => f.start === image.entry);
  return {
    file,
    format: 'elf',
    entry: image.entry,
    entrySymbol: entryFn?.name ?? null,
    imageStart: image.imageStart,
    imageEnd: image.imageEnd,
    segments: image.segments.map((s) => ({
      vaddr: s.vaddr,
      memsz: s.memsz,
      filesz: s.filesz,
      flags: flagText(s.flags),
    })),
    manifest,
    manifestError,
    functionCount: image.functions.length,
    globalFunctionCount: image.functions.filter((f) => f.global).length,
    functions: image.functions.map((f) => ({
      name: f.name,
      aliases: f.names.slice(1),
      start: f.start,
      size: f.size,
      global: f.global,
    })),
    relocationCount: image.relocations.length,
    indirectTargets: {
      codeAddresses: targets.length,
      functionEntries,
      other: targets.length - functionEntries,
    },
  };
}

/** Human text of a report; `listFunctions` adds one line per function. */
export function inspectText(r: InspectReport, listFunctions: boolean): string {
  const out: string[] = [];
  const row = (k: string, v: string): number => out.push(`${k.padEnd(18)}${v}`);
  row('file', r.file);
  if (r.format === 'wasm') row('format', 'WebAssembly module (instrumented, not translated)');
  else row('entry', `${hex(r.entry)}${r.entrySymbol ? ` (${r.entrySymbol})` : ''}`);
  row('image', `${hex(r.imageStart)}..${hex(r.imageEnd)} (${r.imageEnd - r.imageStart} bytes)`);
  for (const s of r.segments) {
    row('  segment', `${hex(s.vaddr)} ${s.flags} filesz ${s.filesz} memsz ${s.memsz}`);
  }
  if (r.manifest) {
    const m = r.manifest;
    row('abi_version', String(m.abi_version));
    if (m.usage) row('usage', m.usage);
    if (m.abi_version === 1) row('deps', m.deps.length > 0 ? m.deps.join(', ') : 'none');
    row('tools', String(m.tools.length));
    for (const t of m.tools) {
      out.push(`  ${t.name}${t.description ? ` - ${t.description}` : ''}`);
      out.push(`    parameters: ${JSON.stringify(t.parameters)}`);
    }
  } else {
    row('manifest', r.manifestError ? `invalid: ${r.manifestError}` : 'none (no .berm.abi section)');
  }
  row('functions', `${r.functionCount} (${r.globalFunctionCount} global)`);
  if (r.format === 'elf') {
    // relocations and the code addresses they name are an ELF's (a module's calls are typed)
    row('relocations', String(r.relocationCount));
    const it = r.indirectTargets;
    row(
      'indirect targets',
      `${it.codeAddresses} code addresses named by relocations: ${it.functionEntries} function entries, ${it.other} other`,
    );
  }
  if (listFunctions) {
    out.push('');
    for (const f of r.functions) {
      const alias = f.aliases.length > 0 ? ` (= ${f.aliases.join(', ')})` : '';
      out.push(
        `${f.start.toString(16).padStart(8, '0')} ${String(f.size).padStart(6)} ${f.global ? 'g' : 'l'} ${f.name}${alias}`,
      );
    }
  }
  return out.join('\n') + '\n';
}

/**
 * `inspect --config FILE NAME`: the report of the ELF a declaration names, with the grants the
 * declaration gives it (`grant` and `capabilities` in --json).
 * @throws CliError (exit 2) when the file is unreadable, or NAME is not an accepted harness (its
 *   refusal with file:line and the fix, or the names that are declared)
 */
function inspectDeclared(
  ctx: CliContext,
  g: GlobalOptions,
  config: string,
  name: string,
  functions: boolean,
): ExitCodeValue {
  let decls;
  try {
    decls = loadDeclarations(config);
  } catch (e) {
    if (e instanceof DeclarationError) throw new CliError(e.message);
    throw e;
  }
  const d = decls.harnesses.find((h) => h.name === name);
  if (!d) {
    const refused = decls.errors.find((e) => e.problem.startsWith(`harness ${JSON.stringify(name)}:`));
    if (refused) throw new CliError(refused.message);
    const known = decls.harnesses.map((h) => h.name).join(', ') || 'none';
    throw new CliError(`${config}: no harness named ${name} is declared (declared: ${known})`);
  }
  const report = inspectImage(d.source, readImage(d.elf!));
  if (g.json) {
    ctx.io.out(
      JSON.stringify({ ...report, harness: name, capabilities: d.capabilities, grant: d.grant }, null, 2) +
        '\n',
    );
  } else {
    ctx.io.out(inspectText(report, functions));
    ctx.io.out(`declared as ${name} in ${config}:${d.line}\n`);
    ctx.io.out(`capabilities: ${d.capabilities.join(', ') || 'none'}\n`);
    for (const [k, v] of Object.entries(d.grant)) ctx.io.out(`  ${k} = ${JSON.stringify(v)}\n`);
  }
  if (report.manifestError) {
    ctx.io.err(`berm: ${report.manifestError}\n`);
    return ExitCode.BadInput;
  }
  return ExitCode.Ok;
}

/** Register `inspect`. */
export function registerInspect(program: Command, ctx: CliContext): void {
  // `inspect NAME` of a deployment on bermd shares the verb: with --host, or when the argument is a
  // harness name (no dot or slash) and no such file exists, it asks the daemon (daemon-verbs.ts).
  addDaemonOptions(
    program
      .command('inspect')
      .description(
        'show the manifest, tools, functions and indirect-target counts (no translation); ' +
          'with a deployed harness name (or --host), what bermd reports for it',
      )
      .argument('<file>', 'harness ELF, or the name of a harness deployed on bermd')
      .option('--functions', 'list every function (address, size, global/local, name)')
      .option(
        '--config <file>',
        'declaration file (harnesses.toml): FILE is then a declared harness name; its grants are shown too',
      ),
  ).action((file: string, opts: { functions?: boolean; config?: string } & DaemonFlags, cmd: Command) =>
    ctx.run(
      cmd,
      () => {
        const g = ctx.globals(cmd);
        if (opts.config !== undefined) return inspectDeclared(ctx, g, opts.config, file, !!opts.functions);
        if (inspectsDaemon(file, opts.host !== undefined)) {
          return import('./daemon-verbs.js').then((m) => m.inspectRemote(ctx, cmd, file, opts));
        }
        const report = inspectImage(file, readImage(readInputFile(file)));
        ctx.io.out(g.json ? JSON.stringify(report, null, 2) + '\n' : inspectText(report, !!opts.functions));
        if (report.manifestError) {
          ctx.io.err(`berm: ${report.manifestError}\n`);
          return ExitCode.BadInput;
        }
        return ExitCode.Ok;
      },
      opts.config === undefined ? file : undefined,
    ),
  );
}

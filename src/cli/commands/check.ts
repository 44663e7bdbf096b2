/**
 * `berm check FILE`: validate an operator's declaration file without running anything, and list
 * each accepted harness with its tools (from its manifest) and its grants. Every problem is
 * printed as `file:line: problem; fix: ...`; any problem (a refused entry, an ELF or manifest that
 * does not load) exits 2. Reads the ELFs (readElf, parseManifest) but never translates them.
 */
import type { Command } from 'commander';
import { loadDeclarations, type HarnessDeclaration } from '../../config/declarations.js';
import { closeSync, openSync, readSync } from 'node:fs';
import { imageKind, readImage } from '../../engine/image.js';
import { parseManifest } from '../../harness/manifest.js';
import { CliError, ExitCode, readInputFile, type ExitCodeValue } from '../context.js';
import type { CliContext } from '../program.js';

/** One harness as `check` reports it (the --json shape). */
export interface CheckedHarness {
  name: string;
  source: string;
  sha256: string;
  line: number;
  capabilities: string[];
  grant: Record<string, unknown>;
  /** tool names from the manifest; null when the ELF or its manifest does not load */
  tools: string[] | null;
  /** why the tools could not be listed */
  problem: string | null;
}

/** Check one accepted declaration's ELF: its tools, or why they cannot be read. */
export function checkHarness(d: HarnessDeclaration): CheckedHarness {
  let tools: string[] | null = null;
  let problem: string | null = null;
  try {
    const image = readImage(d.elf!);
    tools = parseManifest(image.manifest).tools.map((t) => t.name);
  } catch (e) {
    problem = `${d.file}:${d.line}: harness ${JSON.stringify(d.name)}: ${d.source}: ${(e as Error).message}`;
  }
  return {
    name: d.name,
    source: d.source,
    sha256: d.sha256,
    line: d.line,
    capabilities: d.capabilities,
    grant: { ...d.grant },
    tools,
    problem,
  };
}

/** The first four bytes of `file`, or null when it cannot be read (the declaration path reports why). */
function readHead(file: string): Uint8Array | null {
  try {
    const fd = openSync(file, 'r');
    try {
      const b = new Uint8Array(4);
      return readSync(fd, b, 0, 4, 0) === 4 ? b : null;
    } finally {
      closeSync(fd);
    }
  } catch {
    return null;
  }
}

/**
 * `berm check IMAGE`: a harness image alone (picked by its magic bytes), read as a deploy reads it
 * (the image, its manifest) without translating or instrumenting it. Prints its tools; a problem
 * is printed as `file: problem` and exits 2.
 */
function checkImage(ctx: CliContext, file: string, json: boolean): ExitCodeValue {
  const bytes = readInputFile(file);
  let tools: string[] | null = null;
  let problem: string | null = null;
  let format: string | null = null;
  try {
    format = imageKind(bytes);
    const image = readImage(bytes);
    tools = parseManifest(image.manifest).tools.map((t) => t.name);
  } catch (e) {
    problem = `${file}: ${(e as Error).message}`;
  }
  if (json) {
    ctx.io.out(JSON.stringify({ file, format, tools, problems: problem ? [problem] : [] }, null, 2) + '\n');
  } else {
    ctx.io.out(`${file}  (${format === 'wasm' ? 'WebAssembly module' : 'ELF'})\n`);
    ctx.io.out(`  tools: ${tools ? tools.join(', ') || 'none' : 'unreadable'}\n`);
    if (problem) ctx.io.err(`berm: ${problem}\n`);
  }
  return problem ? ExitCode.BadInput : ExitCode.Ok;
}

const grantText = (g: Record<string, unknown>): string =>
  Object.entries(g)
    .map(([k, v]) => `${k} = ${JSON.stringify(v)}`)
    .join(', ');

/** Register `check`. */
export function registerCheck(program: Command, ctx: CliContext): void {
  program
    .command('check')
    .description(
      'validate a declaration file (harnesses.toml): list each harness, its tools and grants, and every problem with file:line and the fix',
    )
    .argument('<file>', 'declaration file, or a harness image (an ELF or a WebAssembly module) alone')
    .action((file: string, _opts: unknown, cmd: Command) =>
      ctx.run(cmd, () => {
        const g = ctx.globals(cmd);
        const head = readHead(file);
        if (head !== null && imageKind(head) !== null) return checkImage(ctx, file, g.json === true);
        let decls;
        try {
          decls = loadDeclarations(file);
        } catch (e) {
          if (e instanceof Error && e.name === 'DeclarationError') throw new CliError(e.message);
          throw e;
        }
        const harnesses = decls.harnesses.map(checkHarness);
        const problems = [
          ...decls.errors.map((e) => e.message),
          ...harnesses.flatMap((h) => (h.problem ? [h.problem] : [])),
        ];
        if (g.json) {
          ctx.io.out(JSON.stringify({ file, harnesses, problems }, null, 2) + '\n');
        } else {
          for (const h of harnesses) {
            ctx.io.out(`${h.name}  (${h.source}, line ${h.line})\n`);
            ctx.io.out(`  tools: ${h.tools ? h.tools.join(', ') || 'none' : 'unreadable'}\n`);
            ctx.io.out(`  capabilities: ${h.capabilities.join(', ') || 'none'}\n`);
            if (Object.keys(h.grant).length > 0) ctx.io.out(`  grants: ${grantText(h.grant)}\n`);
          }
          for (const p of problems) ctx.io.err(`berm: ${p}\n`);
          ctx.io.err(
            `berm: ${file}: ${harnesses.length} harness(es) accepted, ${decls.errors.length} refused, ` +
              `${problems.length} problem(s)\n`,
          );
        }
        return problems.length > 0 ? ExitCode.BadInput : ExitCode.Ok;
      }),
    );
}

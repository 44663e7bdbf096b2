/**
 * `berm push REF FILE` and `berm pull REF [-o FILE]`: publish a harness ELF to an OCI registry as
 * a single-layer artifact and fetch it back, verified (see src/oci and docs/oci.md). Push checks
 * the harness's manifest before anything is uploaded; pull verifies every blob's sha256 and that
 * the config blob is the ELF's own `.berm.abi` section before a byte is written.
 */
import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import type { Command } from 'commander';
import { imageKind } from '../../engine/image.js';
import { parseReference, pushHarness } from '../../oci/index.js';
import { CliError, ExitCode, readInputFile } from '../context.js';
import { stdout } from '../output.js';
import type { CliContext } from '../program.js';
import { harnessAbi } from './harness-abi.js';
import { pullChecked, registryCall } from './registry-common.js';

/** Write a file atomically (temporary file in the same directory, then rename). */
function writeAtomic(path: string, bytes: Uint8Array): void {
  const tmp = `${path}.${process.pid}.tmp`;
  try {
    writeFileSync(tmp, bytes, { mode: 0o755 });
    renameSync(tmp, path);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw new CliError(`cannot write ${path}: ${(e as Error).message}`);
  }
}

/**
 * The default output of `pull`: the repository's last path component plus `.wasm` for a
 * WebAssembly module (by its magic bytes), `.elf` otherwise.
 */
export function defaultPullOutput(repository: string, image: Uint8Array): string {
  return `${basename(repository)}.${imageKind(image) === 'wasm' ? 'wasm' : 'elf'}`;
}

/** Register `push` and `pull`. */
export function registerPushPull(program: Command, ctx: CliContext): void {
  program
    .command('push')
    .description(
      'publish a harness ELF to an OCI registry (REF is host[:port]/repo[:tag]; plain http only to localhost)',
    )
    .argument('<ref>', 'registry reference, e.g. ghcr.io/org/name:v1 or 127.0.0.1:5000/name:dev')
    .argument('<file>', 'harness ELF')
    .action((refText: string, file: string, _opts: unknown, cmd: Command) =>
      ctx.run(
        cmd,
        async () => {
          const g = ctx.globals(cmd);
          const ref = await registryCall(async () => parseReference(refText));
          const elf = readInputFile(file);
          const { abi } = harnessAbi(file, elf);
          const r = await registryCall(() => pushHarness(ref, elf, abi));
          if (g.json) {
            ctx.io.out(JSON.stringify({ status: 'ok', ...r, size: elf.length }) + '\n');
          } else {
            ctx.io.out(`${r.reference}\n  digest    ${r.digest}\n  manifest  ${r.manifestDigest}\n`);
            if (g.verbose) {
              const what = (b: boolean): string => (b ? 'uploaded' : 'already present');
              ctx.io.err(`berm: layer ${what(r.uploaded.layer)}, config ${what(r.uploaded.config)}\n`);
            }
          }
          return ExitCode.Ok;
        },
        file,
      ),
    );

  program
    .command('pull')
    .description(
      "fetch a harness from an OCI registry, verified by sha256 (default output: <name>.elf, or <name>.wasm for a WebAssembly module; '-o -' for stdout)",
    )
    .argument('<ref>', 'registry reference, e.g. ghcr.io/org/name:v1 or host/name@sha256:...')
    .option('-o, --output <file>', "where to write the ELF ('-' for stdout)")
    .action((refText: string, opts: { output?: string }, cmd: Command) =>
      ctx.run(cmd, async () => {
        const g = ctx.globals(cmd);
        const ref = await registryCall(async () => parseReference(refText));
        const r = await pullChecked(refText);
        const out = opts.output ?? defaultPullOutput(ref.repository, r.elf);
        if (out === '-') {
          // the ELF's bytes as they are, through the same synchronous stdout as the CLI's text
          stdout.write(r.elf);
          return ExitCode.Ok;
        }
        writeAtomic(out, r.elf);
        if (g.json) {
          ctx.io.out(
            JSON.stringify({
              status: 'ok',
              reference: r.reference,
              digest: r.digest,
              manifestDigest: r.manifestDigest,
              size: r.elf.length,
              file: out,
            }) + '\n',
          );
        } else {
          ctx.io.out(`${r.reference}\n  digest    ${r.digest}\n  written   ${out} (${r.elf.length} bytes)\n`);
        }
        return ExitCode.Ok;
      }),
    );
}

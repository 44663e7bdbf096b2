/**
 * `berm disasm FILE [--function NAME]`: disassemble every guest function (or one) in the text
 * llvm-objdump prints with `-d -M no-aliases --no-show-raw-insn` (same columns), branch targets
 * symbolised by the containing function. With `--wasm`, each instruction is followed by the WAT of
 * the baseline-tier code it was translated to (printed by wabt, indented); with `--wasm --wat`, the
 * translated module as WAT instead (with -f, every other function's body `unreachable`).
 */
import type { Command } from 'commander';
import { readElf } from '../../elf/reader.js';
import { codeBytes, codeSymbolizer } from '../../elf/code.js';
import type { ElfImage } from '../../elf/types.js';
import { disassembleRange } from '../../riscv/disasm.js';
import { CliError, ExitCode, readInputFile } from '../context.js';
import type { CliContext } from '../program.js';

/**
 * Listing of the functions of `image` (all, or those named `only`, matching any alias).
 * @throws CliError when `only` names no function
 */
export function disasmText(image: ElfImage, only?: string): string {
  const fns = image.functions;
  const chosen = only === undefined ? fns : fns.filter((f) => f.names.includes(only));
  if (chosen.length === 0) throw new CliError(`no function named ${only} (see berm inspect --functions)`);
  const symbolize = codeSymbolizer(image);
  const out: string[] = [];
  for (const f of chosen) {
    out.push('', `${f.start.toString(16).padStart(16, '0')} <${f.name}>:`);
    const bytes = codeBytes(image, f.start, f.size);
    if (!bytes) {
      out.push('\t(no file bytes)');
      continue;
    }
    for (const l of disassembleRange(bytes, f.start, symbolize)) {
      out.push(guestLine(l.address, l.text));
    }
  }
  return out.join('\n').replace(/^\n/, '') + '\n';
}

/** An instruction's line in the listing (the columns of {@link disasmText}). */
function guestLine(address: number, text: string): string {
  return `${address.toString(16).padStart(8)}:      \t${text}`;
}

/**
 * The `--wasm` listing: {@link disasmText}'s lines, each instruction followed by its WAT lines
 * (indented by 16 spaces); with `wat`, the module's WAT as wabt prints it.
 * @throws CliError when `only` names no function; what translation throws
 */
export async function disasmWasmText(
  image: ElfImage,
  only: string | undefined,
  wat: boolean,
): Promise<string> {
  const { CodeListing } = await import('../../translate/listing.js');
  const listing = await CodeListing.build(image);
  const chosen =
    only === undefined ? listing.functions : listing.functions.filter((f) => f.names.includes(only));
  if (chosen.length === 0) throw new CliError(`no function named ${only} (see berm inspect --functions)`);
  if (wat) return listing.moduleText(chosen);
  const out: string[] = [];
  for (const f of listing.list(chosen)) {
    out.push('', `${f.pc.toString(16).padStart(16, '0')} <${f.name}>:`);
    if (f.rows.length === 0) out.push('\t(no file bytes)');
    for (const r of f.rows) {
      out.push(guestLine(r.pc, r.asm));
      for (const w of r.wat) out.push(' '.repeat(16) + w);
    }
  }
  return out.join('\n').replace(/^\n/, '') + '\n';
}

/** Register `disasm`. */
export function registerDisasm(program: Command, ctx: CliContext): void {
  program
    .command('disasm')
    .description('disassemble guest functions (llvm-objdump -d -M no-aliases style)')
    .argument('<file>', 'ELF')
    .option('-f, --function <name>', 'only this function')
    .option('--wasm', 'each instruction followed by the WebAssembly (WAT) it was translated to')
    .option('--wat', "with --wasm: the translated module's WAT (with -f, that function's body only)")
    .action((file: string, opts: { function?: string; wasm?: boolean; wat?: boolean }, cmd: Command) =>
      ctx.run(
        cmd,
        async () => {
          if (opts.wat && !opts.wasm) throw new CliError('--wat needs --wasm');
          const image = readElf(readInputFile(file));
          ctx.io.out(
            opts.wasm
              ? await disasmWasmText(image, opts.function, !!opts.wat)
              : disasmText(image, opts.function),
          );
          return ExitCode.Ok;
        },
        file,
      ),
    );
}

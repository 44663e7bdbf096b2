/**
 * `berm disasm FILE [--function NAME]`: disassemble every guest function (or one) in the text
 * llvm-objdump prints with `-d -M no-aliases --no-show-raw-insn` (same columns), branch targets
 * symbolised by the containing function.
 */
import type { Command } from 'commander';
import { readElf } from '../../elf/reader.js';
import type { ElfImage, GuestFunction } from '../../elf/types.js';
import { disassembleRange } from '../../riscv/disasm.js';
import { CliError, ExitCode, readInputFile } from '../context.js';
import type { CliContext } from '../program.js';

/** The function containing `address`, or null (functions are sorted and disjoint). */
function functionAt(fns: GuestFunction[], address: number): GuestFunction | null {
  let lo = 0;
  let hi = fns.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const f = fns[mid];
    if (address < f.start) hi = mid - 1;
    else if (address >= f.start + f.size) lo = mid + 1;
    else return f;
  }
  return null;
}

/** The file bytes of [start, start + size), or null when no segment holds them all. */
function codeBytes(image: ElfImage, start: number, size: number): Uint8Array | null {
  for (const s of image.segments) {
    if (start >= s.vaddr && start + size <= s.vaddr + s.filesz) {
      return s.data.subarray(start - s.vaddr, start - s.vaddr + size);
    }
  }
  return null;
}

/**
 * Listing of the functions of `image` (all, or those named `only`, matching any alias).
 * @throws CliError when `only` names no function
 */
export function disasmText(image: ElfImage, only?: string): string {
  const fns = image.functions;
  const chosen = only === undefined ? fns : fns.filter((f) => f.names.includes(only));
  if (chosen.length === 0) throw new CliError(`no function named ${only} (see berm inspect --functions)`);
  const symbolize = (a: number): string | null => {
    const f = functionAt(fns, a);
    if (!f) return null;
    return a === f.start ? f.name : `${f.name}+0x${(a - f.start).toString(16)}`;
  };
  const out: string[] = [];
  for (const f of chosen) {
    out.push('', `${f.start.toString(16).padStart(16, '0')} <${f.name}>:`);
    const bytes = codeBytes(image, f.start, f.size);
    if (!bytes) {
      out.push('\t(no file bytes)');
      continue;
    }
    for (const l of disassembleRange(bytes, f.start, symbolize)) {
      out.push(`${l.address.toString(16).padStart(8)}:      \t${l.text}`);
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
    .action((file: string, opts: { function?: string }, cmd: Command) =>
      ctx.run(
        cmd,
        () => {
          ctx.io.out(disasmText(readElf(readInputFile(file)), opts.function));
          return ExitCode.Ok;
        },
        file,
      ),
    );
}

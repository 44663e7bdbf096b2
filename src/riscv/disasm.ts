/**
 * Disassembler producing the text llvm-objdump 14 prints with `-d -M no-aliases --no-show-raw-insn`
 * for RV64IMAC, so that listings can be compared with LLVM's line by line (test/golden/).
 *
 * Formatting rules matched (LLVM RISCVInstPrinter with llvm-objdump's settings):
 * - `mnemonic<TAB>operands`, operands separated by ", "; registers by ABI name (x8 is `s0`).
 *   Instructions without operands are just the mnemonic: llvm-objdump emits a trailing tab there,
 *   which this module leaves out (the golden test trims trailing whitespace on both sides).
 * - Compressed instructions print in their compressed form (`c.addi a0, 1`, `c.lwsp a0, 12(sp)`,
 *   `c.lui a0, 1048575`), with LLVM's HINT spellings `c.slli64`, `c.srli64`, `c.srai64` for a zero
 *   shift amount and `c.nop imm` for a non-zero c.nop immediate.
 * - Immediates in signed decimal; lui/auipc/c.lui print the unsigned 20-bit field in decimal.
 * - Branch and jump targets print as absolute addresses `0x<hex>` (pc + offset, lowercase, no
 *   padding), followed by ` <symbol+0xoff>` when a symbolizer is given.
 * - CSRs by LLVM's name table (csr-names.ts), else decimal; fence sets as `iorw` letters, an empty
 *   set as `unknown`; `fence.tso` for fm=1000 rw,rw.
 * - Illegal encodings print `<unknown>`, except the all-zero halfword, `c.unimp`. Fences with
 *   non-zero reserved fields (which the decoder accepts, as the spec asks) also print `<unknown>`.
 */
import { CSR_NAMES } from './csr-names.js';
import { decode } from './decode.js';
import type { Instr } from './instr.js';
import { COMPRESSED, ENTRY, type CLayout, type Syntax } from './isa.js';

/** ABI register names indexed by register number (RISC-V psABI, "Integer Register Convention"). */
export const REG_NAMES: readonly string[] = [
  'zero', 'ra', 'sp', 'gp', 'tp', 't0', 't1', 't2', 's0', 's1', 'a0', 'a1', 'a2', 'a3', 'a4', 'a5',
  'a6', 'a7', 's2', 's3', 's4', 's5', 's6', 's7', 's8', 's9', 's10', 's11', 't3', 't4', 't5', 't6',
]; // prettier-ignore

/**
 * Names a code address for ` <...>` annotations of branch targets, as llvm-objdump does
 * (`sym` or `sym+0x1c`); returns null to print the bare address.
 */
export type Symbolizer = (address: number) => string | null;

const r = (n: number): string => REG_NAMES[n];

function hex(n: number): string {
  // a target below 0 wraps like the 64-bit pc does (llvm prints 0xfffffffffffdfe9c)
  return '0x' + (n >= 0 ? n.toString(16) : BigInt.asUintN(64, BigInt(n)).toString(16));
}

function target(pc: number, imm: number, symbolize?: Symbolizer): string {
  const addr = pc + imm;
  const s = symbolize?.(addr);
  return s ? `${hex(addr)} <${s}>` : hex(addr);
}

function fenceSet(bits: number): string {
  if (bits === 0) return 'unknown';
  return (bits & 8 ? 'i' : '') + (bits & 4 ? 'o' : '') + (bits & 2 ? 'r' : '') + (bits & 1 ? 'w' : '');
}

function csrName(n: number): string {
  return CSR_NAMES.get(n) ?? String(n);
}

function amoSuffix(i: Instr): string {
  return i.aq ? (i.rl ? '.aqrl' : '.aq') : i.rl ? '.rl' : '';
}

type Printer = (i: Instr, pc: number, symbolize: Symbolizer | undefined) => string;

/** Operands of each 32-bit syntax (isa.ts `syntax`), after the mnemonic and a tab. */
const OPERANDS: Readonly<Record<Syntax, Printer>> = {
  'rd, upper': (i) => `${r(i.rd)}, ${(i.imm >>> 12) & 0xfffff}`,
  'rd, target': (i, pc, sym) => `${r(i.rd)}, ${target(pc, i.imm, sym)}`,
  'rd, imm(rs1)': (i) => `${r(i.rd)}, ${i.imm}(${r(i.rs1)})`,
  'rs1, rs2, target': (i, pc, sym) => `${r(i.rs1)}, ${r(i.rs2)}, ${target(pc, i.imm, sym)}`,
  'rs2, imm(rs1)': (i) => `${r(i.rs2)}, ${i.imm}(${r(i.rs1)})`,
  'rd, rs1, imm': (i) => `${r(i.rd)}, ${r(i.rs1)}, ${i.imm}`,
  'rd, rs1, rs2': (i) => `${r(i.rd)}, ${r(i.rs1)}, ${r(i.rs2)}`,
  fence: (i) => `${fenceSet((i.imm >>> 4) & 15)}, ${fenceSet(i.imm & 15)}`,
  'fence.i': () => '',
  none: () => '',
  'rd, csr, rs1': (i) => `${r(i.rd)}, ${csrName(i.imm)}, ${r(i.rs1)}`,
  'rd, csr, uimm': (i) => `${r(i.rd)}, ${csrName(i.imm)}, ${i.rs1}`,
  'rd, (rs1)': (i) => `${r(i.rd)}, (${r(i.rs1)})`,
  'rd, rs2, (rs1)': (i) => `${r(i.rd)}, ${r(i.rs2)}, (${r(i.rs1)})`,
};

/** Operands of each compressed layout (isa.ts `layout`), after the compressed mnemonic and a tab. */
const C_OPERANDS: Readonly<Record<CLayout, Printer>> = {
  'ciw-addi4spn': (i) => `${r(i.rd)}, sp, ${i.imm}`,
  'cl-w': (i) => `${r(i.rd)}, ${i.imm}(${r(i.rs1)})`,
  'cl-d': (i) => `${r(i.rd)}, ${i.imm}(${r(i.rs1)})`,
  'cs-w': (i) => `${r(i.rs2)}, ${i.imm}(${r(i.rs1)})`,
  'cs-d': (i) => `${r(i.rs2)}, ${i.imm}(${r(i.rs1)})`,
  // LLVM prints a HINT c.nop's immediate
  'ci-nop': (i) => (i.imm === 0 ? '' : `${i.imm}`),
  ci: (i) => `${r(i.rd)}, ${i.imm}`,
  'ci-li': (i) => `${r(i.rd)}, ${i.imm}`,
  'ci-addi16sp': (i) => `sp, ${i.imm}`,
  // LLVM's HINT form (rd = x0) prints the signed 6-bit field
  'ci-lui': (i) => (i.rd === 0 ? `zero, ${i.imm / 4096}` : `${r(i.rd)}, ${(i.imm >>> 12) & 0xfffff}`),
  'cb-shift': (i) => `${r(i.rd)}, ${i.imm}`,
  'cb-andi': (i) => `${r(i.rd)}, ${i.imm}`,
  ca: (i) => `${r(i.rd)}, ${r(i.rs2)}`,
  cj: (i, pc, sym) => target(pc, i.imm, sym),
  'cb-branch': (i, pc, sym) => `${r(i.rs1)}, ${target(pc, i.imm, sym)}`,
  'ci-slli': (i) => `${r(i.rd)}, ${i.imm}`,
  'ci-lwsp': (i) => `${r(i.rd)}, ${i.imm}(${r(i.rs1)})`,
  'ci-ldsp': (i) => `${r(i.rd)}, ${i.imm}(${r(i.rs1)})`,
  'cr-jr': (i) => r(i.rs1),
  'cr-mv': (i) => `${r(i.rd)}, ${r(i.rs2)}`,
  'cr-ebreak': () => '',
  'cr-jalr': (i) => r(i.rs1),
  'cr-add': (i) => `${r(i.rd)}, ${r(i.rs2)}`,
  'css-w': (i) => `${r(i.rs2)}, ${i.imm}(${r(i.rs1)})`,
  'css-d': (i) => `${r(i.rs2)}, ${i.imm}(${r(i.rs1)})`,
};

const C_LAYOUT = new Map<string, CLayout>(COMPRESSED.map((e) => [e.name, e.layout]));

function withOperands(mnemonic: string, operands: string): string {
  return operands === '' ? mnemonic : `${mnemonic}\t${operands}`;
}

/**
 * Render one decoded instruction as llvm-objdump 14 does (rules in the module comment).
 *
 * @param instr a result of {@link decode}
 * @param pc the instruction's address, used for branch and jump targets (a number below 2^32)
 * @param symbolize optional namer for branch/jump targets
 * @returns the text after the address column, e.g. `addi\ta0, a1, -3` or `jal\tra, 0x11234`
 */
export function disassemble(instr: Instr, pc: number, symbolize?: Symbolizer): string {
  if (instr.size === 2) return disassembleCompressed(instr, pc, symbolize);
  const { op, rd, rs1, imm } = instr;
  if (op === 'illegal') return '<unknown>';
  const e = ENTRY[op];
  switch (e.syntax) {
    case 'fence':
      // LLVM only knows fm=0000 and fence.tso, and requires the reserved rd/rs1 to be zero
      if (rd !== 0 || rs1 !== 0) return '<unknown>';
      if (imm === 0x833) return 'fence.tso';
      if (imm >>> 8 !== 0) return '<unknown>';
      break;
    case 'fence.i':
      if (rd !== 0 || rs1 !== 0 || imm !== 0) return '<unknown>';
      break;
    case 'rd, (rs1)':
    case 'rd, rs2, (rs1)':
      return withOperands(op + amoSuffix(instr), OPERANDS[e.syntax](instr, pc, symbolize));
  }
  return withOperands(op, OPERANDS[e.syntax](instr, pc, symbolize));
}

function disassembleCompressed(instr: Instr, pc: number, symbolize?: Symbolizer): string {
  const c = instr.compressed;
  if (c === undefined) {
    if (instr.bits === 0) return 'c.unimp';
    // LLVM 14 accepts c.lui with nzimm = 0 (reserved by the spec, illegal to berm) and prints it
    // as `c.lui rd, 0`; rd = sp is c.addi16sp's reserved zero immediate, which LLVM rejects.
    if ((instr.bits & 0xf07f) === 0x6001 && ((instr.bits >>> 7) & 31) !== 2) {
      return `c.lui\t${r((instr.bits >>> 7) & 31)}, 0`;
    }
    return '<unknown>';
  }
  const layout = C_LAYOUT.get(c)!;
  // LLVM's HINT spellings for a zero shift amount: c.slli64, c.srli64, c.srai64
  if ((layout === 'cb-shift' || layout === 'ci-slli') && instr.imm === 0) return `${c}64\t${r(instr.rd)}`;
  return withOperands(c, C_OPERANDS[layout](instr, pc, symbolize));
}

/** One line of {@link disassembleRange}: the instruction's address, size and text. */
export interface ListingLine {
  address: number;
  size: 2 | 4;
  text: string;
}

/**
 * Disassemble consecutive instructions the way llvm-objdump walks a code section: from `startPc`,
 * advancing by each instruction's size (an illegal 32-bit-looking encoding advances 4 bytes). A
 * final lone halfword that announces a 32-bit instruction becomes `<unknown>` of size 2.
 *
 * @param bytes the code, little-endian; bytes[0] is at `startPc`
 * @param startPc guest address of bytes[0]
 * @param symbolize optional namer for branch/jump targets
 */
export function disassembleRange(bytes: Uint8Array, startPc: number, symbolize?: Symbolizer): ListingLine[] {
  const out: ListingLine[] = [];
  let i = 0;
  while (i + 1 < bytes.length) {
    const lo = bytes[i] | (bytes[i + 1] << 8);
    if ((lo & 3) === 3 && i + 3 >= bytes.length) {
      out.push({ address: startPc + i, size: 2, text: '<unknown>' });
      break;
    }
    const bits = (lo & 3) === 3 ? (lo | (bytes[i + 2] << 16) | (bytes[i + 3] << 24)) >>> 0 : lo;
    const instr = decode(bits);
    out.push({ address: startPc + i, size: instr.size, text: disassemble(instr, startPc + i, symbolize) });
    i += instr.size;
  }
  return out;
}

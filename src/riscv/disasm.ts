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

/**
 * Render one decoded instruction as llvm-objdump 14 does (rules in the module comment).
 *
 * @param instr a result of {@link decode}
 * @param pc the instruction's address, used for branch and jump targets (a number below 2^32)
 * @param symbolize optional namer for branch/jump targets
 * @returns the text after the address column, e.g. `addi\ta0, a1, -3` or `jal\tra, 0x11234`
 */
export function disassemble(instr: Instr, pc: number, symbolize?: Symbolizer): string {
  const { op, rd, rs1, rs2, imm } = instr;
  if (instr.size === 2) return disassembleCompressed(instr, pc, symbolize);
  switch (op) {
    case 'illegal':
      return '<unknown>';
    case 'lui':
    case 'auipc':
      return `${op}\t${r(rd)}, ${(imm >>> 12) & 0xfffff}`;
    case 'jal':
      return `jal\t${r(rd)}, ${target(pc, imm, symbolize)}`;
    case 'jalr':
      return `jalr\t${r(rd)}, ${imm}(${r(rs1)})`;
    case 'beq':
    case 'bne':
    case 'blt':
    case 'bge':
    case 'bltu':
    case 'bgeu':
      return `${op}\t${r(rs1)}, ${r(rs2)}, ${target(pc, imm, symbolize)}`;
    case 'lb':
    case 'lh':
    case 'lw':
    case 'ld':
    case 'lbu':
    case 'lhu':
    case 'lwu':
      return `${op}\t${r(rd)}, ${imm}(${r(rs1)})`;
    case 'sb':
    case 'sh':
    case 'sw':
    case 'sd':
      return `${op}\t${r(rs2)}, ${imm}(${r(rs1)})`;
    case 'addi':
    case 'slti':
    case 'sltiu':
    case 'xori':
    case 'ori':
    case 'andi':
    case 'slli':
    case 'srli':
    case 'srai':
    case 'addiw':
    case 'slliw':
    case 'srliw':
    case 'sraiw':
      return `${op}\t${r(rd)}, ${r(rs1)}, ${imm}`;
    case 'fence': {
      // LLVM only knows fm=0000 and fence.tso, and requires the reserved rd/rs1 to be zero
      if (rd !== 0 || rs1 !== 0) return '<unknown>';
      if (imm === 0x833) return 'fence.tso';
      if (imm >>> 8 !== 0) return '<unknown>';
      return `fence\t${fenceSet((imm >>> 4) & 15)}, ${fenceSet(imm & 15)}`;
    }
    case 'fence.i':
      return rd !== 0 || rs1 !== 0 || imm !== 0 ? '<unknown>' : 'fence.i';
    case 'ecall':
    case 'ebreak':
      return op;
    case 'csrrw':
    case 'csrrs':
    case 'csrrc':
      return `${op}\t${r(rd)}, ${csrName(imm)}, ${r(rs1)}`;
    case 'csrrwi':
    case 'csrrsi':
    case 'csrrci':
      return `${op}\t${r(rd)}, ${csrName(imm)}, ${rs1}`;
  }
  if (instr.aq !== undefined) {
    if (op.startsWith('lr.')) return `${op}${amoSuffix(instr)}\t${r(rd)}, (${r(rs1)})`;
    return `${op}${amoSuffix(instr)}\t${r(rd)}, ${r(rs2)}, (${r(rs1)})`;
  }
  // register-register ALU (RV64I OP/OP-32 and M)
  return `${op}\t${r(rd)}, ${r(rs1)}, ${r(rs2)}`;
}

function disassembleCompressed(instr: Instr, pc: number, symbolize?: Symbolizer): string {
  const { rd, rs1, rs2, imm } = instr;
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
  switch (c) {
    case 'c.addi4spn':
      return `${c}\t${r(rd)}, sp, ${imm}`;
    case 'c.lw':
    case 'c.ld':
    case 'c.lwsp':
    case 'c.ldsp':
      return `${c}\t${r(rd)}, ${imm}(${r(rs1)})`;
    case 'c.sw':
    case 'c.sd':
    case 'c.swsp':
    case 'c.sdsp':
      return `${c}\t${r(rs2)}, ${imm}(${r(rs1)})`;
    case 'c.nop':
      return imm === 0 ? c : `${c}\t${imm}`;
    case 'c.addi':
    case 'c.addiw':
    case 'c.li':
    case 'c.andi':
      return `${c}\t${r(rd)}, ${imm}`;
    case 'c.addi16sp':
      return `${c}\tsp, ${imm}`;
    case 'c.lui':
      // LLVM's HINT form (rd = x0) prints the signed 6-bit field
      return rd === 0 ? `${c}\tzero, ${imm / 4096}` : `${c}\t${r(rd)}, ${(imm >>> 12) & 0xfffff}`;
    case 'c.srli':
    case 'c.srai':
    case 'c.slli':
      return imm === 0 ? `${c}64\t${r(rd)}` : `${c}\t${r(rd)}, ${imm}`;
    case 'c.sub':
    case 'c.xor':
    case 'c.or':
    case 'c.and':
    case 'c.subw':
    case 'c.addw':
    case 'c.mv':
    case 'c.add':
      return `${c}\t${r(rd)}, ${r(rs2)}`;
    case 'c.j':
      return `${c}\t${target(pc, imm, symbolize)}`;
    case 'c.beqz':
    case 'c.bnez':
      return `${c}\t${r(rs1)}, ${target(pc, imm, symbolize)}`;
    case 'c.jr':
    case 'c.jalr':
      return `${c}\t${r(rs1)}`;
    case 'c.ebreak':
      return c;
  }
  return '<unknown>';
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

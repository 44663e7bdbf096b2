/**
 * RV64IMAC instruction decoder (RISC-V unprivileged ISA spec, chapters RV32I/RV64I, "M", "A", "C",
 * "Zicsr", "Zifencei"; RV64C quadrant tables "RVC Instruction Set Listings").
 *
 * Compressed instructions are expanded to the base instruction they stand for. Encodings the spec
 * marks reserved (for example c.addi16sp with nzimm = 0, c.lui with nzimm = 0, c.addiw / c.lwsp /
 * c.ldsp with rd = x0, c.jr with rs1 = x0) and every encoding outside RV64IMAC (F/D, privileged
 * instructions other than ecall/ebreak, 48-bit and longer formats) decode to op 'illegal'. HINT
 * encodings (for example c.li x0, imm or c.slli with shamt 0) are legal instructions whose expansion
 * has no architectural effect, so they decode to that expansion.
 */
import type { Instr } from './instr.js';

// One object literal shape for every result keeps property access monomorphic in the translator.
function mk(
  op: string,
  rd: number,
  rs1: number,
  rs2: number,
  imm: number,
  size: 2 | 4,
  bits: number,
  compressed: string | undefined,
): Instr {
  return { op, rd, rs1, rs2, imm, size, bits, compressed, aq: undefined, rl: undefined };
}

function illegal(bits: number, size: 2 | 4): Instr {
  return mk('illegal', 0, 0, 0, 0, size, bits, undefined);
}

const LOADS = ['lb', 'lh', 'lw', 'ld', 'lbu', 'lhu', 'lwu', ''];
const STORES = ['sb', 'sh', 'sw', 'sd', '', '', '', ''];
const BRANCHES = ['beq', 'bne', '', '', 'blt', 'bge', 'bltu', 'bgeu'];
const OP_IMM = ['addi', '', 'slti', 'sltiu', 'xori', '', 'ori', 'andi'];
const OP_BASE = ['add', 'sll', 'slt', 'sltu', 'xor', 'srl', 'or', 'and'];
const OP_MUL = ['mul', 'mulh', 'mulhsu', 'mulhu', 'div', 'divu', 'rem', 'remu'];
const OP32_MUL = ['mulw', '', '', '', 'divw', 'divuw', 'remw', 'remuw'];
const CSR_OPS = ['', 'csrrw', 'csrrs', 'csrrc', '', 'csrrwi', 'csrrsi', 'csrrci'];
// Indexed by funct5 (bits 31:27) of the AMO major opcode; '' marks reserved values.
const AMO = new Array<string>(32).fill('');
AMO[0x00] = 'amoadd';
AMO[0x01] = 'amoswap';
AMO[0x02] = 'lr';
AMO[0x03] = 'sc';
AMO[0x04] = 'amoxor';
AMO[0x08] = 'amoor';
AMO[0x0c] = 'amoand';
AMO[0x10] = 'amomin';
AMO[0x14] = 'amomax';
AMO[0x18] = 'amominu';
AMO[0x1c] = 'amomaxu';

/**
 * Decode one instruction.
 *
 * @param bits the little-endian bytes at the pc read as a number: the low 32 bits. When
 *   `bits & 3 !== 3` the instruction is 16-bit and only the low half is used, so it is safe to pass
 *   a halfword (the upper half zero) for the last instruction of a region.
 * @returns the decoded instruction (see {@link Instr} for the meaning of each field; `size` says
 *   how far to advance). Reserved and illegal encodings give op 'illegal' with the raw bits; this
 *   function never throws.
 */
export function decode(bits: number): Instr {
  if ((bits & 3) !== 3) return decodeCompressed(bits & 0xffff);
  return decode32(bits >>> 0);
}

function decode32(w: number): Instr {
  const opcode = w & 0x7f;
  const rd = (w >>> 7) & 31;
  const f3 = (w >>> 12) & 7;
  const rs1 = (w >>> 15) & 31;
  const rs2 = (w >>> 20) & 31;
  const f7 = w >>> 25;
  const immI = w >> 20;
  switch (opcode) {
    case 0x37:
      return mk('lui', rd, 0, 0, (w & 0xfffff000) | 0, 4, w, undefined);
    case 0x17:
      return mk('auipc', rd, 0, 0, (w & 0xfffff000) | 0, 4, w, undefined);
    case 0x6f: {
      const imm =
        ((w >> 11) & 0xfff00000) | // imm[20] sign
        (w & 0xff000) | // imm[19:12]
        ((w >>> 9) & 0x800) | // imm[11]
        ((w >>> 20) & 0x7fe); // imm[10:1]
      return mk('jal', rd, 0, 0, imm, 4, w, undefined);
    }
    case 0x67:
      if (f3 !== 0) break;
      return mk('jalr', rd, rs1, 0, immI, 4, w, undefined);
    case 0x63: {
      const op = BRANCHES[f3];
      if (op === '') break;
      const imm =
        ((w >> 19) & 0xfffff000) | // imm[12] sign
        ((w << 4) & 0x800) | // imm[11]
        ((w >>> 20) & 0x7e0) | // imm[10:5]
        ((w >>> 7) & 0x1e); // imm[4:1]
      return mk(op, 0, rs1, rs2, imm, 4, w, undefined);
    }
    case 0x03: {
      const op = LOADS[f3];
      if (op === '') break;
      return mk(op, rd, rs1, 0, immI, 4, w, undefined);
    }
    case 0x23: {
      const op = STORES[f3];
      if (op === '') break;
      return mk(op, 0, rs1, rs2, ((w >> 20) & ~31) | rd, 4, w, undefined);
    }
    case 0x13: {
      if (f3 === 1) {
        // RV64: shamt is 6 bits, imm[11:6] must be zero
        if (w >>> 26 !== 0) break;
        return mk('slli', rd, rs1, 0, (w >>> 20) & 63, 4, w, undefined);
      }
      if (f3 === 5) {
        const hi = w >>> 26;
        if (hi === 0) return mk('srli', rd, rs1, 0, (w >>> 20) & 63, 4, w, undefined);
        if (hi === 0x10) return mk('srai', rd, rs1, 0, (w >>> 20) & 63, 4, w, undefined);
        break;
      }
      return mk(OP_IMM[f3], rd, rs1, 0, immI, 4, w, undefined);
    }
    case 0x1b:
      if (f3 === 0) return mk('addiw', rd, rs1, 0, immI, 4, w, undefined);
      if (f3 === 1 && f7 === 0) return mk('slliw', rd, rs1, 0, rs2, 4, w, undefined);
      if (f3 === 5 && f7 === 0) return mk('srliw', rd, rs1, 0, rs2, 4, w, undefined);
      if (f3 === 5 && f7 === 0x20) return mk('sraiw', rd, rs1, 0, rs2, 4, w, undefined);
      break;
    case 0x33:
      if (f7 === 0) return mk(OP_BASE[f3], rd, rs1, rs2, 0, 4, w, undefined);
      if (f7 === 1) return mk(OP_MUL[f3], rd, rs1, rs2, 0, 4, w, undefined);
      if (f7 === 0x20) {
        if (f3 === 0) return mk('sub', rd, rs1, rs2, 0, 4, w, undefined);
        if (f3 === 5) return mk('sra', rd, rs1, rs2, 0, 4, w, undefined);
      }
      break;
    case 0x3b:
      if (f7 === 0) {
        if (f3 === 0) return mk('addw', rd, rs1, rs2, 0, 4, w, undefined);
        if (f3 === 1) return mk('sllw', rd, rs1, rs2, 0, 4, w, undefined);
        if (f3 === 5) return mk('srlw', rd, rs1, rs2, 0, 4, w, undefined);
      } else if (f7 === 0x20) {
        if (f3 === 0) return mk('subw', rd, rs1, rs2, 0, 4, w, undefined);
        if (f3 === 5) return mk('sraw', rd, rs1, rs2, 0, 4, w, undefined);
      } else if (f7 === 1) {
        const op = OP32_MUL[f3];
        if (op !== '') return mk(op, rd, rs1, rs2, 0, 4, w, undefined);
      }
      break;
    case 0x0f:
      // The spec tells base implementations to ignore the reserved rd/rs1 (and fence.i imm) fields
      // and to treat unknown fm values as a plain fence, so they are not illegal here.
      if (f3 === 0) return mk('fence', rd, rs1, 0, w >>> 20, 4, w, undefined);
      if (f3 === 1) return mk('fence.i', rd, rs1, 0, immI, 4, w, undefined);
      break;
    case 0x73: {
      if (f3 === 0) {
        if (w === 0x00000073) return mk('ecall', 0, 0, 0, 0, 4, w, undefined);
        if (w === 0x00100073) return mk('ebreak', 0, 0, 0, 0, 4, w, undefined);
        break;
      }
      const op = CSR_OPS[f3];
      if (op === '') break;
      return mk(op, rd, rs1, 0, w >>> 20, 4, w, undefined);
    }
    case 0x2f: {
      if (f3 !== 2 && f3 !== 3) break;
      const base = AMO[w >>> 27];
      if (base === '' || (base === 'lr' && rs2 !== 0)) break;
      const r = mk(base + (f3 === 2 ? '.w' : '.d'), rd, rs1, rs2, 0, 4, w, undefined);
      r.aq = ((w >>> 26) & 1) === 1;
      r.rl = ((w >>> 25) & 1) === 1;
      return r;
    }
  }
  return illegal(w, 4);
}

function decodeCompressed(h: number): Instr {
  const f3 = h >>> 13;
  // rd'/rs1' at bits 9:7, rd'/rs2' at bits 4:2 name x8..x15
  const rp1 = 8 + ((h >>> 7) & 7);
  const rp2 = 8 + ((h >>> 2) & 7);
  const r1 = (h >>> 7) & 31;
  const r2 = (h >>> 2) & 31;
  // imm[5] at bit 12, imm[4:0] at bits 6:2, sign-extended from bit 5
  const imm6 = (((h >>> 7) & 0x20) | ((h >>> 2) & 31)) - ((h >>> 7) & 0x20) * 2;
  switch (h & 3) {
    case 0:
      switch (f3) {
        case 0: {
          // nzuimm[5:4|9:6|2|3]
          const imm = ((h >>> 7) & 0x30) | ((h >>> 1) & 0x3c0) | ((h >>> 4) & 4) | ((h >>> 2) & 8);
          if (imm === 0) break;
          return mk('addi', rp2, 2, 0, imm, 2, h, 'c.addi4spn');
        }
        case 2:
          return mk('lw', rp2, rp1, 0, cLwImm(h), 2, h, 'c.lw');
        case 3:
          return mk('ld', rp2, rp1, 0, cLdImm(h), 2, h, 'c.ld');
        case 6:
          return mk('sw', 0, rp1, rp2, cLwImm(h), 2, h, 'c.sw');
        case 7:
          return mk('sd', 0, rp1, rp2, cLdImm(h), 2, h, 'c.sd');
      }
      // 1, 5: c.fld/c.fsd (D extension); 4: reserved
      return illegal(h, 2);
    case 1:
      switch (f3) {
        case 0:
          if (r1 === 0) return mk('addi', 0, 0, 0, imm6, 2, h, 'c.nop');
          return mk('addi', r1, r1, 0, imm6, 2, h, 'c.addi');
        case 1:
          // RV32's c.jal; on RV64 c.addiw, reserved with rd = x0
          if (r1 === 0) break;
          return mk('addiw', r1, r1, 0, imm6, 2, h, 'c.addiw');
        case 2:
          return mk('addi', r1, 0, 0, imm6, 2, h, 'c.li');
        case 3: {
          if (r1 === 2) {
            // nzimm[9] at bit 12, nzimm[4|6|8:7|5] at bits 6:2
            const raw =
              ((h >>> 3) & 0x200) |
              ((h >>> 2) & 0x10) |
              ((h << 1) & 0x40) |
              ((h << 4) & 0x180) |
              ((h << 3) & 0x20);
            if (raw === 0) break;
            return mk('addi', 2, 2, 0, raw - (raw & 0x200) * 2, 2, h, 'c.addi16sp');
          }
          if (imm6 === 0) break;
          return mk('lui', r1, 0, 0, imm6 * 4096, 2, h, 'c.lui');
        }
        case 4: {
          const shamt = ((h >>> 7) & 0x20) | ((h >>> 2) & 31);
          switch ((h >>> 10) & 3) {
            case 0:
              return mk('srli', rp1, rp1, 0, shamt, 2, h, 'c.srli');
            case 1:
              return mk('srai', rp1, rp1, 0, shamt, 2, h, 'c.srai');
            case 2:
              return mk('andi', rp1, rp1, 0, imm6, 2, h, 'c.andi');
          }
          const f = (h >>> 5) & 3;
          if ((h & 0x1000) === 0) {
            if (f === 0) return mk('sub', rp1, rp1, rp2, 0, 2, h, 'c.sub');
            if (f === 1) return mk('xor', rp1, rp1, rp2, 0, 2, h, 'c.xor');
            if (f === 2) return mk('or', rp1, rp1, rp2, 0, 2, h, 'c.or');
            return mk('and', rp1, rp1, rp2, 0, 2, h, 'c.and');
          }
          if (f === 0) return mk('subw', rp1, rp1, rp2, 0, 2, h, 'c.subw');
          if (f === 1) return mk('addw', rp1, rp1, rp2, 0, 2, h, 'c.addw');
          break;
        }
        case 5: {
          // offset[11|4|9:8|10|6|7|3:1|5] at bits 12:2
          const raw =
            ((h >>> 1) & 0x800) |
            ((h >>> 7) & 0x10) |
            ((h >>> 1) & 0x300) |
            ((h << 2) & 0x400) |
            ((h >>> 1) & 0x40) |
            ((h << 1) & 0x80) |
            ((h >>> 2) & 0xe) |
            ((h << 3) & 0x20);
          return mk('jal', 0, 0, 0, raw - (raw & 0x800) * 2, 2, h, 'c.j');
        }
        default: {
          // c.beqz / c.bnez: offset[8|4:3] at bits 12:10, offset[7:6|2:1|5] at bits 6:2
          const raw =
            ((h >>> 4) & 0x100) |
            ((h >>> 7) & 0x18) |
            ((h << 1) & 0xc0) |
            ((h >>> 2) & 6) |
            ((h << 3) & 0x20);
          const imm = raw - (raw & 0x100) * 2;
          if (f3 === 6) return mk('beq', 0, rp1, 0, imm, 2, h, 'c.beqz');
          return mk('bne', 0, rp1, 0, imm, 2, h, 'c.bnez');
        }
      }
      return illegal(h, 2);
    case 2:
      switch (f3) {
        case 0:
          return mk('slli', r1, r1, 0, ((h >>> 7) & 0x20) | r2, 2, h, 'c.slli');
        case 2:
          if (r1 === 0) break;
          // uimm[5] at bit 12, uimm[4:2|7:6] at bits 6:2
          return mk(
            'lw',
            r1,
            2,
            0,
            ((h >>> 7) & 0x20) | ((h >>> 2) & 0x1c) | ((h << 4) & 0xc0),
            2,
            h,
            'c.lwsp',
          );
        case 3:
          if (r1 === 0) break;
          // uimm[5] at bit 12, uimm[4:3|8:6] at bits 6:2
          return mk(
            'ld',
            r1,
            2,
            0,
            ((h >>> 7) & 0x20) | ((h >>> 2) & 0x18) | ((h << 4) & 0x1c0),
            2,
            h,
            'c.ldsp',
          );
        case 4:
          if ((h & 0x1000) === 0) {
            if (r2 !== 0) return mk('add', r1, 0, r2, 0, 2, h, 'c.mv');
            if (r1 === 0) break;
            return mk('jalr', 0, r1, 0, 0, 2, h, 'c.jr');
          }
          if (r2 !== 0) return mk('add', r1, r1, r2, 0, 2, h, 'c.add');
          if (r1 === 0) return mk('ebreak', 0, 0, 0, 0, 2, h, 'c.ebreak');
          return mk('jalr', 1, r1, 0, 0, 2, h, 'c.jalr');
        case 6:
          // uimm[5:2|7:6] at bits 12:7
          return mk('sw', 0, 2, r2, ((h >>> 7) & 0x3c) | ((h >>> 1) & 0xc0), 2, h, 'c.swsp');
        case 7:
          // uimm[5:3|8:6] at bits 12:7
          return mk('sd', 0, 2, r2, ((h >>> 7) & 0x38) | ((h >>> 1) & 0x1c0), 2, h, 'c.sdsp');
      }
      // 1, 5: c.fldsp/c.fsdsp (D extension)
      return illegal(h, 2);
  }
  return illegal(h, 2);
}

// c.lw/c.sw: uimm[5:3] at bits 12:10, uimm[2|6] at bits 6:5
function cLwImm(h: number): number {
  return ((h >>> 7) & 0x38) | ((h >>> 4) & 4) | ((h << 1) & 0x40);
}

// c.ld/c.sd: uimm[5:3] at bits 12:10, uimm[7:6] at bits 6:5
function cLdImm(h: number): number {
  return ((h >>> 7) & 0x38) | ((h << 1) & 0xc0);
}

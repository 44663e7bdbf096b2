/**
 * RV64IMAC instruction decoder driven by the ISA table (isa.ts; RISC-V unprivileged ISA spec,
 * chapters RV32I/RV64I, "M", "A", "C", "Zicsr", "Zifencei").
 *
 * Compressed instructions are expanded to the base instruction they stand for. Encodings the spec
 * marks reserved (for example c.addi16sp with nzimm = 0, c.lui with nzimm = 0, c.addiw / c.lwsp /
 * c.ldsp with rd = x0, c.jr with rs1 = x0) and every encoding outside RV64IMAC (F/D, privileged
 * instructions other than ecall/ebreak, 48-bit and longer formats) decode to op 'illegal'. HINT
 * encodings (for example c.li x0, imm or c.slli with shamt 0) are legal instructions whose expansion
 * has no architectural effect, so they decode to that expansion.
 *
 * Speed: the lookup is built once at module load. A 32-bit word picks a bucket by opcode[6:2] and
 * funct3 (256 buckets, most holding one entry, at most the eleven AMOs of one width) and takes the
 * first entry whose mask/match fits. A halfword is looked up in the compressed table (first match)
 * once; its decoded form is kept, so later decodes are one array read (one shared, read-only
 * {@link Instr} per halfword).
 */
import {
  COMPRESSED,
  INSTRUCTIONS,
  type CEntry,
  type CLayout,
  type CName,
  type Format,
  type Op,
} from './isa.js';
import type { Instr } from './instr.js';

/** {@link Instr.code} of 'illegal': one past the ISA table's last index. */
export const ILLEGAL_CODE = INSTRUCTIONS.length;

// One object literal shape for every result keeps property access monomorphic in the translator.
function mk(
  op: Op | 'illegal',
  code: number,
  rd: number,
  rs1: number,
  rs2: number,
  imm: number,
  size: 2 | 4,
  bits: number,
  compressed: CName | undefined,
  aq?: boolean,
  rl?: boolean,
): Instr {
  return { op, code, rd, rs1, rs2, imm, size, bits, compressed, aq, rl };
}

function illegal(bits: number, size: 2 | 4): Instr {
  return mk('illegal', ILLEGAL_CODE, 0, 0, 0, 0, size, bits, undefined);
}

// Formats and layouts as small integers, so the field extraction is a dense switch. The switches
// below write the codes as literals (named in a comment): a switch over consecutive literal cases
// is one jump table even in V8's interpreter, where `case TABLE.name` is a property load and a
// compare per case, tried in order, on every cold decode.
const FORMAT_CODE = {
  R: 0,
  I: 1,
  S: 2,
  B: 3,
  U: 4,
  J: 5,
  SH6: 6,
  SH5: 7,
  CSR: 8,
  FENCE: 9,
  SYS: 10,
  AMO: 11,
} as const satisfies Record<Format, number>;

const LAYOUT_CODE = {
  'ciw-addi4spn': 0,
  'cl-w': 1,
  'cl-d': 2,
  'cs-w': 3,
  'cs-d': 4,
  'ci-nop': 5,
  ci: 6,
  'ci-li': 7,
  'ci-addi16sp': 8,
  'ci-lui': 9,
  'cb-shift': 10,
  'cb-andi': 11,
  ca: 12,
  cj: 13,
  'cb-branch': 14,
  'ci-slli': 15,
  'ci-lwsp': 16,
  'ci-ldsp': 17,
  'cr-jr': 18,
  'cr-mv': 19,
  'cr-ebreak': 20,
  'cr-jalr': 21,
  'cr-add': 22,
  'css-w': 23,
  'css-d': 24,
} as const satisfies Record<CLayout, number>;

const RESERVED_CODE = { none: 0, rd: 1, rs1: 2, imm: 3 } as const;

interface Slot {
  /** mask and match as signed 32-bit integers, comparable with `w & mask` */
  mask: number;
  match: number;
  format: number;
  op: Op;
  /** Instr.code */
  code: number;
}

/** Buckets indexed by opcode[6:2] | funct3 << 5; entries in table order (first match wins). */
const BUCKETS: Slot[][] = (() => {
  const buckets: Slot[][] = Array.from({ length: 256 }, () => []);
  for (const [code, e] of INSTRUCTIONS.entries()) {
    const slot: Slot = {
      mask: e.mask | 0,
      match: e.match | 0,
      format: FORMAT_CODE[e.format],
      op: e.name,
      code,
    };
    const f3Fixed = (e.mask & 0x7000) === 0x7000;
    for (let f3 = 0; f3 < 8; f3++) {
      if (!f3Fixed || ((e.match >>> 12) & 7) === f3) buckets[((e.match >>> 2) & 31) | (f3 << 5)].push(slot);
    }
  }
  return buckets;
})();

interface CSlot {
  mask: number;
  match: number;
  op: Op;
  /** Instr.code of the expansion */
  code: number;
  name: CName;
  layout: number;
  reserved: number;
}

const CSLOTS: CSlot[] = COMPRESSED.map((e: CEntry<CName>) => ({
  mask: e.mask,
  match: e.match,
  op: e.expands,
  code: INSTRUCTIONS.findIndex((x) => x.name === e.expands),
  name: e.name,
  layout: LAYOUT_CODE[e.layout],
  reserved: RESERVED_CODE[e.reservedIfZero ?? 'none'],
}));

/** The compressed table's masks and matches, in table order (the first-match scan reads these). */
const CMASK = Uint16Array.from(CSLOTS, (c) => c.mask);
const CMATCH = Uint16Array.from(CSLOTS, (c) => c.match);

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
  const bucket = BUCKETS[((w >>> 2) & 31) | ((w >>> 7) & 0xe0)];
  for (let k = 0; k < bucket.length; k++) {
    const s = bucket[k];
    if ((w & s.mask) === s.match) return fields32(s, w);
  }
  return illegal(w, 4);
}

function fields32(s: Slot, w: number): Instr {
  const rd = (w >>> 7) & 31;
  const rs1 = (w >>> 15) & 31;
  const rs2 = (w >>> 20) & 31;
  switch (s.format) {
    case 0 /* R */:
      return mk(s.op, s.code, rd, rs1, rs2, 0, 4, w, undefined);
    case 1 /* I */:
      return mk(s.op, s.code, rd, rs1, 0, w >> 20, 4, w, undefined);
    case 2 /* S */:
      return mk(s.op, s.code, 0, rs1, rs2, ((w >> 20) & ~31) | rd, 4, w, undefined);
    case 3 /* B */: {
      const imm =
        ((w >> 19) & 0xfffff000) | // imm[12] sign
        ((w << 4) & 0x800) | // imm[11]
        ((w >>> 20) & 0x7e0) | // imm[10:5]
        ((w >>> 7) & 0x1e); // imm[4:1]
      return mk(s.op, s.code, 0, rs1, rs2, imm, 4, w, undefined);
    }
    case 4 /* U */:
      return mk(s.op, s.code, rd, 0, 0, (w & 0xfffff000) | 0, 4, w, undefined);
    case 5 /* J */: {
      const imm =
        ((w >> 11) & 0xfff00000) | // imm[20] sign
        (w & 0xff000) | // imm[19:12]
        ((w >>> 9) & 0x800) | // imm[11]
        ((w >>> 20) & 0x7fe); // imm[10:1]
      return mk(s.op, s.code, rd, 0, 0, imm, 4, w, undefined);
    }
    case 6 /* SH6 */:
      return mk(s.op, s.code, rd, rs1, 0, (w >>> 20) & 63, 4, w, undefined);
    case 7 /* SH5 */:
      return mk(s.op, s.code, rd, rs1, 0, rs2, 4, w, undefined);
    case 8 /* CSR */:
    case 9 /* FENCE */:
      return mk(s.op, s.code, rd, rs1, 0, w >>> 20, 4, w, undefined);
    case 10 /* SYS */:
      return mk(s.op, s.code, 0, 0, 0, 0, 4, w, undefined);
    default: {
      // FORMAT_CODE.AMO
      return mk(
        s.op,
        s.code,
        rd,
        rs1,
        rs2,
        0,
        4,
        w,
        undefined,
        ((w >>> 26) & 1) === 1,
        ((w >>> 25) & 1) === 1,
      );
    }
  }
}

/**
 * Decoded halfwords, filled on first use: a compressed decode is two array reads after that. The
 * index by halfword is a zeroed Int32Array (1 + the position in CDECODED; 0: not decoded yet), not a
 * 65,536-element array filled at load, which cost every process that translates ~0.4 ms.
 */
const CINDEX = new Int32Array(0x10000);
const CDECODED: Instr[] = [];

function decodeCompressed(h: number): Instr {
  const k = CINDEX[h];
  if (k !== 0) return CDECODED[k - 1];
  const r = expandCompressed(h);
  CINDEX[h] = CDECODED.push(r);
  return r;
}

function expandCompressed(h: number): Instr {
  let k = 0;
  while (k < CMASK.length && (h & CMASK[k]) !== CMATCH[k]) k++;
  if (k === CMASK.length) return illegal(h, 2);
  const s = CSLOTS[k];
  // rd'/rs1' at bits 9:7, rd'/rs2' at bits 4:2 name x8..x15
  const rp1 = 8 + ((h >>> 7) & 7);
  const rp2 = 8 + ((h >>> 2) & 7);
  const r1 = (h >>> 7) & 31;
  const r2 = (h >>> 2) & 31;
  // imm[5] at bit 12, imm[4:0] at bits 6:2, sign-extended from bit 5
  const imm6 = (((h >>> 7) & 0x20) | ((h >>> 2) & 31)) - ((h >>> 7) & 0x20) * 2;
  // shamt[5] at bit 12, shamt[4:0] at bits 6:2
  const shamt = ((h >>> 7) & 0x20) | r2;
  let rd = 0;
  let rs1 = 0;
  let rs2 = 0;
  let imm = 0;
  switch (s.layout) {
    case 0 /* ciw-addi4spn */:
      // nzuimm[5:4|9:6|2|3]
      rd = rp2;
      rs1 = 2;
      imm = ((h >>> 7) & 0x30) | ((h >>> 1) & 0x3c0) | ((h >>> 4) & 4) | ((h >>> 2) & 8);
      break;
    case 1 /* cl-w */:
      rd = rp2;
      rs1 = rp1;
      imm = cLwImm(h);
      break;
    case 2 /* cl-d */:
      rd = rp2;
      rs1 = rp1;
      imm = cLdImm(h);
      break;
    case 3 /* cs-w */:
      rs1 = rp1;
      rs2 = rp2;
      imm = cLwImm(h);
      break;
    case 4 /* cs-d */:
      rs1 = rp1;
      rs2 = rp2;
      imm = cLdImm(h);
      break;
    case 5 /* ci-nop */:
    case 6 /* ci */:
      rd = r1;
      rs1 = r1;
      imm = imm6;
      break;
    case 7 /* ci-li */:
      rd = r1;
      imm = imm6;
      break;
    case 8 /* ci-addi16sp */: {
      // nzimm[9] at bit 12, nzimm[4|6|8:7|5] at bits 6:2
      const raw =
        ((h >>> 3) & 0x200) | ((h >>> 2) & 0x10) | ((h << 1) & 0x40) | ((h << 4) & 0x180) | ((h << 3) & 0x20);
      rd = 2;
      rs1 = 2;
      imm = raw - (raw & 0x200) * 2;
      break;
    }
    case 9 /* ci-lui */:
      rd = r1;
      imm = imm6 * 4096;
      break;
    case 10 /* cb-shift */:
      rd = rp1;
      rs1 = rp1;
      imm = shamt;
      break;
    case 11 /* cb-andi */:
      rd = rp1;
      rs1 = rp1;
      imm = imm6;
      break;
    case 12 /* ca */:
      rd = rp1;
      rs1 = rp1;
      rs2 = rp2;
      break;
    case 13 /* cj */: {
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
      imm = raw - (raw & 0x800) * 2;
      break;
    }
    case 14 /* cb-branch */: {
      // offset[8|4:3] at bits 12:10, offset[7:6|2:1|5] at bits 6:2
      const raw =
        ((h >>> 4) & 0x100) | ((h >>> 7) & 0x18) | ((h << 1) & 0xc0) | ((h >>> 2) & 6) | ((h << 3) & 0x20);
      rs1 = rp1;
      imm = raw - (raw & 0x100) * 2;
      break;
    }
    case 15 /* ci-slli */:
      rd = r1;
      rs1 = r1;
      imm = shamt;
      break;
    case 16 /* ci-lwsp */:
      // uimm[5] at bit 12, uimm[4:2|7:6] at bits 6:2
      rd = r1;
      rs1 = 2;
      imm = ((h >>> 7) & 0x20) | ((h >>> 2) & 0x1c) | ((h << 4) & 0xc0);
      break;
    case 17 /* ci-ldsp */:
      // uimm[5] at bit 12, uimm[4:3|8:6] at bits 6:2
      rd = r1;
      rs1 = 2;
      imm = ((h >>> 7) & 0x20) | ((h >>> 2) & 0x18) | ((h << 4) & 0x1c0);
      break;
    case 18 /* cr-jr */:
      rs1 = r1;
      break;
    case 19 /* cr-mv */:
      rd = r1;
      rs2 = r2;
      break;
    case 20 /* cr-ebreak */:
      break;
    case 21 /* cr-jalr */:
      rd = 1;
      rs1 = r1;
      break;
    case 22 /* cr-add */:
      rd = r1;
      rs1 = r1;
      rs2 = r2;
      break;
    case 23 /* css-w */:
      // uimm[5:2|7:6] at bits 12:7
      rs1 = 2;
      rs2 = r2;
      imm = ((h >>> 7) & 0x3c) | ((h >>> 1) & 0xc0);
      break;
    default:
      // LAYOUT_CODE['css-d']: uimm[5:3|8:6] at bits 12:7
      rs1 = 2;
      rs2 = r2;
      imm = ((h >>> 7) & 0x38) | ((h >>> 1) & 0x1c0);
  }
  switch (s.reserved) {
    case 1 /* rd */:
      if (rd === 0) return illegal(h, 2);
      break;
    case 2 /* rs1 */:
      if (rs1 === 0) return illegal(h, 2);
      break;
    case 3 /* imm */:
      if (imm === 0) return illegal(h, 2);
      break;
  }
  return mk(s.op, s.code, rd, rs1, rs2, imm, 2, h, s.name);
}

// c.lw/c.sw: uimm[5:3] at bits 12:10, uimm[2|6] at bits 6:5
function cLwImm(h: number): number {
  return ((h >>> 7) & 0x38) | ((h >>> 4) & 4) | ((h << 1) & 0x40);
}

// c.ld/c.sd: uimm[5:3] at bits 12:10, uimm[7:6] at bits 6:5
function cLdImm(h: number): number {
  return ((h >>> 7) & 0x38) | ((h << 1) & 0xc0);
}

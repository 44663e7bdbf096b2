/**
 * The lowering table: how each RV64IMAC instruction becomes Wasm (typed over the ISA table's `Op`
 * union, so an instruction added there does not compile until it is lowered), the Wasm opcodes of
 * the arithmetic, loads and stores, and the one-pass writer's plan for each instruction.
 */
import { Op } from './bytes.js';
import { ENTRY, INSTRUCTIONS, type Op as RvOp, type OpOfKind } from '../riscv/isa.js';
type I64Bin = 'add' | 'sub' | 'and' | 'or' | 'xor' | 'shl' | 'shr_u' | 'shr_s' | 'mul';
export type Bitwise = 'and' | 'or' | 'xor';

type I32Bin = 'add' | 'sub' | 'shl' | 'shr_u' | 'shr_s' | 'mul';
export type DivKind = 'div' | 'divu' | 'rem' | 'remu';
export type AmoKind = 'swap' | 'add' | 'xor' | 'and' | 'or' | 'min' | 'max' | 'minu' | 'maxu';

/** How one instruction becomes Wasm (interpreted by FunctionEmitter.instr). */
export type Lowering =
  /** lui: rd = imm; auipc: rd = pc + imm */
  | { via: 'upper'; pcRelative: boolean }
  /** rd = rs1 f imm (64-bit) */
  | { via: 'reg-imm'; f: I64Bin }
  /** rd = rs1 f (imm & 63) */
  | { via: 'shift-imm'; f: 'shl' | 'shr_u' | 'shr_s' }
  /** rd = rs1 f rs2 (64-bit) */
  | { via: 'reg-reg'; f: I64Bin }
  /** rd = (rs1 < rs2 or imm) ? 1 : 0 */
  | { via: 'set-less'; f: 'lt_s' | 'lt_u'; imm: boolean }
  /** rd = sext32(w(rs1) f imm), shift amounts masked to 5 bits */
  | { via: 'word-imm'; f: I32Bin }
  /** rd = sext32(w(rs1) f w(rs2)) */
  | { via: 'word-reg'; f: I32Bin }
  /** width and sign from the ISA table */
  | { via: 'load' }
  | { via: 'store' }
  | { via: 'nop' }
  | { via: 'ecall' }
  | { via: 'breakpoint' }
  /** rd = helper(rs1, rs2): the 128-bit product helpers of image.ts */
  | { via: 'helper'; name: 'mulh' | 'mulhsu' | 'mulhu' }
  | { via: 'div'; f: DivKind }
  | { via: 'div-word'; f: DivKind }
  | { via: 'lr' }
  | { via: 'sc' }
  | { via: 'amo'; f: AmoKind }
  /** csrrs/csrrc and their immediate forms: counter reads */
  | { via: 'csr-read' }
  /** traps IllegalInstruction whenever it runs */
  | { via: 'illegal' }
  /** jal, jalr and branches: block terminators and call sites, never straight-line code */
  | { via: 'control' };

const CONTROL = { via: 'control' } as const;
const LOAD = { via: 'load' } as const;
const STORE = { via: 'store' } as const;
const ri = (f: I64Bin) => ({ via: 'reg-imm', f }) as const;
const rr = (f: I64Bin) => ({ via: 'reg-reg', f }) as const;
const wi = (f: I32Bin) => ({ via: 'word-imm', f }) as const;
const wr = (f: I32Bin) => ({ via: 'word-reg', f }) as const;
export const amo = (f: AmoKind) => ({ via: 'amo', f }) as const;

/**
 * The lowering of every instruction of the ISA table: adding an instruction there fails to
 * compile until it has one here (no silent default).
 */
export const LOWERING = {
  lui: { via: 'upper', pcRelative: false },
  auipc: { via: 'upper', pcRelative: true },
  jal: CONTROL,
  jalr: CONTROL,
  beq: CONTROL,
  bne: CONTROL,
  blt: CONTROL,
  bge: CONTROL,
  bltu: CONTROL,
  bgeu: CONTROL,
  lb: LOAD,
  lh: LOAD,
  lw: LOAD,
  ld: LOAD,
  lbu: LOAD,
  lhu: LOAD,
  lwu: LOAD,
  sb: STORE,
  sh: STORE,
  sw: STORE,
  sd: STORE,
  addi: ri('add'),
  slti: { via: 'set-less', f: 'lt_s', imm: true },
  sltiu: { via: 'set-less', f: 'lt_u', imm: true },
  xori: ri('xor'),
  ori: ri('or'),
  andi: ri('and'),
  slli: { via: 'shift-imm', f: 'shl' },
  srli: { via: 'shift-imm', f: 'shr_u' },
  srai: { via: 'shift-imm', f: 'shr_s' },
  add: rr('add'),
  sub: rr('sub'),
  sll: rr('shl'),
  slt: { via: 'set-less', f: 'lt_s', imm: false },
  sltu: { via: 'set-less', f: 'lt_u', imm: false },
  xor: rr('xor'),
  srl: rr('shr_u'),
  sra: rr('shr_s'),
  or: rr('or'),
  and: rr('and'),
  fence: { via: 'nop' },
  'fence.i': { via: 'nop' },
  ecall: { via: 'ecall' },
  ebreak: { via: 'breakpoint' },
  addiw: wi('add'),
  slliw: wi('shl'),
  srliw: wi('shr_u'),
  sraiw: wi('shr_s'),
  addw: wr('add'),
  subw: wr('sub'),
  sllw: wr('shl'),
  srlw: wr('shr_u'),
  sraw: wr('shr_s'),
  mul: rr('mul'),
  mulh: { via: 'helper', name: 'mulh' },
  mulhsu: { via: 'helper', name: 'mulhsu' },
  mulhu: { via: 'helper', name: 'mulhu' },
  div: { via: 'div', f: 'div' },
  divu: { via: 'div', f: 'divu' },
  rem: { via: 'div', f: 'rem' },
  remu: { via: 'div', f: 'remu' },
  mulw: wr('mul'),
  divw: { via: 'div-word', f: 'div' },
  divuw: { via: 'div-word', f: 'divu' },
  remw: { via: 'div-word', f: 'rem' },
  remuw: { via: 'div-word', f: 'remu' },
  'lr.w': { via: 'lr' },
  'sc.w': { via: 'sc' },
  'amoswap.w': amo('swap'),
  'amoadd.w': amo('add'),
  'amoxor.w': amo('xor'),
  'amoand.w': amo('and'),
  'amoor.w': amo('or'),
  'amomin.w': amo('min'),
  'amomax.w': amo('max'),
  'amominu.w': amo('minu'),
  'amomaxu.w': amo('maxu'),
  'lr.d': { via: 'lr' },
  'sc.d': { via: 'sc' },
  'amoswap.d': amo('swap'),
  'amoadd.d': amo('add'),
  'amoxor.d': amo('xor'),
  'amoand.d': amo('and'),
  'amoor.d': amo('or'),
  'amomin.d': amo('min'),
  'amomax.d': amo('max'),
  'amominu.d': amo('minu'),
  'amomaxu.d': amo('maxu'),
  csrrw: { via: 'illegal' },
  csrrs: { via: 'csr-read' },
  csrrc: { via: 'csr-read' },
  csrrwi: { via: 'illegal' },
  csrrsi: { via: 'csr-read' },
  csrrci: { via: 'csr-read' },
} as const satisfies Record<RvOp, Lowering>;

/** Opcodes of the lowerings' operations, for the one-pass templates (direct.ts; core spec 5.4.7). */
const I64_OPCODE: Record<I64Bin, number> = {
  add: 0x7c,
  sub: 0x7d,
  mul: 0x7e,
  and: 0x83,
  or: 0x84,
  xor: 0x85,
  shl: 0x86,
  shr_s: 0x87,
  shr_u: 0x88,
};
const I32_OPCODE: Record<I32Bin, number> = {
  add: 0x6a,
  sub: 0x6b,
  mul: 0x6c,
  shl: 0x74,
  shr_s: 0x75,
  shr_u: 0x76,
};
/** i64 loads by width: [zero-extending, sign-extending] (a 64-bit load has no extension) */
const LOAD_OPCODE: Record<number, readonly [number, number]> = {
  1: [0x31, 0x30],
  2: [0x33, 0x32],
  4: [0x35, 0x34],
  8: [0x29, 0x29],
};
const STORE_OPCODE: Record<number, number> = { 1: 0x3c, 2: 0x3d, 4: 0x3e, 8: 0x37 };

/**
 * The one-pass writer's form of an instruction (FunctionEmitter.direct), made from its LOWERING
 * once per process: a numeric kind and the operands the template takes, so that the emitter reads
 * one array slot per instruction instead of comparing the lowering's strings and looking up
 * opcodes by name (the first translation in a process runs in V8's interpreter and baseline
 * compiler, where each string comparison and lookup by name is a call).
 */
interface DirectPlan {
  /** D_* below; D_NONE: the general lowering (FunctionEmitter.instr) */
  kind: number;
  /** the template's Wasm opcode */
  opcode: number;
  /** bytes accessed (loads and stores) */
  width: number;
  /** upper: pc-relative; reg-imm: an add; set-less: the immediate form; word-imm: an add */
  flag: boolean;
  low: Lowering | null;
}
const D_NONE = 0;
export const D_UPPER = 1;
export const D_REG_IMM = 2;
export const D_SHIFT_IMM = 3;
export const D_REG_REG = 4;
export const D_SET_LESS = 5;
export const D_WORD_IMM = 6;
export const D_WORD_REG = 7;
export const D_LOAD = 8;
export const D_STORE = 9;
export const D_HELPER = 10;
export const D_DIV = 11;
export const D_DIV_WORD = 12;
export const D_NOP = 13;
export const D_BREAKPOINT = 14;
export const D_ILLEGAL = 15;

function directPlan(op: RvOp): DirectPlan {
  const low: Lowering = LOWERING[op];
  const plan = (kind: number, opcode = 0, width = 0, flag = false): DirectPlan => ({
    kind,
    opcode,
    width,
    flag,
    low,
  });
  switch (low.via) {
    case 'upper':
      return plan(D_UPPER, 0, 0, low.pcRelative);
    case 'reg-imm':
      return plan(D_REG_IMM, I64_OPCODE[low.f], 0, low.f === 'add');
    case 'shift-imm':
      return plan(D_SHIFT_IMM, I64_OPCODE[low.f]);
    case 'reg-reg':
      return plan(D_REG_REG, I64_OPCODE[low.f]);
    case 'set-less':
      return plan(D_SET_LESS, low.f === 'lt_s' ? 0x53 : 0x54, 0, low.imm);
    case 'word-imm':
      return plan(D_WORD_IMM, I32_OPCODE[low.f], 0, low.f === 'add');
    case 'word-reg':
      return plan(D_WORD_REG, I32_OPCODE[low.f]);
    case 'load': {
      const e = ENTRY[op];
      return plan(D_LOAD, LOAD_OPCODE[e.width!][e.signed ? 1 : 0], e.width!);
    }
    case 'store':
      return plan(D_STORE, STORE_OPCODE[ENTRY[op].width!], ENTRY[op].width!);
    case 'helper':
      return plan(D_HELPER);
    case 'div':
      return plan(D_DIV);
    case 'div-word':
      return plan(D_DIV_WORD);
    case 'nop':
      return plan(D_NOP);
    case 'breakpoint':
      return plan(D_BREAKPOINT);
    case 'illegal':
      return plan(D_ILLEGAL);
    default:
      return plan(D_NONE);
  }
}

/** DirectPlan by Instr.code: the ISA table's entries in order, then 'illegal' (decode.ts ILLEGAL_CODE). */
export const DIRECT_PLANS: readonly DirectPlan[] = [
  ...INSTRUCTIONS.map((e) => directPlan(e.name)),
  { kind: D_ILLEGAL, opcode: 0, width: 0, flag: false, low: null },
];

/** i32.const and i64.const of the smallest 32- and 64-bit integers (signed LEB128). */
export const MIN32: readonly number[] = [Op.i32_const, 0x80, 0x80, 0x80, 0x80, 0x78];
export const MIN64: readonly number[] = [
  Op.i64_const,
  0x80,
  0x80,
  0x80,
  0x80,
  0x80,
  0x80,
  0x80,
  0x80,
  0x80,
  0x7f,
];

/** The opcode of each conditional branch's i64 comparison (the one-pass form of CONDITIONS). */
export const BRANCH_OPCODE: Record<OpOfKind<'branch'>, number> = {
  beq: 0x51,
  bne: 0x52,
  blt: 0x53,
  bge: 0x59,
  bltu: 0x54,
  bgeu: 0x5a,
};

/** The Wasm comparison of each conditional branch. */
export const CONDITIONS = {
  beq: 'eq',
  bne: 'ne',
  blt: 'lt_s',
  bge: 'ge_s',
  bltu: 'lt_u',
  bgeu: 'ge_u',
} as const satisfies Record<OpOfKind<'branch'>, 'eq' | 'ne' | 'lt_s' | 'ge_s' | 'lt_u' | 'ge_u'>;

/** Exported for tests: the lowering of every mnemonic and the comparison of every branch. */
export const LOWERINGS: Readonly<Record<RvOp, { readonly via: string }>> = LOWERING;
export const BRANCH_CONDITIONS: Readonly<Record<OpOfKind<'branch'>, string>> = CONDITIONS;

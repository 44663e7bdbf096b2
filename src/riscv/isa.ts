/**
 * The RV64IMAC instruction set as data: one entry per instruction (RISC-V unprivileged ISA spec,
 * chapters RV32I/RV64I, "M", "A", "Zicsr", "Zifencei", and the "C" chapter's "RVC Instruction Set
 * Listings"), in the style of libriscv's one table per instruction and riscv-opcodes' match/mask
 * pairs. Every consumer reads this table instead of keeping its own list: the decoder builds its
 * lookup from the match/mask pairs, the disassembler prints by `syntax`, the CFG analysis asks
 * `flow` and `writesRd`, the emitter keeps lowering maps typed `Record<Op, ...>` over the {@link Op}
 * union derived here, and the conformance generators draw their instruction groups from it.
 *
 * A word is an instruction when `(word & mask) === match`. Within one table the first matching
 * entry wins, so more specific entries (c.nop before c.addi, c.ebreak before c.jalr) come first.
 */

/** How the operand fields of a 32-bit instruction are laid out (spec "Base Instruction Formats"). */
export type Format =
  /** rd, rs1, rs2 */
  | 'R'
  /** rd, rs1, imm[11:0] sign-extended */
  | 'I'
  /** rs1, rs2, imm[11:5|4:0] sign-extended */
  | 'S'
  /** rs1, rs2, branch offset imm[12|10:5|4:1|11] */
  | 'B'
  /** rd, imm[31:12] (already shifted left by 12, sign-extended) */
  | 'U'
  /** rd, jump offset imm[20|10:1|11|19:12] */
  | 'J'
  /** rd, rs1, 6-bit shift amount (RV64I shifts) */
  | 'SH6'
  /** rd, rs1, 5-bit shift amount (RV64I word shifts) */
  | 'SH5'
  /** rd, rs1 (or the 5-bit uimm), imm = the 12-bit CSR number unsigned */
  | 'CSR'
  /** rd, rs1 and the unsigned fm/pred/succ field in imm (fence; reserved fields kept, not checked) */
  | 'FENCE'
  /** no operands (ecall, ebreak: the whole word is fixed) */
  | 'SYS'
  /** rd, rs1, rs2 plus the aq/rl ordering bits (A extension) */
  | 'AMO';

/**
 * Operand layouts of the compressed forms ("RVC Instruction Formats"): how rd/rs1/rs2/imm of the
 * expansion come out of the 16 bits. Register fields written rs1'/rs2' name x8..x15.
 */
export type CLayout =
  | 'ciw-addi4spn'
  | 'cl-w'
  | 'cl-d'
  | 'cs-w'
  | 'cs-d'
  | 'ci-nop'
  | 'ci'
  | 'ci-li'
  | 'ci-addi16sp'
  | 'ci-lui'
  | 'cb-shift'
  | 'cb-andi'
  | 'ca'
  | 'cj'
  | 'cb-branch'
  | 'ci-slli'
  | 'ci-lwsp'
  | 'ci-ldsp'
  | 'cr-jr'
  | 'cr-mv'
  | 'cr-ebreak'
  | 'cr-jalr'
  | 'cr-add'
  | 'css-w'
  | 'css-d';

/** How the disassembler writes the operands of a 32-bit instruction (LLVM's assembly syntax). */
export type Syntax =
  | 'rd, upper'
  | 'rd, target'
  | 'rd, imm(rs1)'
  | 'rs1, rs2, target'
  | 'rs2, imm(rs1)'
  | 'rd, rs1, imm'
  | 'rd, rs1, rs2'
  | 'fence'
  | 'fence.i'
  | 'none'
  | 'rd, csr, rs1'
  | 'rd, csr, uimm'
  | 'rd, (rs1)'
  | 'rd, rs2, (rs1)';

/**
 * What an instruction does to control flow, for the CFG analysis: `next` continues with the next
 * instruction; `branch` is conditional (pc + imm or next); `jump` is jal/jalr (a call when rd is
 * not x0); `host` leaves to the host and comes back (ecall: a0/a1 change behind the analysis);
 * `stop` never continues (ebreak traps).
 */
export type Flow = 'next' | 'branch' | 'jump' | 'host' | 'stop';

/** The instruction groups the emitter and the conformance generators work by. */
export type Kind =
  | 'lui'
  | 'auipc'
  | 'jal'
  | 'jalr'
  | 'branch'
  | 'load'
  | 'store'
  | 'op-imm'
  | 'shift-imm'
  | 'op'
  | 'shift'
  | 'fence'
  | 'system'
  | 'op-imm-32'
  | 'shift-imm-32'
  | 'op-32'
  | 'shift-32'
  | 'mul'
  | 'mul-32'
  | 'lr'
  | 'sc'
  | 'amo'
  | 'csr'
  | 'csr-imm';

/** One 32-bit instruction. `N` is the mnemonic as a literal type, so {@link Op} can be derived. */
export interface Entry<N extends string = string, K extends Kind = Kind> {
  /** lower-case mnemonic as the spec and LLVM write it ('lr.w', 'amoadd.d'; no .aq/.rl suffix) */
  readonly name: N;
  readonly ext: 'I' | 'M' | 'A' | 'Zicsr' | 'Zifencei';
  readonly match: number;
  readonly mask: number;
  readonly format: Format;
  readonly kind: K;
  readonly syntax: Syntax;
  readonly flow: Flow;
  /** whether rd receives a result (false for stores, branches, fences, ecall/ebreak) */
  readonly writesRd: boolean;
  /** bytes accessed by loads, stores and atomics */
  readonly width?: 1 | 2 | 4 | 8;
  /** loads: whether the value is sign-extended to 64 bits */
  readonly signed?: boolean;
}

/** Encoding fields that fix an instruction (the rest are operands). */
interface Fixed {
  opcode: number;
  f3?: number;
  /** bits 31:25 */
  f7?: number;
  /** bits 31:26 (RV64 shifts: imm[11:6]) */
  f6?: number;
  /** bits 31:27 (AMO funct5; aq/rl stay operands) */
  f5?: number;
  /** rs2 field fixed (lr: rs2 = 0) */
  rs2?: number;
  /** the whole word (ecall, ebreak) */
  word?: number;
}

function matchMask(f: Fixed): [number, number] {
  if (f.word !== undefined) return [f.word >>> 0, 0xffffffff];
  let match = f.opcode;
  let mask = 0x7f;
  if (f.f3 !== undefined) {
    match |= f.f3 << 12;
    mask |= 0x7000;
  }
  if (f.f7 !== undefined) {
    match |= f.f7 << 25;
    mask |= 0xfe000000;
  }
  if (f.f6 !== undefined) {
    match |= f.f6 << 26;
    mask |= 0xfc000000;
  }
  if (f.f5 !== undefined) {
    match |= f.f5 << 27;
    mask |= 0xf8000000;
  }
  if (f.rs2 !== undefined) {
    match |= f.rs2 << 20;
    mask |= 0x01f00000;
  }
  return [match >>> 0, mask >>> 0];
}

type Extra = Partial<Pick<Entry, 'width' | 'signed' | 'ext'>>;

function def<N extends string, K extends Kind>(
  name: N,
  format: Format,
  kind: K,
  syntax: Syntax,
  flow: Flow,
  writesRd: boolean,
  fixed: Fixed,
  extra: Extra = {},
): Entry<N, K> {
  const [match, mask] = matchMask(fixed);
  return { name, ext: 'I', match, mask, format, kind, syntax, flow, writesRd, ...extra };
}

// Major opcodes (spec "RISC-V base opcode map").
const LUI = 0x37;
const AUIPC = 0x17;
const JAL = 0x6f;
const JALR = 0x67;
const BRANCH = 0x63;
const LOAD = 0x03;
const STORE = 0x23;
const OP_IMM = 0x13;
const OP = 0x33;
const MISC_MEM = 0x0f;
const SYSTEM = 0x73;
const OP_IMM_32 = 0x1b;
const OP_32 = 0x3b;
const AMO_OPCODE = 0x2f;

const br = <N extends string>(n: N, f3: number) =>
  def(n, 'B', 'branch', 'rs1, rs2, target', 'branch', false, { opcode: BRANCH, f3 });
const ld = <N extends string>(n: N, f3: number, width: 1 | 2 | 4 | 8, signed: boolean) =>
  def(n, 'I', 'load', 'rd, imm(rs1)', 'next', true, { opcode: LOAD, f3 }, { width, signed });
const st = <N extends string>(n: N, f3: number, width: 1 | 2 | 4 | 8) =>
  def(n, 'S', 'store', 'rs2, imm(rs1)', 'next', false, { opcode: STORE, f3 }, { width });
const opi = <N extends string, K extends 'op-imm' | 'op-imm-32'>(n: N, kind: K, f3: number) =>
  def(n, 'I', kind, 'rd, rs1, imm', 'next', true, { opcode: kind === 'op-imm' ? OP_IMM : OP_IMM_32, f3 });
const sh6 = <N extends string>(n: N, f3: number, f6: number) =>
  def(n, 'SH6', 'shift-imm', 'rd, rs1, imm', 'next', true, { opcode: OP_IMM, f3, f6 });
const sh5 = <N extends string>(n: N, f3: number, f7: number) =>
  def(n, 'SH5', 'shift-imm-32', 'rd, rs1, imm', 'next', true, { opcode: OP_IMM_32, f3, f7 });
const rr = <N extends string, K extends Kind>(n: N, kind: K, f3: number, f7: number) =>
  def(
    n,
    'R',
    kind,
    'rd, rs1, rs2',
    'next',
    true,
    { opcode: kind.endsWith('32') ? OP_32 : OP, f3, f7 },
    kind.startsWith('mul') ? { ext: 'M' } : {},
  );
const csr = <N extends string, K extends 'csr' | 'csr-imm'>(n: N, kind: K, f3: number) =>
  def(
    n,
    'CSR',
    kind,
    kind === 'csr' ? 'rd, csr, rs1' : 'rd, csr, uimm',
    'next',
    true,
    { opcode: SYSTEM, f3 },
    {
      ext: 'Zicsr',
    },
  );
const lr = <N extends string>(n: N, f3: number) =>
  def(
    n,
    'AMO',
    'lr',
    'rd, (rs1)',
    'next',
    true,
    { opcode: AMO_OPCODE, f3, f5: 0x02, rs2: 0 },
    {
      width: f3 === 2 ? 4 : 8,
      ext: 'A',
    },
  );
const amo = <N extends string, K extends 'sc' | 'amo'>(n: N, kind: K, f3: number, f5: number) =>
  def(
    n,
    'AMO',
    kind,
    'rd, rs2, (rs1)',
    'next',
    true,
    { opcode: AMO_OPCODE, f3, f5 },
    {
      width: f3 === 2 ? 4 : 8,
      ext: 'A',
    },
  );

/**
 * The 32-bit instructions, in the order of the spec's RV64IMAC listings (RV32I, RV64I, M, A,
 * Zicsr), which is also the order coverage reports list them in.
 */
export const INSTRUCTIONS = [
  def('lui', 'U', 'lui', 'rd, upper', 'next', true, { opcode: LUI }),
  def('auipc', 'U', 'auipc', 'rd, upper', 'next', true, { opcode: AUIPC }),
  def('jal', 'J', 'jal', 'rd, target', 'jump', true, { opcode: JAL }),
  def('jalr', 'I', 'jalr', 'rd, imm(rs1)', 'jump', true, { opcode: JALR, f3: 0 }),
  br('beq', 0),
  br('bne', 1),
  br('blt', 4),
  br('bge', 5),
  br('bltu', 6),
  br('bgeu', 7),
  ld('lb', 0, 1, true),
  ld('lh', 1, 2, true),
  ld('lw', 2, 4, true),
  ld('ld', 3, 8, true),
  ld('lbu', 4, 1, false),
  ld('lhu', 5, 2, false),
  ld('lwu', 6, 4, false),
  st('sb', 0, 1),
  st('sh', 1, 2),
  st('sw', 2, 4),
  st('sd', 3, 8),
  opi('addi', 'op-imm', 0),
  opi('slti', 'op-imm', 2),
  opi('sltiu', 'op-imm', 3),
  opi('xori', 'op-imm', 4),
  opi('ori', 'op-imm', 6),
  opi('andi', 'op-imm', 7),
  sh6('slli', 1, 0x00),
  sh6('srli', 5, 0x00),
  sh6('srai', 5, 0x10),
  rr('add', 'op', 0, 0x00),
  rr('sub', 'op', 0, 0x20),
  rr('sll', 'shift', 1, 0x00),
  rr('slt', 'op', 2, 0x00),
  rr('sltu', 'op', 3, 0x00),
  rr('xor', 'op', 4, 0x00),
  rr('srl', 'shift', 5, 0x00),
  rr('sra', 'shift', 5, 0x20),
  rr('or', 'op', 6, 0x00),
  rr('and', 'op', 7, 0x00),
  // The spec tells base implementations to ignore fence's reserved rd/rs1 fields and unknown fm
  // values (a plain fence), and fence.i's rd/rs1/imm: only opcode and funct3 are fixed.
  def('fence', 'FENCE', 'fence', 'fence', 'next', false, { opcode: MISC_MEM, f3: 0 }),
  def('fence.i', 'I', 'fence', 'fence.i', 'next', false, { opcode: MISC_MEM, f3: 1 }, { ext: 'Zifencei' }),
  def('ecall', 'SYS', 'system', 'none', 'host', false, { opcode: SYSTEM, word: 0x00000073 }),
  def('ebreak', 'SYS', 'system', 'none', 'stop', false, { opcode: SYSTEM, word: 0x00100073 }),
  opi('addiw', 'op-imm-32', 0),
  sh5('slliw', 1, 0x00),
  sh5('srliw', 5, 0x00),
  sh5('sraiw', 5, 0x20),
  rr('addw', 'op-32', 0, 0x00),
  rr('subw', 'op-32', 0, 0x20),
  rr('sllw', 'shift-32', 1, 0x00),
  rr('srlw', 'shift-32', 5, 0x00),
  rr('sraw', 'shift-32', 5, 0x20),
  rr('mul', 'mul', 0, 0x01),
  rr('mulh', 'mul', 1, 0x01),
  rr('mulhsu', 'mul', 2, 0x01),
  rr('mulhu', 'mul', 3, 0x01),
  rr('div', 'mul', 4, 0x01),
  rr('divu', 'mul', 5, 0x01),
  rr('rem', 'mul', 6, 0x01),
  rr('remu', 'mul', 7, 0x01),
  rr('mulw', 'mul-32', 0, 0x01),
  rr('divw', 'mul-32', 4, 0x01),
  rr('divuw', 'mul-32', 5, 0x01),
  rr('remw', 'mul-32', 6, 0x01),
  rr('remuw', 'mul-32', 7, 0x01),
  lr('lr.w', 2),
  amo('sc.w', 'sc', 2, 0x03),
  amo('amoswap.w', 'amo', 2, 0x01),
  amo('amoadd.w', 'amo', 2, 0x00),
  amo('amoxor.w', 'amo', 2, 0x04),
  amo('amoand.w', 'amo', 2, 0x0c),
  amo('amoor.w', 'amo', 2, 0x08),
  amo('amomin.w', 'amo', 2, 0x10),
  amo('amomax.w', 'amo', 2, 0x14),
  amo('amominu.w', 'amo', 2, 0x18),
  amo('amomaxu.w', 'amo', 2, 0x1c),
  lr('lr.d', 3),
  amo('sc.d', 'sc', 3, 0x03),
  amo('amoswap.d', 'amo', 3, 0x01),
  amo('amoadd.d', 'amo', 3, 0x00),
  amo('amoxor.d', 'amo', 3, 0x04),
  amo('amoand.d', 'amo', 3, 0x0c),
  amo('amoor.d', 'amo', 3, 0x08),
  amo('amomin.d', 'amo', 3, 0x10),
  amo('amomax.d', 'amo', 3, 0x14),
  amo('amominu.d', 'amo', 3, 0x18),
  amo('amomaxu.d', 'amo', 3, 0x1c),
  csr('csrrw', 'csr', 1),
  csr('csrrs', 'csr', 2),
  csr('csrrc', 'csr', 3),
  csr('csrrwi', 'csr-imm', 5),
  csr('csrrsi', 'csr-imm', 6),
  csr('csrrci', 'csr-imm', 7),
] as const;

/** Every RV64IMAC mnemonic berm decodes (compressed forms decode to one of these). */
export type Op = (typeof INSTRUCTIONS)[number]['name'];

/** Mnemonics whose entry has the given kind, e.g. `OpOfKind<'load'>` is 'lb' | 'lh' | ... */
export type OpOfKind<K extends Kind> = Extract<(typeof INSTRUCTIONS)[number], { kind: K }>['name'];

/** The table entry of each mnemonic. */
export const ENTRY: Readonly<Record<Op, Entry<Op>>> = Object.fromEntries(
  INSTRUCTIONS.map((e) => [e.name, e as Entry<Op>]),
) as Record<Op, Entry<Op>>;

/** The mnemonics of one kind, in table order. */
export function opsOfKind<K extends Kind>(kind: K): OpOfKind<K>[] {
  return INSTRUCTIONS.filter((e) => e.kind === kind).map((e) => e.name as OpOfKind<K>);
}

/**
 * One compressed form: its own mnemonic, the base instruction it expands to, and when the spec
 * reserves it (`reservedIfZero`: the named field of the expansion is zero, e.g. c.addi16sp's
 * nzimm, c.lwsp's rd, c.jr's rs1; such halfwords are illegal and no later entry is tried).
 */
export interface CEntry<N extends string = string> {
  readonly name: N;
  readonly expands: Op;
  readonly match: number;
  readonly mask: number;
  readonly layout: CLayout;
  readonly reservedIfZero?: 'rd' | 'rs1' | 'imm';
}

function cdef<N extends string>(
  name: N,
  expands: Op,
  match: number,
  mask: number,
  layout: CLayout,
  reservedIfZero?: CEntry['reservedIfZero'],
): CEntry<N> {
  return reservedIfZero === undefined
    ? { name, expands, match, mask, layout }
    : { name, expands, match, mask, layout, reservedIfZero };
}

// Masks: quadrant and funct3 (0xe003), plus bits 11:10 (0x0c00), bit 12 and bits 6:5 (0x1060),
// the rd field 11:7 (0x0f80) or the rs2 field 6:2 (0x007c) where they select the form.
/**
 * The RV64C forms, quadrant by quadrant in the order of the spec's RVC listings. C.FLD, C.FSD,
 * C.FLDSP and C.FSDSP (D extension) and the reserved rows have no entry: they decode as illegal.
 */
export const COMPRESSED = [
  cdef('c.addi4spn', 'addi', 0x0000, 0xe003, 'ciw-addi4spn', 'imm'),
  cdef('c.lw', 'lw', 0x4000, 0xe003, 'cl-w'),
  cdef('c.ld', 'ld', 0x6000, 0xe003, 'cl-d'),
  cdef('c.sw', 'sw', 0xc000, 0xe003, 'cs-w'),
  cdef('c.sd', 'sd', 0xe000, 0xe003, 'cs-d'),
  cdef('c.nop', 'addi', 0x0001, 0xef83, 'ci-nop'),
  cdef('c.addi', 'addi', 0x0001, 0xe003, 'ci'),
  // RV32's c.jal; on RV64 c.addiw, reserved with rd = x0
  cdef('c.addiw', 'addiw', 0x2001, 0xe003, 'ci', 'rd'),
  cdef('c.li', 'addi', 0x4001, 0xe003, 'ci-li'),
  cdef('c.addi16sp', 'addi', 0x6101, 0xef83, 'ci-addi16sp', 'imm'),
  cdef('c.lui', 'lui', 0x6001, 0xe003, 'ci-lui', 'imm'),
  cdef('c.srli', 'srli', 0x8001, 0xec03, 'cb-shift'),
  cdef('c.srai', 'srai', 0x8401, 0xec03, 'cb-shift'),
  cdef('c.andi', 'andi', 0x8801, 0xec03, 'cb-andi'),
  cdef('c.sub', 'sub', 0x8c01, 0xfc63, 'ca'),
  cdef('c.xor', 'xor', 0x8c21, 0xfc63, 'ca'),
  cdef('c.or', 'or', 0x8c41, 0xfc63, 'ca'),
  cdef('c.and', 'and', 0x8c61, 0xfc63, 'ca'),
  cdef('c.subw', 'subw', 0x9c01, 0xfc63, 'ca'),
  cdef('c.addw', 'addw', 0x9c21, 0xfc63, 'ca'),
  cdef('c.j', 'jal', 0xa001, 0xe003, 'cj'),
  cdef('c.beqz', 'beq', 0xc001, 0xe003, 'cb-branch'),
  cdef('c.bnez', 'bne', 0xe001, 0xe003, 'cb-branch'),
  cdef('c.slli', 'slli', 0x0002, 0xe003, 'ci-slli'),
  cdef('c.lwsp', 'lw', 0x4002, 0xe003, 'ci-lwsp', 'rd'),
  cdef('c.ldsp', 'ld', 0x6002, 0xe003, 'ci-ldsp', 'rd'),
  cdef('c.jr', 'jalr', 0x8002, 0xf07f, 'cr-jr', 'rs1'),
  cdef('c.mv', 'add', 0x8002, 0xf003, 'cr-mv'),
  cdef('c.ebreak', 'ebreak', 0x9002, 0xffff, 'cr-ebreak'),
  cdef('c.jalr', 'jalr', 0x9002, 0xf07f, 'cr-jalr'),
  cdef('c.add', 'add', 0x9002, 0xf003, 'cr-add'),
  cdef('c.swsp', 'sw', 0xc002, 0xe003, 'css-w'),
  cdef('c.sdsp', 'sd', 0xe002, 0xe003, 'css-d'),
] as const;

/** Every compressed mnemonic. */
export type CName = (typeof COMPRESSED)[number]['name'];

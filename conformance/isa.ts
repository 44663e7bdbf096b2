/**
 * Instruction groups the conformance generators draw from, taken from the ISA table
 * (src/riscv/isa.ts), so that an instruction added there is generated and counted here.
 */
import { COMPRESSED as C_TABLE, INSTRUCTIONS, opsOfKind, type Kind } from '../src/riscv/isa.js';

const ofKinds = (...kinds: Kind[]): string[] =>
  INSTRUCTIONS.filter((e) => kinds.includes(e.kind)).map((e) => e.name);

/** Every 32-bit mnemonic, in the ISA table's order (the coverage report's order). */
export const MNEMONICS: string[] = INSTRUCTIONS.map((e) => e.name);

/** Every compressed mnemonic, in the ISA table's order. */
export const COMPRESSED: string[] = C_TABLE.map((e) => e.name);

/** Register-immediate ALU ops that take a 12-bit signed immediate (addi ... andi, addiw). */
export const I_OPS: string[] = ofKinds('op-imm', 'op-imm-32');

/** Register-register ops other than shifts: RV64I OP/OP-32 and M. */
export const R_OPS: string[] = ofKinds('op', 'op-32', 'mul', 'mul-32');

/** Every register-register op (R format), shifts included, in table order. */
export const R_ALL: string[] = INSTRUCTIONS.filter((e) => e.format === 'R').map((e) => e.name);

/** Shifts by a register: sll, srl, sra, then the word forms. */
export const SHIFT_OPS: string[] = ofKinds('shift', 'shift-32');

/** Shifts by a 6-bit immediate. */
export const SHIFT_IMM: string[] = opsOfKind('shift-imm');

/** Word shifts by a 5-bit immediate. */
export const SHIFT_IMM_W: string[] = opsOfKind('shift-imm-32');

const byWidth = (kind: 'load' | 'store'): [string, number][] =>
  INSTRUCTIONS.filter((e) => e.kind === kind)
    .map((e) => ({ name: e.name, width: e.width!, signed: e.signed ?? false }))
    .sort((a, b) => a.width - b.width || Number(b.signed) - Number(a.signed))
    .map((e) => [e.name, e.width]);

/** Loads with their access width in bytes (narrowest first, signed before unsigned). */
export const LOADS: [string, number][] = byWidth('load');

/** Stores with their access width in bytes. */
export const STORES: [string, number][] = byWidth('store');

/** AMO operations without their .w/.d suffix, in the spec's order. */
export const AMOS: string[] = opsOfKind('amo')
  .filter((n) => n.endsWith('.w'))
  .map((n) => n.slice(0, -2));

/** Conditional branches. */
export const BRANCHES: string[] = opsOfKind('branch');

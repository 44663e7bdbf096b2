/**
 * Instruction groups the conformance generators draw from (RISC-V unprivileged spec: RV64I
 * immediate ops, loads, stores and branches; A-extension AMOs). conformance/coverage.ts keeps the
 * complete mnemonic list the suite must cover.
 */

/** Register-immediate ALU ops that take a 12-bit signed immediate. */
export const I_OPS = ['addi', 'slti', 'sltiu', 'xori', 'ori', 'andi', 'addiw'];

/** Loads with their access width in bytes. */
export const LOADS: [string, number][] = [
  ['lb', 1],
  ['lbu', 1],
  ['lh', 2],
  ['lhu', 2],
  ['lw', 4],
  ['lwu', 4],
  ['ld', 8],
];

/** Stores with their access width in bytes. */
export const STORES: [string, number][] = [
  ['sb', 1],
  ['sh', 2],
  ['sw', 4],
  ['sd', 8],
];

/** AMO operations without their .w/.d suffix. */
export const AMOS = [
  'amoswap',
  'amoadd',
  'amoxor',
  'amoand',
  'amoor',
  'amomin',
  'amomax',
  'amominu',
  'amomaxu',
];

/** Conditional branches. */
export const BRANCHES = ['beq', 'bne', 'blt', 'bge', 'bltu', 'bgeu'];

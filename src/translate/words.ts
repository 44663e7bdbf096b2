/**
 * Which guest registers hold sign-extended 32-bit values ("word values"), as masks (bit r: xr):
 * stepped over one instruction ({@link stepSext}) and taken into every block as a must-analysis
 * (a register is a word value on entry to a block only when it is one at the end of every
 * predecessor). The optimising tier writes bitwise operations of two word values as 32-bit
 * operations (emit-core.ts EmitterCore.narrow). Knows nothing of Wasm.
 */
import type { Instr } from '../riscv/instr.js';
import { ENTRY } from '../riscv/isa.js';
import { localSuccessors, type BasicBlock, type FunctionCfg } from './cfg.js';

/** Mnemonics whose result is always a sign-extended 32-bit value (RV64I "W" forms, narrow loads, compares). */
const SEXT_RESULTS = new Set<string>([
  'addiw',
  'slliw',
  'srliw',
  'sraiw',
  'addw',
  'subw',
  'sllw',
  'srlw',
  'sraw',
  'mulw',
  'divw',
  'divuw',
  'remw',
  'remuw',
  'lb',
  'lh',
  'lw',
  'lbu',
  'lhu',
  'slt',
  'sltu',
  'slti',
  'sltiu',
  'lui',
]);

/**
 * The sign-extended-32-bit register mask after `ins` (a call when `call`: it writes rd, a0, a1),
 * given `mask` before it (see EmitterCore.narrow). Bitwise operations of two such values (an
 * immediate is one) and an arithmetic right shift of one keep the property, `li` (addi from x0)
 * has it, a move (`mv`: addi with 0, or `c.mv`: add from x0) copies it; any other write clears it.
 */
export function stepSext(mask: number, ins: Instr, call: boolean): number {
  const bit = (r: number) => (r === 0 ? 0 : 1 << r);
  if (call) return mask & ~(bit(ins.rd) | bit(10) | bit(11));
  if (ins.op === 'ecall') return mask & ~(bit(10) | bit(11));
  if (ins.op === 'illegal' || !ENTRY[ins.op].writesRd || ins.rd === 0) return mask;
  const has = (r: number) => (mask & (1 << r)) !== 0 || r === 0;
  let keeps = SEXT_RESULTS.has(ins.op);
  if (ins.op === 'andi' || ins.op === 'ori' || ins.op === 'xori' || ins.op === 'srai') keeps = has(ins.rs1);
  if (ins.op === 'addi') keeps = ins.rs1 === 0 || (ins.imm === 0 && has(ins.rs1));
  // `c.mv` expands to add rd, x0, rs2
  if (ins.op === 'add') keeps = (ins.rs1 === 0 && has(ins.rs2)) || (ins.rs2 === 0 && has(ins.rs1));
  if (ins.op === 'and' || ins.op === 'or' || ins.op === 'xor') keeps = has(ins.rs1) && has(ins.rs2);
  if (ins.op === 'sra') keeps = has(ins.rs1);
  return keeps ? mask | bit(ins.rd) : mask & ~bit(ins.rd);
}

/** The word-value mask after block `b`'s straight-line code (inlined code included). */
function throughBlock(mask: number, b: BasicBlock): number {
  for (let i = 0; i < b.instrs.length; i++) {
    const call = b.calls.get(i);
    mask = stepSext(mask, b.instrs[i], call !== undefined);
    if (call?.inline) {
      call.inline.instrs.forEach((mi, k) => (mask = stepSext(mask, mi, call.inline!.calls.has(k))));
    }
  }
  return mask;
}

/**
 * The word values on entry to each block of `cfg` (by start address). The entry and the
 * jump-table targets know only x0; a block reached from several places keeps what all agree on.
 */
export function wordValues(cfg: FunctionCfg): Map<number, number> {
  const at = new Map<number, number>();
  const fixed = new Set([cfg.start, ...cfg.localTargets]);
  for (const a of fixed) if (cfg.blocks.has(a)) at.set(a, 1);
  const work = [...at.keys()];
  while (work.length > 0) {
    const a = work.pop()!;
    const b = cfg.blocks.get(a)!;
    const out = throughBlock(at.get(a)!, b);
    for (const n of localSuccessors(b.term)) {
      if (!cfg.blocks.has(n)) continue;
      const old = at.get(n);
      const v = old === undefined ? out : old & out;
      if (v !== old) {
        at.set(n, v);
        work.push(n);
      }
    }
  }
  return at;
}

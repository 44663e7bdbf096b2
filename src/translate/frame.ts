/**
 * sp's offset from its value at the function's entry, where it is known: a forward dataflow over
 * one function's basic blocks in which `addi sp, sp, imm` adds imm and any other write to sp
 * makes the offset unknown. A call leaves sp as it was (the callee gets a copy), so does an
 * ecall. The optimising tier uses it to skip the bounds check of an access inside the
 * function's own frame (see emit-memory.ts MemoryEmitter.address). Knows nothing of Wasm.
 */
import type { Instr } from '../riscv/instr.js';
import { ENTRY } from '../riscv/isa.js';
import { localSuccessors, type BasicBlock, type FunctionCfg } from './cfg.js';

/** sp's offset from its entry value in bytes, or null when unknown. */
export type SpOffset = number | null;

/** sp's offset after `ins` ran with offset `d` before it. */
export function stepSp(d: SpOffset, ins: Instr): SpOffset {
  if (ins.op === 'illegal' || ins.rd !== 2 || !ENTRY[ins.op].writesRd) return d;
  return d !== null && ins.op === 'addi' && ins.rs1 === 2 ? d + ins.imm : null;
}

/** sp's offset after the straight-line code of block `b` (inlined code included). */
function throughBlock(d: SpOffset, b: BasicBlock): SpOffset {
  for (let i = 0; i < b.instrs.length; i++) {
    const ins = b.instrs[i];
    const inline = b.calls.get(i)?.inline;
    d = stepSp(d, ins);
    if (inline) for (const mi of inline.instrs) d = stepSp(d, mi);
  }
  return d;
}

/**
 * sp's offset on entry to each block of `cfg` (by start address): 0 at the function's entry,
 * null where paths disagree or an unknown write reached it. Jump-table targets are null.
 */
export function spOffsets(cfg: FunctionCfg): Map<number, SpOffset> {
  // undefined: no path seen yet
  const at = new Map<number, SpOffset | undefined>();
  const unknown = new Set(cfg.localTargets);
  const merge = (address: number, d: SpOffset): boolean => {
    if (!cfg.blocks.has(address)) return false;
    const old = at.get(address);
    const v = unknown.has(address) ? null : old === undefined ? d : old === d ? old : null;
    if (v === old && at.has(address)) return false;
    at.set(address, v);
    return true;
  };
  merge(cfg.start, 0);
  for (const a of unknown) merge(a, null);
  const work = [...at.keys()];
  while (work.length > 0) {
    const a = work.pop()!;
    const b = cfg.blocks.get(a)!;
    const d = throughBlock(at.get(a) ?? null, b);
    for (const n of localSuccessors(b.term)) if (merge(n, d)) work.push(n);
  }
  const out = new Map<number, SpOffset>();
  for (const [a, d] of at) out.set(a, d ?? null);
  return out;
}

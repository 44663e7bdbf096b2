/**
 * Guest-register liveness (backward dataflow over a function's basic blocks, as 32-bit masks: bit
 * r for register xr) and, from it, which of the call convention's argument registers each
 * function reads (its calls' reads included, across the call graph). The optimising tier passes 0
 * for an argument its callee never reads, so Binaryen's dead-argument elimination drops the
 * parameter (it keeps one a function forwards to itself, as recursion does). Knows nothing of Wasm.
 */
import type { Instr } from '../riscv/instr.js';
import { ENTRY } from '../riscv/isa.js';
import type { BasicBlock, FunctionCfg, Target } from './cfg.js';

const bit = (r: number): number => (r === 0 ? 0 : 1 << r);
const mask = (regs: readonly number[]): number => regs.reduce((a, r) => a | bit(r), 0);

/** What a call (or tail call) reads: sp and a0..a7, the registers the call convention carries. */
export const CALL_ARGS = mask([2, 10, 11, 12, 13, 14, 15, 16, 17]);
/** What a call writes besides its link register: the results a0, a1. */
const CALL_RESULTS = mask([10, 11]);
/** What ecall reads (a7 the number, a0..a5) and writes (a0, a1). */
const ECALL_ARGS = mask([10, 11, 12, 13, 14, 15, 17]);
/** What a return reads: the results. */
const RETURN_USES = mask([10, 11]);

/** Registers an instruction reads, by its format (spec "Base Instruction Formats"). */
function uses(ins: Instr): number {
  if (ins.op === 'illegal') return 0;
  if (ins.op === 'ecall') return ECALL_ARGS;
  switch (ENTRY[ins.op].format) {
    case 'R':
    case 'S':
    case 'B':
    case 'AMO':
      return bit(ins.rs1) | bit(ins.rs2);
    case 'I':
    case 'SH6':
    case 'SH5':
    case 'CSR':
      return bit(ins.rs1);
    default:
      return 0;
  }
}

/** Registers an instruction writes. */
function defs(ins: Instr): number {
  if (ins.op === 'illegal') return 0;
  if (ins.op === 'ecall') return CALL_RESULTS;
  return ENTRY[ins.op].writesRd ? bit(ins.rd) : 0;
}

/** Registers a call or tail call to `target` reads (null: through the dispatcher, any function). */
export type CallUses = (target: number | null) => number;

/** Step `live` (live after the instructions) backward over straight-line code with calls. */
function backward(
  live: number,
  instrs: readonly Instr[],
  calls: ReadonlyMap<number, number | null>,
  callUses: CallUses,
): number {
  for (let i = instrs.length - 1; i >= 0; i--) {
    const t = calls.get(i);
    live = step(live, instrs[i], t === undefined ? undefined : { target: t }, callUses);
  }
  return live;
}

/** Step `live` (live after `ins`) backward over one instruction, a call when `call` is given. */
function step(
  live: number,
  ins: Instr,
  call:
    { target: number | null; inline?: { instrs: Instr[]; calls: Map<number, number | null> } } | undefined,
  callUses: CallUses,
): number {
  if (call?.inline) {
    // the link register is written first, then the inlined code runs
    return backward(live, call.inline.instrs, call.inline.calls, callUses) & ~bit(ins.rd);
  }
  if (call) {
    live = (live & ~(bit(ins.rd) | CALL_RESULTS)) | callUses(call.target);
    return call.target === null ? live | bit(ins.rs1) : live;
  }
  return (live & ~defs(ins)) | uses(ins);
}

/** Guest-register liveness of one function under a model of what calls read. */
export class Liveness {
  private readonly live = new Map<number, number>();
  /**
   * @param cfg the analysed function
   * @param callUses what each call or tail call reads (default: every argument register)
   */
  constructor(
    private readonly cfg: FunctionCfg,
    private readonly callUses: CallUses = () => CALL_ARGS,
  ) {
    const blocks = [...cfg.blocks.values()].sort((a, b) => b.start - a.start);
    for (const b of blocks) this.live.set(b.start, 0);
    for (let changed = true; changed;) {
      changed = false;
      for (const b of blocks) {
        const v = this.walk(b, null);
        if (v !== this.live.get(b.start)) {
          this.live.set(b.start, v);
          changed = true;
        }
      }
    }
  }

  /** The registers live on entry to the block at `address` (bit r: xr). */
  liveIn(address: number): number {
    return this.live.get(address) ?? 0;
  }

  /** The registers live after each instruction of block `b`, by instruction index. */
  after(b: BasicBlock): number[] {
    const out = new Array<number>(b.instrs.length).fill(0);
    this.walk(b, out);
    return out;
  }

  /** Live registers at `t` (a block, a function, or a trap). */
  private at(t: Target | number): number {
    const address = typeof t === 'number' ? t : t.kind === 'local' ? t.address : -1;
    if (address >= 0 && this.cfg.blocks.has(address)) return this.live.get(address)!;
    // a tail call (or falling into the next function) reads what the call reads; a trap nothing
    if (typeof t === 'number') return this.callUses(t);
    return t.kind === 'function' ? this.callUses(t.address) : 0;
  }

  /** Live registers after block `b`. */
  private out(b: BasicBlock): number {
    const t = b.term;
    switch (t.kind) {
      case 'fall':
        return this.at(t.next);
      case 'branch':
        return this.at(t.taken) | this.at(t.next);
      case 'jump':
        return this.at(t.target);
      case 'return':
        return RETURN_USES;
      case 'indirect-jump': {
        // a jump-table target of this function, or anywhere through the dispatcher
        let m = this.callUses(null);
        for (const a of this.cfg.localTargets) m |= this.at(a);
        return m;
      }
      case 'fell-off':
        return 0;
    }
  }

  /** Live registers on entry to `b`; fills `after` (by instruction index) when given. */
  private walk(b: BasicBlock, after: number[] | null): number {
    let live = this.out(b);
    const n = b.instrs.length;
    for (let i = n - 1; i >= 0; i--) {
      if (after) after[i] = live;
      // a return is a Wasm return of (a0, a1) whatever ra holds: it reads only the results
      if (i === n - 1 && b.term.kind === 'return') continue;
      live = step(live, b.instrs[i], b.calls.get(i), this.callUses);
    }
    // the entry's stack check reads sp
    if (b.start === this.cfg.start) live |= bit(2);
    return live;
  }
}

/** The functions `cfg` calls or tail-calls directly (inlined code's calls included). */
function callees(cfg: FunctionCfg): Set<number> {
  const out = new Set<number>();
  const add = (t: Target | number) => {
    if (typeof t === 'number') out.add(t);
    else if (t.kind === 'function') out.add(t.address);
  };
  for (const b of cfg.blocks.values()) {
    for (const c of b.calls.values()) {
      if (c.target !== null) out.add(c.target);
      for (const t of c.inline?.calls.values() ?? []) if (t !== null) out.add(t);
    }
    const t = b.term;
    if (t.kind === 'fall' && !cfg.blocks.has(t.next)) add(t.next);
    if (t.kind === 'branch') {
      add(t.taken);
      if (!cfg.blocks.has(t.next)) add(t.next);
    }
    if (t.kind === 'jump') add(t.target);
  }
  return out;
}

/**
 * For each function (by entry address), the argument registers (sp and a0..a7, as a mask) it may
 * read: those live at its entry when a direct call or tail call reads only what its target
 * reads (a least fixpoint over the call graph, so recursion alone keeps no argument alive). A
 * call through the dispatcher reads every argument. sp is always read (the entry's stack check).
 * Functions not in `cfgs` (none should be called) read every argument.
 */
export function argumentUses(cfgs: readonly FunctionCfg[]): Map<number, number> {
  const uses = new Map<number, number>(cfgs.map((c) => [c.start, bit(2)]));
  const callUses: CallUses = (t) => (t === null ? CALL_ARGS : (uses.get(t) ?? CALL_ARGS));
  const callers = new Map<number, FunctionCfg[]>();
  for (const c of cfgs) {
    for (const t of callees(c)) {
      const list = callers.get(t);
      if (list) list.push(c);
      else callers.set(t, [c]);
    }
  }
  const work = [...cfgs];
  const queued = new Set(cfgs.map((c) => c.start));
  while (work.length > 0) {
    const c = work.pop()!;
    queued.delete(c.start);
    const v = (new Liveness(c, callUses).liveIn(c.start) & CALL_ARGS) | bit(2);
    if (v === uses.get(c.start)) continue;
    uses.set(c.start, v);
    for (const caller of callers.get(c.start) ?? []) {
      if (!queued.has(caller.start)) {
        queued.add(caller.start);
        work.push(caller);
      }
    }
  }
  return uses;
}

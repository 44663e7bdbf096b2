/**
 * Control-flow analysis of one guest function: decode its bytes, find basic-block leaders and
 * classify every control transfer (return, call, tail call, local jump,
 * indirect). Knows nothing of Wasm.
 */
import { decode } from '../riscv/decode.js';
import type { Instr } from '../riscv/instr.js';
import { INSTRUCTIONS, type Flow, type Op } from '../riscv/isa.js';

/** How a basic block ends. */
export type Terminator =
  /** falls through to `next` (the block after a leader split, or after a call) */
  | { kind: 'fall'; next: number }
  /** conditional branch: `taken` when the condition holds, else `next` */
  | { kind: 'branch'; instr: Instr; pc: number; taken: Target; next: number }
  /**
   * unconditional jump: jal/jalr with rd = x0 and a known target, or with a link register and a
   * target inside this function (not a call: `link` is the rd that receives pc + size)
   */
  | { kind: 'jump'; pc: number; target: Target; link?: { rd: number; value: number } }
  /** `jalr x0, 0(ra)` */
  | { kind: 'return'; pc: number }
  /** `jalr x0, imm(rs1)` with an unknown target: a jump table inside the function or a tail call */
  | { kind: 'indirect-jump'; pc: number; rs1: number; imm: number }
  /** execution leaves the function's bytes */
  | { kind: 'fell-off'; pc: number };

/** Where a direct transfer lands. */
export type Target =
  | { kind: 'local'; address: number }
  | { kind: 'function'; address: number }
  /** neither inside this function nor a function entry: traps BadIndirectTarget when taken */
  | { kind: 'invalid'; address: number };

/**
 * The blocks of the same function that `term` can continue to (the taken target before the
 * fall-through of a branch); calls, returns, tail calls and indirect jumps add none. The edge
 * list of the forward data-flow analyses over one function (frame.ts, words.ts).
 */
export function localSuccessors(term: Terminator): number[] {
  const next: number[] = [];
  if (term.kind === 'fall') next.push(term.next);
  if (term.kind === 'branch') {
    if (term.taken.kind === 'local') next.push(term.taken.address);
    next.push(term.next);
  }
  if (term.kind === 'jump' && term.target.kind === 'local') next.push(term.target.address);
  return next;
}

/** A call in the middle of a block: jal/jalr with rd != x0. Execution continues after it. */
export interface CallSite {
  index: number;
  /** known target address, or null for an indirect call through rs1 + imm */
  target: number | null;
  /**
   * For calls through an alternate link register (psABI millicode such as gcc's
   * `jal t0, __riscv_save_N`, which returns with `jr t0` and changes the caller's sp): the callee's
   * straight-line instructions, inlined at the call site in place of a Wasm call.
   */
  inline?: { instrs: Instr[]; pcs: number[]; calls: Map<number, number | null> };
}

/** One basic block: instructions [start, end) and how it ends. */
export interface BasicBlock {
  start: number;
  end: number;
  instrs: Instr[];
  /** pc of each instruction */
  pcs: number[];
  /** calls inside the block, by instruction index (the call instruction itself is in `instrs`) */
  calls: Map<number, CallSite>;
  term: Terminator;
}

/** The analysed function. */
export interface FunctionCfg {
  start: number;
  end: number;
  blocks: Map<number, BasicBlock>;
  /** relocation-named addresses inside the function that indirect jumps may reach (jump tables) */
  localTargets: number[];
}

/** What the analysis needs to know about the whole image. */
export interface ImageFacts {
  /** start addresses of every guest function */
  functionEntries: ReadonlySet<number>;
  /** addresses named by relocations (any function) */
  relocationTargets: ReadonlySet<number>;
  /** the instruction at a guest address in executable memory, or null */
  decodeAt(address: number): Instr | null;
}

/**
 * The encoding at `off`: 16 bits for a compressed instruction (low bits not 11), else 32 bits;
 * null when the bytes end inside it.
 */
export function instructionBits(bytes: Uint8Array, off: number): number | null {
  if (off + 2 > bytes.length) return null;
  const low = bytes[off] | (bytes[off + 1] << 8);
  if ((low & 3) !== 3) return low;
  if (off + 4 > bytes.length) return null;
  return (low | (bytes[off + 2] << 16) | (bytes[off + 3] << 24)) >>> 0;
}

/** Most instructions inlined for one alternate-link-register call or tail jump. */
const MAX_INLINE = 64;

/**
 * Registers a Wasm call carries into a translated function: sp and a0..a7 as parameters, gp and tp
 * as globals (and x0).
 */
const CARRIED = new Set([0, 2, 3, 4, 10, 11, 12, 13, 14, 15, 16, 17]);
const STORES = new Set<Op | 'illegal'>(['sb', 'sh', 'sw', 'sd']);

/** Straight-line code to run in place of a call or tail jump (see {@link inlineCode}). */
interface Inlined {
  instrs: Instr[];
  pcs: number[];
  /** calls inside it, by instruction index -> target (null: an indirect call, `jalr ra, imm(rs1)`) */
  calls: Map<number, number | null>;
  /**
   * 'link': it ended with `jalr x0, 0(link)`, not included; 'return': with `ret`, included last;
   * 'tail': (tail mode only) with a jump to the function entry `tailTarget`, included last
   */
  end: 'link' | 'return' | 'tail';
  tailTarget?: number;
  /** it reads a register the call convention does not carry before writing it (ra saved to the stack aside) */
  readsCallerState: boolean;
}

/**
 * Follow code from `target` until it returns: with `link` != 0, until `jalr x0, 0(link)` (psABI
 * millicode such as gcc's `jal t0, __riscv_save_N`, or LLVM machine-outliner code called with
 * `call t0, OUTLINED_FUNCTION_N`); with `link` = 0 (a tail jump), until `ret` or a tail call.
 * Plain instructions and calls (`jal ra` to a function entry, `jalr ra`) are collected, `jal x0`
 * is followed; anything else
 * (branches, other indirect jumps, traps, a write to `link`) gives up. Such code follows no calling
 * convention (it reads and writes the caller's registers, changes its sp), so it runs inlined, as
 * if it were the caller's own code.
 */
function inlineCode(facts: ImageFacts, target: number, link: number, depth = 0): Inlined | undefined {
  const instrs: Instr[] = [];
  const pcs: number[] = [];
  const calls = new Map<number, number | null>();
  const written = new Set<number>();
  const known = new Map<number, number>();
  let readsCallerState = false;
  let pc = target;
  const call = (ins: Instr, to: number | null): boolean => {
    if (to !== null && !facts.functionEntries.has(to)) return false;
    if (to === null && !CARRIED.has(ins.rs1) && !written.has(ins.rs1)) readsCallerState = true;
    calls.set(instrs.length, to);
    instrs.push(ins);
    pcs.push(pc);
    known.clear();
    written.add(1);
    pc += ins.size;
    return true;
  };
  // A tail call at the end: when its target reads registers the convention does not carry, it
  // must run here too (in a fresh frame it would see none of this frame's registers).
  const endTail = (ins: Instr, to: number): Inlined => {
    const more = depth < 4 ? inlineCode(facts, to, 0, depth + 1) : undefined;
    if (more !== undefined && more.end !== 'link' && more.readsCallerState) {
      for (const [k, t] of more.calls) calls.set(instrs.length + k, t);
      instrs.push(...more.instrs);
      pcs.push(...more.pcs);
      return { instrs, pcs, calls, end: more.end, tailTarget: more.tailTarget, readsCallerState };
    }
    instrs.push(ins);
    pcs.push(pc);
    return { instrs, pcs, calls, end: 'tail', tailTarget: to, readsCallerState };
  };
  for (let steps = 0; steps < MAX_INLINE; steps++) {
    const ins = facts.decodeAt(pc);
    if (ins === null) return undefined;
    if (ins.op === 'jalr') {
      if (ins.rd === 0 && ins.imm === 0 && link !== 0 && ins.rs1 === link) {
        return { instrs, pcs, calls, end: 'link', readsCallerState };
      }
      if (ins.rd === 0 && ins.imm === 0 && link === 0 && ins.rs1 === 1) {
        instrs.push(ins);
        pcs.push(pc);
        return { instrs, pcs, calls, end: 'return', readsCallerState };
      }
      const base = known.get(ins.rs1);
      if (ins.rd === 1 && call(ins, base === undefined ? null : (base + ins.imm) & ~1)) continue;
      const to = base === undefined ? -1 : (base + ins.imm) & ~1;
      if (ins.rd === 0 && link === 0 && facts.functionEntries.has(to)) return endTail(ins, to);
      return undefined;
    }
    if (ins.op === 'jal') {
      if (ins.rd === 0 && link === 0 && facts.functionEntries.has(pc + ins.imm)) {
        return endTail(ins, pc + ins.imm);
      }
      if (ins.rd === 0) {
        pc += ins.imm;
        continue;
      }
      if (ins.rd === 1 && call(ins, pc + ins.imm)) continue;
      return undefined;
    }
    if (isControl(ins) || STOPS.has(ins.op) || (link !== 0 && writesRd(ins) && ins.rd === link)) {
      return undefined;
    }
    // (saving ra to the stack is any non-leaf prologue's; any other register read counts, stored
    // values included: outlined code stores the caller's s0 into a result, say)
    const saveRa = STORES.has(ins.op) && ins.rs1 === 2 && ins.rs2 === 1;
    if (!CARRIED.has(ins.rs1) && !written.has(ins.rs1)) readsCallerState = true;
    if (!saveRa && !CARRIED.has(ins.rs2) && !written.has(ins.rs2)) readsCallerState = true;
    if (ins.op === 'auipc') known.set(ins.rd, pc + ins.imm);
    else if (ins.op === 'lui') known.set(ins.rd, ins.imm);
    else if (ins.op === 'addi' && known.has(ins.rs1)) known.set(ins.rd, known.get(ins.rs1)! + ins.imm);
    else if (writesRd(ins)) known.delete(ins.rd);
    if (writesRd(ins)) written.add(ins.rd);
    instrs.push(ins);
    pcs.push(pc);
    pc += ins.size;
  }
  return undefined;
}

/** The relocation targets in ascending order, sorted once per image (per set). */
const sortedCache = new WeakMap<ReadonlySet<number>, number[]>();
function sortedTargets(set: ReadonlySet<number>): number[] {
  let a = sortedCache.get(set);
  if (a === undefined) {
    a = [...set].sort((x, y) => x - y);
    sortedCache.set(set, a);
  }
  return a;
}

/** The first index of sorted `a` whose value is >= v. */
function lowerBound(a: number[], v: number): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (a[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The mnemonics whose ISA-table `flow` is one of `flows` ('illegal' never is). */
function withFlow(...flows: Flow[]): ReadonlySet<Op | 'illegal'> {
  return new Set(INSTRUCTIONS.filter((e) => flows.includes(e.flow)).map((e) => e.name));
}
const BRANCHES = withFlow('branch');
/** Control leaves the straight line (or goes to the host): known register values do not survive. */
const CONTROL = withFlow('branch', 'jump', 'host');
/** Execution does not continue after these (ebreak traps; illegal encodings trap). */
const STOPS = new Set<Op | 'illegal'>([...withFlow('stop'), 'illegal']);
/** The mnemonics that write rd (ISA table `writesRd`). */
const WRITES_RD = new Set<Op | 'illegal'>(INSTRUCTIONS.filter((e) => e.writesRd).map((e) => e.name));

/** Per-mnemonic facts the analysis tests on every instruction, as bits (one lookup per decode). */
const F_BRANCH = 1;
const F_CONTROL = 2;
const F_STOP = 4;
const F_WRITES_RD = 8;
const F_JAL = 16;
const F_JALR = 32;
/** auipc, lui, addi: the register values resolveJalrs follows */
const F_VALUE = 64;
/**
 * Each instruction's flags by Instr.code (the ISA table's index; 'illegal', last, stops a basic
 * block): an array read per instruction.
 */
const FLAGS_BY_CODE = Uint8Array.from([
  ...INSTRUCTIONS.map(
    (e) =>
      (BRANCHES.has(e.name) ? F_BRANCH : 0) |
      (CONTROL.has(e.name) ? F_CONTROL : 0) |
      (STOPS.has(e.name) ? F_STOP : 0) |
      (WRITES_RD.has(e.name) ? F_WRITES_RD : 0) |
      (e.name === 'jal' ? F_JAL : 0) |
      (e.name === 'jalr' ? F_JALR : 0) |
      (e.name === 'auipc' || e.name === 'lui' || e.name === 'addi' ? F_VALUE : 0),
  ),
  F_STOP,
]);

/**
 * Scratch arrays of {@link analyseFunction}, reused by every call and grown as needed (none of them
 * outlives a call): allocating a typed array costs about a microsecond in a freshly started
 * process, and a large image has thousands of functions.
 */
let scratchFlags = new Uint8Array(0);
let scratchSlots = new Int32Array(0);
let scratchLeader = new Uint8Array(0);
const scratchValue = new Float64Array(32);
const scratchKnown = new Uint8Array(32);

/** A reused array of at least `n` elements (a new one, twice the size, when it is too short). */
function atLeast<A extends Uint8Array | Int32Array>(a: A, n: number, make: (n: number) => A): A {
  return a.length >= n ? a : make(Math.max(n, 2 * a.length));
}

/**
 * Analyse one function. `code` holds the function's bytes, starting at guest address `start`.
 * A trailing odd byte or a truncated instruction decodes as illegal (it traps only if reached).
 */
export function analyseFunction(code: Uint8Array, start: number, facts: ImageFacts): FunctionCfg {
  const end = start + code.length;
  const instrs: Instr[] = [];
  const pcs: number[] = [];
  // the FLAGS_BY_CODE of each instruction, by index
  // (every index below the instruction count is written before it is read)
  const flags = (scratchFlags = atLeast(scratchFlags, (code.length >> 1) + 1, (n) => new Uint8Array(n)));
  // registers that auipc/lui/addi write, and that jalrs read: when no jalr reads such a register,
  // no jalr target can be resolved (resolveJalrs would find none) and leaders need one pass
  let valueRegs = 0;
  let jalrRegs = 0;
  // instruction index by half-word offset (-1: no instruction starts there); instructions are
  // 2-byte aligned, so the table is dense and replaces a Map lookup per address
  const slots = (scratchSlots = atLeast(scratchSlots, (code.length >> 1) + 1, (n) => new Int32Array(n)));
  slots.fill(-1, 0, (code.length >> 1) + 1);
  const size = code.length;
  for (let off = 0; off < size;) {
    // instructionBits written out (this loop runs once per instruction of the image, mostly before
    // V8 has optimised it); truncated: the all-zero half-word is illegal
    let bits = 0;
    if (off + 2 <= size) {
      const low = code[off] | (code[off + 1] << 8);
      if ((low & 3) !== 3) bits = low;
      else if (off + 4 <= size) bits = (low | (code[off + 2] << 16) | (code[off + 3] << 24)) >>> 0;
    }
    const ins = decode(bits);
    const k = instrs.length;
    if ((off & 1) === 0) slots[off >> 1] = k;
    const f = FLAGS_BY_CODE[ins.code];
    flags[k] = f;
    if ((f & F_VALUE) !== 0) valueRegs |= 1 << ins.rd;
    else if ((f & F_JALR) !== 0) jalrRegs |= 1 << ins.rs1;
    instrs[k] = ins;
    pcs[k] = start + off;
    off += ins.size;
  }
  const resolvable = (valueRegs & jalrRegs) !== 0;
  // the instruction count, read once (the loops below run over every instruction)
  const count = instrs.length;
  const indexAt = (a: number): number => {
    const off = a - start;
    return off >= 0 && off < code.length && (off & 1) === 0 ? slots[off >> 1] : -1;
  };

  const inside = (a: number) => indexAt(a) >= 0;
  const classify = (address: number): Target => {
    // A jump to our own entry stays local: a loop keeps every register, as the hardware would
    // (a tail call would start with fresh locals for the registers that are not arguments).
    if (address === start) return { kind: 'local', address };
    if (facts.functionEntries.has(address)) return { kind: 'function', address };
    if (inside(address)) return { kind: 'local', address };
    return { kind: 'invalid', address };
  };

  const localTargets: number[] = [];
  const named = sortedTargets(facts.relocationTargets);
  for (let i = lowerBound(named, start); i < named.length && named[i] < end; i++) {
    if (named[i] !== start && inside(named[i])) localTargets.push(named[i]);
  }
  // leaders, by instruction index (every leader is an instruction's address)
  const leader = (scratchLeader = atLeast(scratchLeader, instrs.length, (n) => new Uint8Array(n)));
  leader.fill(0, 0, instrs.length);
  let leaderCount = 0;
  const addLeader = (a: number): void => {
    const i = indexAt(a);
    if (i >= 0 && leader[i] === 0) {
      leader[i] = 1;
      leaderCount++;
    }
  };
  addLeader(start);
  for (const a of localTargets) addLeader(a);

  // Known register values inside straight-line code resolve auipc+jalr pairs (not by adjacency:
  // any instructions may sit between them as long as they do not clobber the register).
  const jalrTargets = new Map<number, number>(); // instruction index -> resolved target
  // (resolveJalrs clears `known` before it reads either)
  const value = scratchValue;
  const known = scratchKnown;
  const set = (rd: number, v: number | undefined): void => {
    if (rd === 0) return;
    if (v === undefined) known[rd] = 0;
    else {
      known[rd] = 1;
      value[rd] = v;
    }
  };
  const resolveJalrs = () => {
    known.fill(0);
    for (let i = 0; i < count; i++) {
      if (leader[i] !== 0) known.fill(0);
      const f = flags[i];
      if ((f & (F_VALUE | F_JALR | F_CONTROL | F_WRITES_RD)) === 0) continue;
      const ins = instrs[i];
      const pc = pcs[i];
      switch (ins.op) {
        case 'auipc':
          set(ins.rd, pc + ins.imm);
          break;
        case 'lui':
          set(ins.rd, ins.imm);
          break;
        case 'addi': {
          const v = ins.rs1 === 0 ? 0 : known[ins.rs1] !== 0 ? value[ins.rs1] : undefined;
          set(ins.rd, v === undefined ? undefined : v + ins.imm);
          break;
        }
        case 'jalr': {
          if (known[ins.rs1] !== 0) jalrTargets.set(i, (value[ins.rs1] + ins.imm) & ~1);
          known.fill(0);
          break;
        }
        default:
          if ((f & F_CONTROL) !== 0) known.fill(0);
          else if ((f & F_WRITES_RD) !== 0 && ins.rd !== 0) known[ins.rd] = 0;
      }
    }
  };

  // Leaders depend on resolved jalr targets and vice versa: iterate to a fixed point. The leader
  // pass adds leaders only as the resolved targets say, so it stops when they no longer change.
  let previous: Map<number, number> | null = null;
  for (;;) {
    jalrTargets.clear();
    if (resolvable) resolveJalrs();
    if (previous !== null && sameTargets(previous, jalrTargets)) break;
    previous = new Map(jalrTargets);
    const before = leaderCount;
    for (let i = 0; i < count; i++) {
      const f = flags[i];
      if ((f & (F_BRANCH | F_JAL | F_JALR | F_STOP)) === 0) continue;
      const ins = instrs[i];
      const pc = pcs[i];
      const next = pc + ins.size;
      if ((f & F_BRANCH) !== 0) {
        addLeader(pc + ins.imm);
        if (next < end) addLeader(next);
      } else if ((f & (F_JAL | F_JALR)) !== 0) {
        const t = (f & F_JAL) !== 0 ? pc + ins.imm : jalrTargets.get(i);
        const local = t !== undefined && inside(t) && (t === start || !facts.functionEntries.has(t));
        if (ins.rd === 0 || (local && t !== start)) {
          if (local) addLeader(t!);
          if (next < end) addLeader(next);
        }
        // calls (rd != 0) continue in the same block: the Wasm call returns to the next instruction
      } else if ((f & F_STOP) !== 0) {
        if (next < end) addLeader(next);
      }
    }
    if (leaderCount === before || !resolvable) break;
  }

  // Blocks as index ranges of the decoded arrays: a block's instructions and pcs are sliced out
  // once its end is known (one copy each, not a push per instruction).
  const sorted: number[] = [];
  for (let i = 0; i < count; i++) if (leader[i] !== 0) sorted.push(i);
  const blocks = new Map<number, BasicBlock>();
  for (let b = 0; b < sorted.length; b++) {
    const first = sorted[b];
    const bStart = pcs[first];
    const limit = b + 1 < sorted.length ? pcs[sorted[b + 1]] : end;
    let calls: Map<number, CallSite> | null = null;
    let term: Terminator | null = null;
    let bi: Instr[] | null = null;
    let bp: number[] | null = null;
    let i = first;
    for (; i < count && pcs[i] < limit; i++) {
      const f = flags[i];
      if ((f & (F_BRANCH | F_JAL | F_JALR)) === 0) continue;
      const ins = instrs[i];
      const pc = pcs[i];
      const next = pc + ins.size;
      if ((f & F_BRANCH) !== 0) {
        term = { kind: 'branch', instr: ins, pc, taken: classify(pc + ins.imm), next };
        break;
      }
      const target = (f & F_JAL) !== 0 ? pc + ins.imm : (jalrTargets.get(i) ?? null);
      if (ins.rd !== 0 && target !== null && target !== start && classify(target).kind === 'local') {
        // jal rd, label inside this function: a jump that writes rd (RV64I JAL/JALR), not a call
        term = { kind: 'jump', pc, target: classify(target), link: { rd: ins.rd, value: next } };
        break;
      }
      if (ins.rd !== 0) {
        const code = ins.rd !== 1 && target !== null ? inlineCode(facts, target, ins.rd) : undefined;
        const inline =
          code?.end === 'link' ? { instrs: code.instrs, pcs: code.pcs, calls: code.calls } : undefined;
        calls ??= new Map<number, CallSite>();
        calls.set(i - first, { index: i - first, target, inline });
        continue;
      }
      // A tail jump into code that reads the caller's registers beyond the call convention
      // (LLVM's outlined code: `tail OUTLINED_FUNCTION_N`, which reads a callee-saved register,
      // then restores the caller's and returns from its frame, or tail-calls on): that code
      // runs here, ending in the return or tail call it ends with.
      const tail =
        target !== null && target !== start && facts.functionEntries.has(target)
          ? inlineCode(facts, target, 0)
          : undefined;
      if (tail !== undefined && tail.end !== 'link' && tail.readsCallerState) {
        // the jump itself only transfers control (rd = x0): left out
        bi = instrs.slice(first, i);
        bp = pcs.slice(first, i);
        const at = bi.length;
        calls ??= new Map<number, CallSite>();
        for (const [k, to] of tail.calls) calls.set(at + k, { index: at + k, target: to });
        bi.push(...tail.instrs);
        bp.push(...tail.pcs);
        const last = tail.pcs[tail.pcs.length - 1];
        term =
          tail.end === 'return'
            ? { kind: 'return', pc: last }
            : { kind: 'jump', pc: last, target: classify(tail.tailTarget!) };
        break;
      }
      if (ins.op === 'jalr' && ins.rs1 === 1 && ins.imm === 0) term = { kind: 'return', pc };
      else if (target === null) term = { kind: 'indirect-jump', pc, rs1: ins.rs1, imm: ins.imm };
      else term = { kind: 'jump', pc, target: classify(target) };
      break;
    }
    if (bi === null || bp === null) {
      // [first, i] when a terminator ended the block, else [first, i)
      const stop = term === null ? i : i + 1;
      bi = instrs.slice(first, stop);
      bp = pcs.slice(first, stop);
    }
    if (term === null) {
      const last = bp.length > 0 ? bp[bp.length - 1] + bi[bi.length - 1].size : bStart;
      if (last < end && inside(last)) term = { kind: 'fall', next: last };
      // falling into the next function (shared millicode tails such as __riscv_restore_N) is a tail call
      else if (facts.functionEntries.has(last))
        term = { kind: 'jump', pc: last, target: { kind: 'function', address: last } };
      else term = { kind: 'fell-off', pc: last };
    }
    blocks.set(bStart, { start: bStart, end: limit, instrs: bi, pcs: bp, calls: calls ?? NO_CALLS, term });
  }
  return { start, end, blocks, localTargets };
}

/**
 * The calls of every block that has none (most blocks): one shared map, never written (the
 * analysis fills only the maps it creates; the emitters only read them).
 */
const NO_CALLS: Map<number, CallSite> = new Map();

/** Whether two resolved-target maps hold the same entries. */
function sameTargets(a: ReadonlyMap<number, number>, b: ReadonlyMap<number, number>): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) if (b.get(k) !== v) return false;
  return true;
}

/**
 * Whether `ins` transfers control or hands it to the host (branches, jal/jalr, ecall): known
 * register values do not survive it.
 */
function isControl(ins: Instr): boolean {
  return CONTROL.has(ins.op);
}

/** True for instructions that write rd (the ISA table's `writesRd`) with rd other than x0. */
export function writesRd(ins: Instr): boolean {
  return ins.rd !== 0 && WRITES_RD.has(ins.op);
}

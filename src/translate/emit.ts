/**
 * Binaryen code generation for one analysed guest function: guest registers
 * in Wasm locals, x0 a constant, gp/tp in globals, every memory access bounds-checked against the
 * guest memory, an interrupt/fuel check on every backward edge and on function entry.
 * Instruction semantics follow the RISC-V unprivileged spec (RV64I, M, A, Zicsr); the section is
 * named where Wasm's own behaviour differs.
 */
import type binaryen from 'binaryen';
import type { ExprBuilder, Ref, Ty, Types } from './builder.js';
import { Op, type ByteModule } from './bytes.js';
import type { Instr } from '../riscv/instr.js';
import { ENTRY, INSTRUCTIONS, type Op as RvOp, type OpOfKind } from '../riscv/isa.js';
import { TrapKind } from './abi.js';
import type { BasicBlock, CallSite, FunctionCfg, Target } from './cfg.js';
import { LocalPlan, type Gen } from './gen.js';
import { CALL_ARGS, Liveness } from './liveness.js';
import { spOffsets, stepSp, type SpOffset } from './frame.js';
import { stepSext, wordValues } from './words.js';
import { DirectWriter, type DirectFrame } from './direct.js';

/** Names of module-level items the function bodies refer to. */
export const Names = {
  gp: 'gp',
  tp: 'tp',
  a1: 'a1x',
  fuel: 'fuel',
  resv: 'resv',
  ecall: 'imp_ecall',
  ecallHelper: 'ecall',
  a0: 'a0x',
  /** the module's trap helper `(kind: i32, pc: i32, value: i64)`, which calls the import */
  trap: 'trap',
  /** the module's poll helper `(pc: i32) -> i32` */
  poll: 'poll',
  /** the module's csr helper `(csr: i32, pc: i32) -> i64` */
  csr: 'csr',
  trapImport: 'imp_trap',
  pollImport: 'imp_poll',
  csrImport: 'imp_csr',
  dispatch: 'dispatch',
  mulhu: 'mulhu',
  mulh: 'mulh',
  mulhsu: 'mulhsu',
  dirtyLo: 'dirty_lo',
  dirtyHi: 'dirty_hi',
} as const;

/** Wasm function name of the guest function at `address`. */
export function functionName(address: number): string {
  return 'f_' + address.toString(16);
}

/** Context shared by every function of one module. */
export interface EmitContext {
  m: ExprBuilder;
  /** the value types of `m` */
  types: Types;
  /** constants, loads/stores by width and traps over `m` */
  gen: Gen;
  /**
   * How control flow is structured: Binaryen's Relooper (the optimising tier; Binaryen's passes
   * clean up after it), or a direct structure written by ByteModule (the baseline tier).
   */
  structure: { kind: 'relooper'; relooper: () => binaryen.Relooper } | { kind: 'direct'; bytes: ByteModule };
  /** guest address of Wasm address 0 */
  base: number;
  /** memory size in bytes */
  size: number;
  stackLimit: number;
  /**
   * Wasm offset splitting dirty tracking: stores at or above it lower `dirty_lo` (the stack side),
   * stores below raise `dirty_hi` (image and heap), so a pooled memory is reset by zeroing
   * [0, dirty_hi) and [dirty_lo, size) only.
   */
  dirtySplit: number;
  /** entries of translated functions */
  functionEntries: ReadonlySet<number>;
  /** the fuel charged for entering each translated function ({@link entryCost}), by entry */
  entryCosts: ReadonlyMap<number, number>;
  /**
   * The argument registers each function reads, by entry (liveness.ts argumentUses; bit r for
   * xr): a direct call or tail call passes 0 for the others. Absent: every argument is passed.
   */
  argumentUses?: ReadonlyMap<number, number>;
  /** the tuple type (i64, i64) */
  pair: binaryen.Type;
  /** (sp, a0..a7) */
  params: binaryen.Type;
}

/**
 * The locals of a guest function: parameters sp and a0..a7 (its signature), then the other
 * registers that live in locals (ra, t0-t2, s0, s1, s2-s11, t3-t6), then scratch locals.
 */
const FRAME = new LocalPlan({ params: new Array(9).fill('i64'), result: 'pair' });
/** The local of each register, null for x0 (a constant) and gp/tp (globals). */
const REG_LOCAL: (number | null)[] = (() => {
  const map: (number | null)[] = new Array(32).fill(null);
  map[2] = FRAME.param(0);
  for (let r = 10; r <= 17; r++) map[r] = FRAME.param(r - 9);
  for (const r of [1, 5, 6, 7, 8, 9, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31])
    map[r] = FRAME.add('i64');
  return map;
})();
/** i64: effective address minus base */
const L_E = FRAME.add('i64');
/** i64: scratch (indirect targets, division and AMO operands) */
const L_T = FRAME.add('i64');
const L_T2 = FRAME.add('i64');
/** i32: the Relooper's label helper, the direct structure's next block */
const L_LABEL = FRAME.add('i32');
/** i32: pc of the indirect jump that entered the function's shared switch */
const L_PC = FRAME.add('i32');
/** i32: the fuel left after a charge (saves reading the global back) */
const L_F = FRAME.add('i32');
/** i32: the direct structure's back edge that ran out of fuel (its pc) */
const L_POLL_PC = FRAME.add('i32');
/** (i64, i64): call results (last: ByteModule expands it into two locals) */
const L_PAIR = FRAME.add('pair');
/**
 * i32, optimising tier only (declared after L_PAIR: Binaryen counts a tuple local as one): the
 * fuel left in the slice while the function runs. The `fuel` global is read into it on entry and
 * after each call to a guest function, and written back before each call, tail call and return:
 * the global carries the count between functions, the local within one, so a loop's charge is
 * a register decrement rather than a load and a store of the global that the next iteration's
 * load waits on (store-to-load forwarding on the loop's critical path). No import reads the
 * global: the engine's poll grants a slice and forgets what was left.
 */
const L_FUEL = L_PAIR + 1;

/**
 * Fuel charged for the code from `start` to `end`: its length in instructions at their smallest
 * (2 bytes). A function's entry is charged its whole length, so it may run that far before its
 * first back edge or call charges again; a back edge is charged the code it spans.
 */
export function entryCost(start: number, end: number): number {
  return Math.max(1, Math.ceil((end - start) / 2));
}

/**
 * Whether a back edge to the block at `target` polls when its charge empties the slice. It does
 * not when that block calls a guest function (a call that charges the callee's entry at its site:
 * not an inlined millicode call): every iteration then runs the call site's charge, which polls,
 * a straight-line block after the back edge (a block has no branch before its end), so the poll
 * is only moved to the next charge and a spinning loop is still stopped within one iteration of a
 * slice's end. Both tiers decide alike from the CFG, so a run ends the same way on both (the same
 * result or OutOfFuel at the same pc). Why: the poll's call on the back edge of a loop that calls
 * is a second call in the loop whose return path rejoins the loop header; without it, V8's code
 * for fib_rec's loop (`--print-wasm-code`) has two instructions and one branch fewer per iteration
 * and folds the charge into a register move (bench/README.md, "Fuel polls on back edges").
 */
export function pollsOnBackEdge(cfg: FunctionCfg, target: number): boolean {
  const b = cfg.blocks.get(target);
  if (b === undefined) return true;
  for (const c of b.calls.values()) if (!c.inline) return false;
  return true;
}

/**
 * Charge `cost` (an i32 expression) of fuel; when the slice runs out, the engine's `poll` import
 * (interrupt flag, deadline, budget) runs with `pc` and grants the next slice. `scratch` is an i32
 * local the code may overwrite.
 */
export function chargeFuel(m: ExprBuilder, t: Types, cost: Ref, pc: Ref, scratch: number): Ref {
  return m.block(null, [
    m.global.set(Names.fuel, m.local.tee(scratch, m.i32.sub(m.global.get(Names.fuel, t.i32), cost), t.i32)),
    m.if(
      m.i32.lt_s(m.local.get(scratch, t.i32), m.i32.const(0)),
      m.global.set(Names.fuel, m.call(Names.poll, [pc], t.i32)),
    ),
  ]);
}

const I64_MIN = -(2n ** 63n);
/** The registers a call passes, in parameter order: sp, a0..a7. */
export const ARGUMENT_REGISTERS: readonly number[] = [2, 10, 11, 12, 13, 14, 15, 16, 17];

/**
 * The argument registers a call to `target` passes (bit r: xr): those the callee reads
 * (EmitContext.argumentUses), the others passed as 0; all of them when that is unknown (no
 * analysis, or no known target: the dispatcher).
 */
export function passedArguments(
  argumentUses: ReadonlyMap<number, number> | undefined,
  target: number | undefined,
): number {
  return (target === undefined ? undefined : argumentUses?.get(target)) ?? -1;
}

/**
 * Translate one function into the module as `functionName(cfg.start)`.
 * @returns nothing; throws only on internal inconsistencies (a bug), never on guest input.
 */
export function emitFunction(ctx: EmitContext, cfg: FunctionCfg): void {
  const relooper = ctx.structure.kind === 'relooper';
  let fe = new FunctionEmitter(ctx, cfg, relooper);
  let body = fe.body();
  if (fe.fuelLocal && !fe.charged) {
    // Nothing in the function charges fuel (a leaf without loops): L_FUEL would only copy the
    // global in and back out, a load and a store on every call. Built again without it.
    fe = new FunctionEmitter(ctx, cfg, false);
    body = fe.body();
  }
  let vars = frameVars(ctx.types);
  if (relooper) vars = [...vars, ctx.types.i32]; // L_FUEL
  ctx.m.addFunction(functionName(cfg.start), ctx.params, ctx.pair, vars, body);
}

/** The one-pass writer's frame of each baseline module's functions, made once per module. */
const DIRECT_FRAMES = new WeakMap<EmitContext, DirectFrame>();
/**
 * What the one-pass writer (direct.ts) needs to know of the baseline module `bytes` and of a guest
 * function's frame: the same for every function of the module (FRAME's locals, the module's
 * globals and imports), so built on the first call for `ctx` and shared after that. Call it only
 * once the globals and imports are added.
 * @throws Error when a global is missing (a bug)
 */
export function directFrame(ctx: EmitContext, bytes: ByteModule): DirectFrame {
  let f = DIRECT_FRAMES.get(ctx);
  if (f === undefined) {
    f = {
      regLocal: REG_LOCAL,
      addressLocal: L_E,
      gp: bytes.globalIndexOf(Names.gp),
      tp: bytes.globalIndexOf(Names.tp),
      dirtyLo: bytes.globalIndexOf(Names.dirtyLo),
      dirtyHi: bytes.globalIndexOf(Names.dirtyHi),
      fuel: bytes.globalIndexOf(Names.fuel),
      trap: bytes.functionValue(Names.trap),
      poll: bytes.functionValue(Names.poll),
      fuelLocal: L_F,
      pairLocal: L_PAIR,
      argumentRegisters: ARGUMENT_REGISTERS,
      base: ctx.base,
      size: ctx.size,
      dirtySplit: ctx.dirtySplit,
    };
    DIRECT_FRAMES.set(ctx, f);
  }
  return f;
}

/** FRAME's variable types for each builder's types, made once (one array shared by every function). */
const FRAME_VARS = new WeakMap<Types, Ty[]>();
function frameVars(t: Types): Ty[] {
  let v = FRAME_VARS.get(t);
  if (v === undefined) {
    v = FRAME.vars(t);
    FRAME_VARS.set(t, v);
  }
  return v;
}

class FunctionEmitter {
  private readonly m: ExprBuilder;
  private readonly t: Types;
  private readonly g: Gen;
  /**
   * Register liveness when the context knows what calls read (the optimising tier): a load whose
   * destination is dead is reduced to its bounds check (see blockCode).
   */
  private readonly liveness: Liveness | null;
  /**
   * sp's offset from its entry value at each block's start, in the optimising tier (frame.ts),
   * and where the code being emitted stands (null: unknown)
   */
  private readonly spAt: Map<number, SpOffset> | null;
  private sp: SpOffset = null;
  /**
   * The registers known to hold sign-extended 32-bit values at the instruction being emitted (bit
   * r: xr; words.ts); null in the baseline tier.
   */
  private sext: number | null = null;
  /** the word values on entry to each block (words.ts), in the optimising tier */
  private readonly wordsAt: Map<number, number> | null;
  /** the offset field of the access whose address() was built last (see address) */
  private offset = 0;
  /** the baseline tier's one-pass writer of common instructions (direct.ts); null otherwise */
  private readonly dw: DirectWriter | null;
  /** whether any fuel charge was emitted */
  charged = false;
  /**
   * @param fuelLocal whether the fuel count lives in L_FUEL while the function runs (the
   *   optimising tier only: the local is declared there)
   */
  constructor(
    private readonly ctx: EmitContext,
    private readonly cfg: FunctionCfg,
    readonly fuelLocal: boolean,
  ) {
    this.m = ctx.m;
    this.t = ctx.types;
    this.g = ctx.gen;
    const uses = ctx.argumentUses;
    this.spAt = uses ? spOffsets(cfg) : null;
    this.wordsAt = uses ? wordValues(cfg) : null;
    this.liveness = uses
      ? new Liveness(cfg, (t) => (t === null ? CALL_ARGS : (uses.get(t) ?? CALL_ARGS)))
      : null;
    const s = ctx.structure;
    // the templates write what this class builds when nothing is known of frames or words
    this.dw = s.kind === 'direct' && !uses ? new DirectWriter(s.bytes, directFrame(ctx, s.bytes)) : null;
  }

  /**
   * Write `ins` through the one-pass templates when it is one of theirs (and leave its run open).
   * @returns false when it needs the general lowering ({@link instr})
   */
  private direct(dw: DirectWriter, ins: Instr, pc: number): boolean {
    const p = DIRECT_PLANS[ins.code];
    switch (p.kind) {
      case D_UPPER:
        dw.upper(ins.rd, p.flag ? pc + ins.imm : ins.imm);
        return true;
      case D_REG_IMM: {
        const { rd, rs1, imm } = ins;
        dw.regImm(p.opcode, rd, rs1, imm, p.flag && rd === 2 && rs1 === 2 && imm >= 0);
        return true;
      }
      case D_SHIFT_IMM:
        dw.regImm(p.opcode, ins.rd, ins.rs1, ins.imm & 63, false);
        return true;
      case D_REG_REG:
        dw.regReg(p.opcode, ins.rd, ins.rs1, ins.rs2);
        return true;
      case D_SET_LESS:
        dw.setLess(p.opcode, ins.rd, ins.rs1, p.flag ? -1 : ins.rs2, ins.imm);
        return true;
      case D_WORD_IMM:
        dw.wordImm(p.opcode, ins.rd, ins.rs1, p.flag ? ins.imm : ins.imm & 31);
        return true;
      case D_WORD_REG:
        dw.wordReg(p.opcode, ins.rd, ins.rs1, ins.rs2);
        return true;
      case D_LOAD:
        dw.load(p.opcode, p.width, ins.rd, ins.rs1, ins.imm, pc);
        return true;
      case D_STORE:
        dw.store(p.opcode, p.width, ins.rs1, ins.rs2, ins.imm, pc);
        return true;
      case D_HELPER: {
        // rd = helper(rs1, rs2) (the helpers precede the guest functions: their index is final)
        const low = p.low as Extract<Lowering, { via: 'helper' }>;
        dw.getReg(ins.rs1);
        dw.getReg(ins.rs2);
        dw.call(Op.call, this.fnRef(Names[low.name]));
        dw.setReg(ins.rd);
        return true;
      }
      case D_DIV:
      case D_DIV_WORD: {
        const low = p.low as Extract<Lowering, { via: 'div' | 'div-word' }>;
        this.directDiv(dw, ins, low.f, p.kind === D_DIV_WORD);
        return true;
      }
      case D_NOP:
        return true;
      case D_BREAKPOINT:
        dw.trap(TrapKind.Breakpoint, pc, 0);
        return true;
      case D_ILLEGAL:
        dw.trap(TrapKind.IllegalInstruction, pc, ins.bits);
        return true;
      default:
        return false;
    }
  }

  // ---- registers ----
  private get(r: number): Ref {
    const m = this.m;
    if (r === 0) return m.i64.const(0n);
    if (r === 3) return m.global.get(Names.gp, this.t.i64);
    if (r === 4) return m.global.get(Names.tp, this.t.i64);
    return m.local.get(REG_LOCAL[r]!, this.t.i64);
  }
  /** Write register `r`. `spGrows`: the value is sp plus a non-negative amount (see spMark). */
  private set(r: number, v: Ref, spGrows = false): Ref {
    const m = this.m;
    if (r === 0) return m.drop(v);
    if (r === 3) return m.global.set(Names.gp, v);
    if (r === 4) return m.global.set(Names.tp, v);
    if (r === 2 && !spGrows) return m.block(null, [m.local.set(REG_LOCAL[r]!, v), this.spMark()]);
    return m.local.set(REG_LOCAL[r]!, v);
  }
  /**
   * After a write to sp: lower `dirty_lo` to sp's Wasm offset (0 when sp is below the memory), so
   * that a store at sp plus a non-negative offset lands at or above `dirty_lo` and needs no
   * tracking of its own (see `track`). The engine resets [dirty_lo, size), whatever the split.
   * A write that only moves sp up (`addi sp, sp, imm >= 0`) cannot lower the mark and skips this.
   */
  private spMark(): Ref {
    const m = this.m;
    const off = () => m.i64.sub(this.get(2), this.c64(this.ctx.base));
    return m.if(
      m.i64.lt_s(off(), m.i64.extend_u(m.global.get(Names.dirtyLo, this.t.i32))),
      m.global.set(Names.dirtyLo, m.select(m.i64.ge_s(off(), this.c64(0)), m.i32.wrap(off()), this.c32(0))),
    );
  }
  private c64(v: number | bigint): Ref {
    return this.g.c64(v);
  }
  /**
   * Whether a bitwise `f` of rs1 and rs2 (x0 for an immediate, itself sign-extended from 12 bits)
   * may be done on 32 bits: both hold sign-extended 32-bit values (the `sext` mask, optimising
   * tier), so the 64-bit result is the sign extension of the 32-bit one. Written that way, V8
   * folds the wrap of an operand's extension and keeps chains of word operations (sha256's
   * rotations: sllw/srlw, or, xor, addw) in 32-bit registers without re-extending every step.
   */
  private narrow(f: string, rs1: number, rs2: number): boolean {
    return (f === 'and' || f === 'or' || f === 'xor') && this.isWord(rs1) && this.isWord(rs2);
  }
  /** Whether xr holds a sign-extended 32-bit value here (optimising tier; see {@link narrow}). */
  private isWord(r: number): boolean {
    return this.sext !== null && (this.sext & (1 << r)) !== 0;
  }
  private c32(v: number): Ref {
    return this.g.c32(v);
  }
  private sext32(v: Ref): Ref {
    return this.m.i64.extend_s(v);
  }
  private w(r: number): Ref {
    return this.m.i32.wrap(this.get(r));
  }

  // ---- traps ----
  private trap(kind: TrapKind, pc: number, value: Ref): Ref {
    return this.g.trap(kind, pc, value);
  }
  private fuel(cost: number, pc: number): Ref {
    return this.fuelBy(this.c32(cost), pc);
  }
  /** Charge `cost` (an i32 expression) of fuel; poll the engine when the slice runs out. */
  private fuelBy(cost: Ref, pc: number): Ref {
    this.charged = true;
    if (!this.fuelLocal) return chargeFuel(this.m, this.t, cost, this.c32(pc), L_F);
    const m = this.m;
    return m.block(null, [
      m.local.set(L_FUEL, m.i32.sub(m.local.get(L_FUEL, this.t.i32), cost)),
      m.if(
        m.i32.lt_s(m.local.get(L_FUEL, this.t.i32), m.i32.const(0)),
        m.local.set(L_FUEL, m.call(Names.poll, [this.c32(pc)], this.t.i32)),
      ),
    ]);
  }
  /**
   * A back edge's charge without the test and the poll (see {@link pollsOnBackEdge}): the count
   * may go below 0 here; the next charge polls.
   */
  private fuelNoPoll(cost: number): Ref {
    this.charged = true;
    const m = this.m;
    const i32 = this.t.i32;
    return this.fuelLocal
      ? m.local.set(L_FUEL, m.i32.sub(m.local.get(L_FUEL, i32), this.c32(cost)))
      : m.global.set(Names.fuel, m.i32.sub(m.global.get(Names.fuel, i32), this.c32(cost)));
  }
  /** Before control leaves for another guest function: the global takes the local (L_FUEL). */
  private fuelOut(): Ref {
    return this.fuelLocal
      ? this.m.global.set(Names.fuel, this.m.local.get(L_FUEL, this.t.i32))
      : this.m.nop();
  }
  /** After a call to a guest function returned: the local takes the global (L_FUEL). */
  private fuelIn(): Ref {
    return this.fuelLocal
      ? this.m.local.set(L_FUEL, this.m.global.get(Names.fuel, this.t.i32))
      : this.m.nop();
  }
  /**
   * Charge the fuel of entering the function at `address`, at the site (`pc`) that transfers
   * control there. The caller charges rather than the callee: the poll's call then sits next to
   * the real call, where the caller's live values are saved anyway, instead of at every callee
   * entry, where V8 would save the callee's parameters on every call to keep them across it.
   */
  private enterFuel(address: number, pc: number): Ref {
    return this.fuel(this.ctx.entryCosts.get(address)!, pc);
  }

  // ---- memory ----
  /** Sets L_E to (rs1 + imm - base) and traps MemoryFault unless the `width` bytes lie inside memory. */
  private address(rs1: number, imm: number, width: number, pc: number): Ref {
    const m = this.m;
    const ctx = this.ctx;
    this.offset = 0;
    if (rs1 === 2 && this.sp !== null && this.frameSafe(this.sp + imm, width)) {
      // no check; a non-negative imm goes in the access's offset field, so the accesses of one
      // frame share their address (L_E then is sp - base: only a load or a store at sp plus a
      // non-negative imm, which needs no dirty tracking, reads it)
      if (imm < 0) return m.local.set(L_E, m.i64.add(this.get(rs1), this.c64(imm - ctx.base)));
      this.offset = imm;
      return m.local.set(L_E, m.i64.sub(this.get(rs1), this.c64(ctx.base)));
    }
    return m.block(null, [
      m.local.set(L_E, m.i64.add(this.get(rs1), this.c64(imm - ctx.base))),
      m.if(
        m.i64.gt_u(m.local.get(L_E, this.t.i64), this.c64(ctx.size - width)),
        this.trap(TrapKind.MemoryFault, pc, m.i64.add(m.local.get(L_E, this.t.i64), this.c64(ctx.base))),
      ),
    ]);
  }
  /**
   * Whether `width` bytes at the entry's sp plus `offset` lie inside memory whatever that sp was.
   * The entry's check traps StackOverflow unless stack limit <= sp <= base + size, so an access
   * wholly below the entry's sp (offset + width <= 0: the function's own frame) and no deeper
   * than the stack region allows (stack limit + offset >= base) cannot fault: its bounds check
   * would never fire and is left out. A call cannot move the caller's sp (the callee gets a
   * copy), so only the function's own writes to sp move the offset (frame.ts).
   */
  private frameSafe(offset: number, width: number): boolean {
    return offset + width <= 0 && this.ctx.stackLimit + offset >= this.ctx.base;
  }
  /** Record a store of `width` bytes at L_E in the dirty extents (see EmitContext.dirtySplit). */
  private track(width: number): Ref {
    const m = this.m;
    const e = () => m.i32.wrap(m.local.get(L_E, this.t.i64));
    return m.if(
      m.i32.ge_u(e(), this.c32(this.ctx.dirtySplit)),
      m.if(m.i32.lt_u(e(), m.global.get(Names.dirtyLo, this.t.i32)), m.global.set(Names.dirtyLo, e())),
      m.if(
        m.i32.gt_u(m.i32.add(e(), this.c32(width)), m.global.get(Names.dirtyHi, this.t.i32)),
        m.global.set(Names.dirtyHi, m.i32.add(e(), this.c32(width))),
      ),
    );
  }
  private ea(): Ref {
    return this.m.i32.wrap(this.m.local.get(L_E, this.t.i64));
  }
  // ---- body ----
  body(): Ref {
    if (this.ctx.structure.kind === 'direct') return this.directBody(this.ctx.structure.bytes);
    const m = this.m;
    const cfg = this.cfg;
    const r = (this.ctx.structure as { relooper: () => binaryen.Relooper }).relooper();
    const rb = new Map<number, number>();
    for (const b of cfg.blocks.values()) rb.set(b.start, r.addBlock(this.blockCode(b)));
    // one switch per function over every jump-table target, entered from each indirect jump with
    // L_T = target and L_PC = its pc (a switch per jump would be quadratic in function size)
    const sw = this.hasSwitch() ? r.addBlockWithSwitch(this.switchCode(), this.switchIndex()) : null;
    if (sw !== null) {
      const lo = cfg.localTargets[0];
      for (const a of cfg.localTargets) r.addBranchForSwitch(sw, rb.get(a)!, [(a - lo) / 2], m.nop());
      // inside the span but not a jump-table target: only a function entry could be valid
      r.addBranchForSwitch(sw, r.addBlock(this.switchTail()), [], m.nop());
    }

    // synthetic blocks: tail calls, traps and the indirect-jump default share one per target
    const synth = new Map<string, number>();
    const targetBlock = (t: Target, pc: number): number => {
      if (t.kind === 'local') return rb.get(t.address)!;
      // per site: the trap and the entry charge's poll name the pc of the jump
      const key = `${t.kind}:${t.address}:${pc}`;
      let blk = synth.get(key);
      if (blk === undefined) {
        blk = r.addBlock(
          t.kind === 'function'
            ? this.tailCall(t.address, pc)
            : this.trap(TrapKind.BadIndirectTarget, pc, this.c64(t.address)),
        );
        synth.set(key, blk);
      }
      return blk;
    };
    // the trap names the last instruction that ran (`from`), the value is where execution went
    const fellOff = (next: number, from: number): number =>
      this.ctx.functionEntries.has(next)
        ? targetBlock({ kind: 'function', address: next }, from)
        : r.addBlock(this.trap(TrapKind.FellOffFunction, from, this.c64(next)));
    // A back edge is charged the length of the code it spans, in instructions at their smallest
    // (2 bytes): between two charges execution only moves forward, so this bounds what ran.
    // (to a block that calls a guest function: no poll here, the call site's charge polls; see
    // pollsOnBackEdge)
    const edgeCode = (from: BasicBlock, to: number): Ref => {
      if (to > from.start) return m.nop();
      const cost = entryCost(to, from.end);
      return pollsOnBackEdge(cfg, to)
        ? this.fuel(cost, from.pcs[from.pcs.length - 1] ?? from.start)
        : this.fuelNoPoll(cost);
    };

    for (const b of cfg.blocks.values()) {
      const from = rb.get(b.start)!;
      const t = b.term;
      switch (t.kind) {
        case 'fall': {
          const to = cfg.blocks.has(t.next)
            ? rb.get(t.next)!
            : fellOff(t.next, b.pcs[b.pcs.length - 1] ?? b.start);
          r.addBranch(from, to, 0, edgeCode(b, t.next));
          break;
        }
        case 'branch': {
          const takenTo = targetBlock(t.taken, t.pc);
          const takenAddr = t.taken.kind === 'local' ? t.taken.address : Number.MAX_SAFE_INTEGER;
          const nextTo = cfg.blocks.has(t.next) ? rb.get(t.next)! : fellOff(t.next, t.pc);
          // the Relooper aborts on two branches to one block: a branch to the next instruction
          if (takenTo !== nextTo) r.addBranch(from, takenTo, this.condition(t.instr), edgeCode(b, takenAddr));
          r.addBranch(from, nextTo, 0, edgeCode(b, t.next));
          break;
        }
        case 'jump': {
          const addr = t.target.kind === 'local' ? t.target.address : Number.MAX_SAFE_INTEGER;
          r.addBranch(from, targetBlock(t.target, t.pc), 0, edgeCode(b, addr));
          break;
        }
        case 'indirect-jump': {
          if (sw !== null) r.addBranch(from, sw, 0, m.nop());
          break;
        }
        default:
          break; // return and fell-off end inside the block code
      }
    }
    const entry = rb.get(cfg.start)!;
    const body = r.renderAndDispose(entry, L_LABEL);
    return m.block(null, [this.fuelIn(), body, m.unreachable()]);
  }

  /**
   * The baseline tier's control flow, written without a Relooper: the blocks in address order
   * (entry first) as the cases of a loop over a block index in L_LABEL.
   *
   *     loop $top
   *       block $c[n-1] ... block $c[0]
   *         local.get L_LABEL ; br_table $c[0] ... $c[n-1]
   *       end  code[0]
   *       end  code[1] ...
   *     end
   *
   * From inside code[k], a forward edge to block j > k is `br j-k-1` (falling through when j is
   * k+1), a back edge sets L_LABEL = j and branches to $top (`br n-1-k`), after the same fuel
   * charge as the optimising tier. Tail calls and traps are written where the edge is.
   */
  private directBody(bm: ByteModule): Ref {
    const dw = this.dw;
    if (dw === null) throw new Error('internal: the direct structure needs the one-pass writer');
    const cfg = this.cfg;
    const blocks = [...cfg.blocks.values()].sort((a, b) => a.start - b.start);
    const entry = blocks.findIndex((b) => b.start === cfg.start);
    if (entry > 0) blocks.unshift(...blocks.splice(entry, 1));
    const index = new Map<number, number>();
    for (let k = 0; k < blocks.length; k++) index.set(blocks[k].start, k);
    // the shared switch (see indirectJump) is one more case after the blocks
    const sw = this.hasSwitch() ? blocks.length : -1;
    const n = blocks.length + (sw >= 0 ? 1 : 0);
    const fuel = bm.globalIndexOf(Names.fuel);
    // the body's nodes in order: the writer's runs, and those that still need the builder (each
    // built only after the open run is closed: a node's values are contiguous)
    const parts: Ref[] = [];
    const flush = () => {
      const run = dw.close();
      if (run !== null) parts.push(run);
    };
    // $outer and $poll: see "back edges" below
    dw.raw([Op.loop, 0x40, Op.block, 0x40, Op.loop, 0x40]);
    for (let k = 0; k < n; k++) dw.op2(Op.block, 0x40);
    dw.withIndex(Op.local_get, L_LABEL);
    dw.withIndex(Op.br_table, n);
    for (let k = 0; k < n; k++) dw.index(k);
    dw.index(0);
    dw.op(Op.end);

    // control leaving code[k] for `t`, nested `extra` structures deep; `last`: may fall through
    const jump = (k: number, t: Target, pc: number, extra: number, last: boolean): void => {
      if (t.kind === 'function') return this.directTail(dw, t.address, pc);
      if (t.kind === 'invalid') return dw.trap(TrapKind.BadIndirectTarget, pc, t.address);
      const j = index.get(t.address)!;
      if (j > k) {
        if (!(last && extra === 0 && j === k + 1)) dw.withIndex(Op.br, j - k - 1 + extra);
        return;
      }
      if (k === sw) {
        dw.i32(j);
        dw.withIndex(Op.local_set, L_LABEL);
        dw.withIndex(Op.br, n - 1 - k + extra);
        return;
      }
      // A back edge: charge the fuel (as the optimising tier does), and when the slice ran out leave
      // the loop for $poll, which polls outside it and re-enters through the br_table. With no call
      // inside the loop, V8 need not save every live register at each definition to keep it
      // across one.
      const from = blocks[k];
      dw.withIndex(Op.global_get, fuel);
      dw.i32(entryCost(t.address, from.end));
      dw.op(0x6b); // i32.sub
      if (!pollsOnBackEdge(cfg, t.address)) {
        // the target calls a guest function: its call site's charge polls (pollsOnBackEdge)
        dw.withIndex(Op.global_set, fuel);
        dw.i32(j);
        dw.withIndex(Op.local_set, L_LABEL);
        dw.withIndex(Op.br, n - 1 - k + extra);
        return;
      }
      dw.withIndex(Op.local_tee, L_F);
      dw.withIndex(Op.global_set, fuel);
      dw.i32(j);
      dw.withIndex(Op.local_set, L_LABEL);
      dw.i32(from.pcs[from.pcs.length - 1] ?? from.start);
      dw.withIndex(Op.local_set, L_POLL_PC);
      dw.withIndex(Op.local_get, L_F);
      dw.i32(0);
      dw.op(0x48); // i32.lt_s
      dw.withIndex(Op.br_if, n - k + extra);
      dw.withIndex(Op.br, n - 1 - k + extra);
    };
    const toAddress = (k: number, next: number, from: number, extra: number, last: boolean): void => {
      if (index.has(next)) return jump(k, { kind: 'local', address: next }, from, extra, last);
      if (this.ctx.functionEntries.has(next)) return this.directTail(dw, next, from);
      dw.trap(TrapKind.FellOffFunction, from, next);
    };

    for (let k = 0; k < n; k++) {
      if (k === sw) {
        // blocks that end in an indirect jump set L_T, L_PC and come here: a br_table over
        // (L_T - lowest) / 2 to one handler per target; the default leaves through the dispatcher
        const targets = cfg.localTargets;
        const lo = targets[0];
        const q = targets.length;
        const span = (targets[q - 1] - lo) / 2 + 1;
        const slot = new Map(targets.map((a, i) => [(a - lo) / 2, i]));
        flush();
        parts.push(this.switchCode());
        dw.op2(Op.block, 0x40);
        for (let i = 0; i < q; i++) dw.op2(Op.block, 0x40);
        flush();
        parts.push(this.switchIndex());
        dw.withIndex(Op.br_table, span);
        for (let x = 0; x < span; x++) dw.index(slot.get(x) ?? q);
        dw.index(q);
        targets.forEach((a, i) => {
          dw.op(Op.end);
          jump(k, { kind: 'local', address: a }, 0, q - i, false);
        });
        dw.op(Op.end);
        flush();
        parts.push(this.switchTail());
        continue;
      }
      const b = blocks[k];
      this.blockInto(b, parts);
      const t = b.term;
      const lastPc = b.pcs[b.pcs.length - 1] ?? b.start;
      switch (t.kind) {
        case 'fall':
          toAddress(k, t.next, lastPc, 0, true);
          break;
        case 'branch': {
          const sameAsNext = t.taken.kind === 'local' && t.taken.address === t.next && index.has(t.next);
          if (!sameAsNext) {
            dw.compare(BRANCH_OPCODE[t.instr.op as OpOfKind<'branch'>], t.instr.rs1, t.instr.rs2);
            dw.op2(Op.if, 0x40);
            jump(k, t.taken, t.pc, 1, false);
            dw.op(Op.end);
          }
          toAddress(k, t.next, t.pc, 0, true);
          break;
        }
        case 'jump':
          jump(k, t.target, t.pc, 0, true);
          break;
        case 'indirect-jump':
          if (sw >= 0) dw.withIndex(Op.br, sw - k - 1);
          break;
        default:
          break; // return and fell-off end inside the block code
      }
      if (k < n - 1) dw.op(Op.end);
    }
    dw.raw([Op.end, Op.unreachable, Op.end]); // $top, $poll
    // $outer: fuel = poll(L_POLL_PC); br 0
    dw.withIndex(Op.local_get, L_POLL_PC);
    dw.call(Op.call, this.fnRef(Names.poll));
    dw.withIndex(Op.global_set, fuel);
    dw.raw([Op.br, 0, Op.end, Op.unreachable]);
    flush();
    return parts.length === 1 ? parts[0] : bm.seq(this.t.none, parts);
  }

  /** The straight-line code of a block, including its terminator's own effects. */
  private blockCode(b: BasicBlock): Ref {
    const out: Ref[] = [];
    this.blockInto(b, out);
    return this.m.block(null, out);
  }

  /**
   * {@link blockCode}'s nodes, appended to `out`. With the one-pass writer (baseline tier), the
   * code is written into its run wherever a template exists, and the run is left open at the end
   * (the caller continues it); nodes built in between go to `out` after the run they follow.
   */
  private blockInto(b: BasicBlock, out: Ref[]): void {
    const m = this.m;
    const dw = this.dw;
    if (dw !== null) return this.directBlock(dw, b, out);
    if (b.start === this.cfg.start) {
      // (the entry's fuel was charged by the site that called or jumped here: enterFuel)
      out.push(
        m.if(
          // sp in [stack limit, end of memory], one unsigned compare (see frameSafe)
          m.i64.gt_u(
            m.i64.sub(this.get(2), this.c64(this.ctx.stackLimit)),
            this.c64(this.ctx.base + this.ctx.size - this.ctx.stackLimit),
          ),
          this.trap(TrapKind.StackOverflow, b.start, this.get(2)),
        ),
      );
    }
    const n = b.instrs.length;
    const liveAfter = this.liveness?.after(b);
    this.sp = this.spAt?.get(b.start) ?? null;
    this.sext = this.wordsAt ? (this.wordsAt.get(b.start) ?? 1) : null; // 1: x0 only
    for (let i = 0; i < n; i++) {
      if (i > 0 && this.spAt !== null) {
        this.sp = stepSp(this.sp, b.instrs[i - 1]);
        if (this.sext !== null) this.sext = stepSext(this.sext, b.instrs[i - 1], b.calls.has(i - 1));
      }
      const ins = b.instrs[i];
      const pc = b.pcs[i];
      const call = b.calls.get(i);
      if (liveAfter && !call && LOWERING[ins.op as RvOp]?.via === 'load' && REG_LOCAL[ins.rd] !== null) {
        if ((liveAfter[i] & (1 << ins.rd)) === 0) {
          // Nothing reads rd before it is written again: only the bounds check (and its exact
          // fault) remains. Register restores in epilogues are such loads: the caller keeps its
          // own copies of the registers in its locals.
          out.push(this.address(ins.rs1, ins.imm, ENTRY[ins.op as RvOp].width!, pc));
          continue;
        }
      }
      if (call?.inline) {
        // rd gets the return address, then the millicode (or outlined code) runs as if it were
        // this function's code, its direct calls as calls
        out.push(this.set(ins.rd, this.c64(pc + ins.size)));
        const { instrs, pcs, calls } = call.inline;
        this.sp = stepSp(this.sp, ins);
        if (this.sext !== null) this.sext = stepSext(this.sext, ins, true);
        instrs.forEach((mi, k) => {
          const to = calls.get(k);
          out.push(to === undefined ? this.instr(mi, pcs[k]) : this.callSite(mi, pcs[k], to));
          this.sp = stepSp(this.sp, mi);
          if (this.sext !== null) this.sext = stepSext(this.sext, mi, to !== undefined);
        });
        // (the loop steps over `ins` again: it does not write sp, or the offset is already null)
        continue;
      }
      if (call) {
        out.push(this.callSite(ins, pc, call.target));
        continue;
      }
      if (i === n - 1 && b.term.kind !== 'fall' && b.term.kind !== 'fell-off') {
        out.push(this.terminator(b));
        continue;
      }
      out.push(this.instr(ins, pc));
    }
    if (b.term.kind === 'fell-off') {
      const pc = b.pcs[b.pcs.length - 1] ?? b.start;
      out.push(this.trap(TrapKind.FellOffFunction, pc, this.c64(b.term.pc)));
    }
  }

  /**
   * {@link blockInto} with the one-pass writer (the baseline tier: no liveness, frame or word
   * facts), the block's fields read once.
   */
  private directBlock(dw: DirectWriter, b: BasicBlock, out: Ref[]): void {
    if (b.start === this.cfg.start) {
      const { stackLimit, base, size } = this.ctx;
      dw.stackCheck(TrapKind.StackOverflow, b.start, stackLimit, base + size - stackLimit);
    }
    this.sp = null;
    this.sext = null;
    const { instrs, pcs, calls, term } = b;
    const n = instrs.length;
    // the last instruction is the terminator's own unless the block falls through or off
    const endsInTerminator = term.kind !== 'fall' && term.kind !== 'fell-off';
    const hasCalls = calls.size > 0;
    // a listing's pc marks (ByteModule.recordPcs): where each instruction's code begins
    const s = this.ctx.structure;
    const marks = s.kind === 'direct' && s.bytes.recordingPcs ? s.bytes : null;
    let at = 0;
    for (let i = 0; i < n; i++) {
      const ins = instrs[i];
      const pc = pcs[i];
      if (marks !== null) {
        at = dw.position();
        marks.markPc(at, pc);
      }
      const call = hasCalls ? calls.get(i) : undefined;
      const last = endsInTerminator && i === n - 1;
      if (call === undefined) {
        if (last ? this.directTerminator(dw, b) : this.direct(dw, ins, pc)) continue;
      } else if (!call.inline) {
        this.directCall(dw, ins, pc, call.target);
        continue;
      } else {
        this.directInline(dw, ins, pc, call.inline, out);
        continue;
      }
      // anything else builds nodes: the open run ends first
      const run = dw.close();
      if (run !== null) out.push(run);
      const node = last ? this.terminator(b) : this.instr(ins, pc);
      if (marks !== null) marks.movePcMarks(at, marks.nodeStart(node));
      out.push(node);
    }
    if (term.kind === 'fell-off') dw.trap(TrapKind.FellOffFunction, pcs[pcs.length - 1] ?? b.start, term.pc);
  }

  /**
   * The one-pass form of {@link terminator}: returns, indirect tail jumps and linking jumps.
   * @returns false for what needs nodes (an indirect jump into the function's switch)
   */
  private directTerminator(dw: DirectWriter, b: BasicBlock): boolean {
    const t = b.term;
    switch (t.kind) {
      case 'return':
        dw.getReg(10);
        dw.getReg(11);
        dw.op(Op.return);
        return true;
      case 'indirect-jump':
        if (this.hasSwitch()) return false;
        dw.jalrTarget(L_T, t.rs1, t.imm);
        dw.i32(t.pc);
        dw.withIndex(Op.local_get, L_T);
        dw.args();
        dw.call(Op.return_call, this.fnRef(Names.dispatch));
        return true;
      case 'jump':
        if (t.link) dw.upper(t.link.rd, t.link.value);
        return true;
      default:
        return true; // branches and jumps: the edges carry the transfer
    }
  }

  /** The one-pass form of {@link callSite} (the call convention passes every argument). */
  private directCall(dw: DirectWriter, ins: Instr, pc: number, target: number | null): void {
    if (target !== null) {
      dw.upper(ins.rd, pc + ins.size);
      if (!this.ctx.functionEntries.has(target)) {
        dw.trap(TrapKind.BadIndirectTarget, pc, target);
        return;
      }
      dw.fuel(this.ctx.entryCosts.get(target)!, pc);
      dw.args();
      dw.call(Op.call, this.fnRef(functionName(target)));
      dw.takeResults();
      return;
    }
    // target = (rs1 + imm) & ~1, read before rd is written (rd may equal rs1)
    dw.jalrTarget(L_T, ins.rs1, ins.imm);
    dw.upper(ins.rd, pc + ins.size);
    dw.i32(pc);
    dw.withIndex(Op.local_get, L_T);
    dw.args();
    dw.call(Op.call, this.fnRef(Names.dispatch));
    dw.takeResults();
  }

  /**
   * The one-pass form of a call whose callee runs inlined (blockInto): rd gets the return address,
   * then the callee's straight-line code runs as this function's, its calls as calls. What has no
   * template is built as a node after the open run is closed.
   */
  private directInline(
    dw: DirectWriter,
    ins: Instr,
    pc: number,
    inline: NonNullable<CallSite['inline']>,
    out: Ref[],
  ): void {
    dw.upper(ins.rd, pc + ins.size);
    const { instrs, pcs, calls } = inline;
    for (let k = 0; k < instrs.length; k++) {
      const to = calls.get(k);
      if (to !== undefined) this.directCall(dw, instrs[k], pcs[k], to);
      else if (!this.direct(dw, instrs[k], pcs[k])) {
        const run = dw.close();
        if (run !== null) out.push(run);
        out.push(this.instr(instrs[k], pcs[k]));
      }
    }
  }

  /**
   * The one-pass form of {@link div64} (`word` false) and {@link div32}: the same special cases,
   * as nested typed `if`s over the operands in L_T and L_T2.
   */
  private directDiv(dw: DirectWriter, ins: Instr, f: DivKind, word: boolean): void {
    const x = () => {
      dw.withIndex(Op.local_get, L_T);
      if (word) dw.op(0xa7); // i32.wrap_i64
    };
    const y = () => {
      dw.withIndex(Op.local_get, L_T2);
      if (word) dw.op(0xa7);
    };
    const type = word ? 0x7f : 0x7e;
    // the operation's opcode: i32 or i64 div_s, div_u, rem_s, rem_u
    const opcode = (word ? 0x6d : 0x7f) + { div: 0, divu: 1, rem: 2, remu: 3 }[f];
    dw.getReg(ins.rs1);
    dw.withIndex(Op.local_set, L_T);
    dw.getReg(ins.rs2);
    dw.withIndex(Op.local_set, L_T2);
    y();
    dw.op2(word ? 0x45 : 0x50, Op.if); // eqz
    dw.op(type);
    if (f === 'div' || f === 'divu') {
      dw.op2(word ? Op.i32_const : Op.i64_const, 0x7f); // -1
      dw.op(Op.else);
      if (f === 'div') {
        // INT_MIN / -1 = INT_MIN (RV64M), which Wasm's div_s would trap on
        x();
        dw.raw(word ? MIN32 : MIN64);
        dw.op(word ? 0x46 : 0x51); // eq
        y();
        dw.op2(word ? Op.i32_const : Op.i64_const, 0x7f);
        dw.op(word ? 0x46 : 0x51);
        dw.op2(0x71, Op.if); // i32.and
        dw.op(type);
        dw.raw(word ? MIN32 : MIN64);
        dw.op(Op.else);
      }
    } else {
      x();
      dw.op(Op.else);
    }
    x();
    y();
    dw.op(opcode);
    if (f === 'div') dw.op(Op.end);
    dw.op(Op.end);
    if (word) dw.op(0xac); // i64.extend_i32_s
    dw.setReg(ins.rd);
  }

  /** The one-pass form of {@link tailCall}. */
  private directTail(dw: DirectWriter, address: number, pc: number): void {
    dw.fuel(this.ctx.entryCosts.get(address)!, pc);
    dw.args();
    dw.call(Op.return_call, this.fnRef(functionName(address)));
  }

  /** A function's index or reference in the baseline module (ByteModule.functionValue). */
  private fnRef(name: string): number {
    return (this.ctx.structure as { bytes: ByteModule }).bytes.functionValue(name);
  }

  private terminator(b: BasicBlock): Ref {
    const m = this.m;
    const t = b.term;
    switch (t.kind) {
      case 'return':
        return m.block(null, [this.fuelOut(), m.return(m.tuple.make([this.get(10), this.get(11)]))]);
      case 'indirect-jump':
        return this.indirectJump(t.rs1, t.imm, t.pc, b);
      case 'jump':
        return t.link ? this.set(t.link.rd, this.c64(t.link.value)) : m.nop();
      default:
        return m.nop(); // branches and jumps: the Relooper edges carry the transfer
    }
  }

  /**
   * The call convention's arguments (sp, a0..a7) of a call to `target`, 0 for those it never reads
   * (EmitContext.argumentUses); all of them through the dispatcher (no target).
   */
  private args(target?: number): Ref[] {
    const passed = passedArguments(this.ctx.argumentUses, target);
    return ARGUMENT_REGISTERS.map((r) => ((passed & (1 << r)) !== 0 ? this.get(r) : this.c64(0)));
  }
  private takeResults(callExpr: Ref): Ref {
    const m = this.m;
    return m.block(null, [
      m.local.set(L_PAIR, callExpr),
      this.set(10, m.tuple.extract(m.local.get(L_PAIR, this.ctx.pair), 0)),
      this.set(11, m.tuple.extract(m.local.get(L_PAIR, this.ctx.pair), 1)),
    ]);
  }
  /** A tail call from `pc` to the function at `address`, charged its entry (enterFuel). */
  private tailCall(address: number, pc: number): Ref {
    return this.m.block(null, [
      this.enterFuel(address, pc),
      this.fuelOut(),
      this.m.return_call(functionName(address), this.args(address), this.ctx.pair),
    ]);
  }

  /** jal/jalr with rd != x0. rd is written before the callee runs, as the spec orders it. */
  private callSite(ins: Instr, pc: number, target: number | null): Ref {
    const m = this.m;
    const link = this.set(ins.rd, this.c64(pc + ins.size));
    if (target !== null) {
      if (!this.ctx.functionEntries.has(target)) {
        return m.block(null, [link, this.trap(TrapKind.BadIndirectTarget, pc, this.c64(target))]);
      }
      return m.block(null, [
        link,
        this.enterFuel(target, pc),
        this.fuelOut(),
        this.takeResults(m.call(functionName(target), this.args(target), this.ctx.pair)),
        this.fuelIn(),
      ]);
    }
    // target = (rs1 + imm) & ~1, read before rd is written (rd may equal rs1)
    return m.block(null, [
      m.local.set(L_T, m.i64.and(m.i64.add(this.get(ins.rs1), this.c64(ins.imm)), this.c64(-2))),
      link,
      this.fuelOut(),
      this.takeResults(
        m.call(Names.dispatch, [this.c32(pc), m.local.get(L_T, this.t.i64), ...this.args()], this.ctx.pair),
      ),
      this.fuelIn(),
    ]);
  }

  /** `return_call dispatch(pc, L_T, ...)`: an indirect tail call to the address in L_T. */
  private indirectTail(pc: number): Ref {
    return this.m.block(null, [
      this.fuelOut(),
      this.m.return_call(
        Names.dispatch,
        [this.c32(pc), this.m.local.get(L_T, this.t.i64), ...this.args()],
        this.ctx.pair,
      ),
    ]);
  }

  /** Whether the function has jump-table targets (and so the shared switch). */
  private hasSwitch(): boolean {
    return this.cfg.localTargets.length > 0;
  }

  /**
   * `jalr x0, imm(rs1)` with an unknown target, in block `b`. Without local jump-table targets it
   * is an indirect tail call. With them, L_T and L_PC are set for the function's shared switch
   * (switchCode), which control enters next. A target in [lowest target, b.start] is a back edge:
   * it is charged here as a static back edge would be, the length of the code it spans
   * ((b.end - target) / 2, rounded up).
   */
  private indirectJump(rs1: number, imm: number, pc: number, b: BasicBlock): Ref {
    const m = this.m;
    const i64 = this.t.i64;
    const setT = m.local.set(L_T, m.i64.and(m.i64.add(this.get(rs1), this.c64(imm)), this.c64(-2)));
    if (!this.hasSwitch()) return m.block(null, [setT, this.indirectTail(pc)]);
    const lo = this.cfg.localTargets[0];
    const parts = [setT, m.local.set(L_PC, this.c32(pc))];
    if (lo <= b.start) {
      const cost = m.i32.shr_u(
        m.i32.sub(this.c32(b.end + 1), m.i32.wrap(m.local.get(L_T, i64))),
        this.c32(1),
      );
      parts.push(
        m.if(
          m.i64.le_u(m.i64.sub(m.local.get(L_T, i64), this.c64(lo)), this.c64(b.start - lo)),
          this.fuelBy(cost, pc),
        ),
      );
    }
    return m.block(null, parts);
  }

  /** The shared switch's own code: leave through the dispatcher unless L_T is in the span. */
  private switchCode(): Ref {
    const m = this.m;
    const targets = this.cfg.localTargets;
    const lo = targets[0];
    const hi = targets[targets.length - 1];
    return m.block(null, [
      m.local.set(L_T2, m.i64.sub(m.local.get(L_T, this.t.i64), this.c64(lo))),
      m.if(m.i64.gt_u(m.local.get(L_T2, this.t.i64), this.c64(hi - lo)), this.switchTail()),
    ]);
  }

  /** `return_call dispatch(L_PC, L_T, ...)`: the shared switch's indirect tail call. */
  private switchTail(): Ref {
    return this.m.block(null, [
      this.fuelOut(),
      this.m.return_call(
        Names.dispatch,
        [this.m.local.get(L_PC, this.t.i32), this.m.local.get(L_T, this.t.i64), ...this.args()],
        this.ctx.pair,
      ),
    ]);
  }

  /** The br_table index of a switch block, valid after indirectJump's code ran. */
  private switchIndex(): Ref {
    const m = this.m;
    return m.i32.wrap(m.i64.shr_u(m.local.get(L_T2, this.t.i64), this.c64(1)));
  }

  private condition(ins: Instr): Ref {
    const cmp = CONDITIONS[ins.op as OpOfKind<'branch'>];
    if (cmp === undefined) throw new Error(`internal: ${ins.op} is not a conditional branch`);
    return this.m.i64[cmp](this.get(ins.rs1), this.get(ins.rs2));
  }

  /** One non-control instruction, lowered as {@link LOWERING} says. */
  private instr(ins: Instr, pc: number): Ref {
    const m = this.m;
    const { rd, rs1, rs2, imm } = ins;
    if (ins.op === 'illegal') return this.trap(TrapKind.IllegalInstruction, pc, this.c64(ins.bits));
    const low: Lowering = LOWERING[ins.op];
    switch (low.via) {
      case 'upper':
        return this.set(rd, this.c64(low.pcRelative ? pc + imm : imm));
      case 'reg-imm':
        if (this.narrow(low.f, rs1, 0)) {
          return this.set(rd, this.sext32(m.i32[low.f as Bitwise](this.w(rs1), this.c32(imm))));
        }
        // addi sp, sp, imm >= 0 only moves sp up (see spMark)
        return this.set(
          rd,
          m.i64[low.f](this.get(rs1), this.c64(imm)),
          low.f === 'add' && rd === 2 && rs1 === 2 && imm >= 0,
        );
      case 'shift-imm':
        return this.set(rd, m.i64[low.f](this.get(rs1), this.c64(imm & 63)));
      case 'reg-reg':
        if (this.narrow(low.f, rs1, rs2)) {
          return this.set(rd, this.sext32(m.i32[low.f as Bitwise](this.w(rs1), this.w(rs2))));
        }
        // Wasm masks i64 shift counts to 6 bits and i32 counts to 5, exactly as RV64I does.
        return this.set(rd, m.i64[low.f](this.get(rs1), this.get(rs2)));
      case 'set-less':
        return this.set(
          rd,
          m.i64.extend_u(m.i64[low.f](this.get(rs1), low.imm ? this.c64(imm) : this.get(rs2))),
        );
      case 'word-imm':
        // `sext.w` (addiw rd, rs1, 0) of a word value is a copy: its extension would cost V8 a
        // `movsxlq` per use on values that never left 32 bits (sha256's loop-carried state words)
        if (low.f === 'add' && imm === 0 && this.isWord(rs1)) return this.set(rd, this.get(rs1));
        return this.set(
          rd,
          this.sext32(m.i32[low.f](this.w(rs1), this.c32(low.f === 'add' ? imm : imm & 31))),
        );
      case 'word-reg':
        return this.set(rd, this.sext32(m.i32[low.f](this.w(rs1), this.w(rs2))));
      case 'load': {
        const e = ENTRY[ins.op];
        const width = e.width!;
        return m.block(null, [
          this.address(rs1, imm, width, pc),
          this.set(rd, this.g.load(width, e.signed!, this.ea(), 1, this.offset)),
        ]);
      }
      case 'store': {
        const width = ENTRY[ins.op].width!;
        const addr = this.address(rs1, imm, width, pc);
        const st = this.g.store(width, this.ea(), this.get(rs2), 1, this.offset);
        // sp plus a non-negative offset is at or above dirty_lo already (spMark)
        if (rs1 === 2 && imm >= 0) return m.block(null, [addr, st]);
        return m.block(null, [addr, this.track(width), st]);
      }
      case 'nop':
        return m.nop(); // fence, fence.i: one hart, no caches to synchronise
      case 'ecall':
        return this.ecall(pc);
      case 'breakpoint':
        return this.trap(TrapKind.Breakpoint, pc, this.c64(0));
      case 'helper':
        return this.set(rd, m.call(Names[low.name], [this.get(rs1), this.get(rs2)], this.t.i64));
      case 'div':
        return this.div64(ins, low.f);
      case 'div-word':
        return this.div32(ins, low.f);
      case 'lr':
      case 'sc':
        return this.atomic(ins, pc, low.via);
      case 'amo':
        return this.atomic(ins, pc, low.f);
      case 'csr-read':
        // A read with rs1/uimm = 0 writes nothing: only the user counters are readable here.
        if (rs1 === 0 && (imm === 0xc00 || imm === 0xc01 || imm === 0xc02)) {
          return this.set(rd, m.call(Names.csr, [this.c32(imm), this.c32(pc)], this.t.i64));
        }
        return this.trap(TrapKind.IllegalInstruction, pc, this.c64(ins.bits));
      case 'illegal':
        // csrrw/csrrwi: CSR writes are illegal in this user-mode environment
        return this.trap(TrapKind.IllegalInstruction, pc, this.c64(ins.bits));
      case 'control':
        throw new Error(`internal: ${ins.op} at 0x${pc.toString(16)} reached the straight-line lowering`);
    }
  }

  /**
   * ecall: a7 is the number, a0..a5 the arguments; a0 and a1 come back (upstream berm ABI). The
   * module's ecall helper (module.ts addEcallHelper) splits them into i32 pieces for the import.
   */
  private ecall(pc: number): Ref {
    return this.takeResults(
      this.m.call(
        Names.ecallHelper,
        [this.c32(pc), this.get(17), ...[10, 11, 12, 13, 14, 15].map((r) => this.get(r))],
        this.ctx.pair,
      ),
    );
  }

  /** RV64M division: x/0 = all ones, x%0 = x, INT64_MIN/-1 = INT64_MIN, INT64_MIN%-1 = 0 (spec "Division Operations"). */
  private div64(ins: Instr, f: DivKind): Ref {
    const m = this.m;
    const x = () => m.local.get(L_T, this.t.i64);
    const y = () => m.local.get(L_T2, this.t.i64);
    const isZero = m.i64.eqz(y());
    let v: Ref;
    switch (f) {
      case 'div':
        v = m.if(
          isZero,
          this.c64(-1),
          m.if(
            m.i32.and(m.i64.eq(x(), this.c64(I64_MIN)), m.i64.eq(y(), this.c64(-1))),
            this.c64(I64_MIN),
            m.i64.div_s(x(), y()),
          ),
        );
        break;
      case 'divu':
        v = m.if(isZero, this.c64(-1), m.i64.div_u(x(), y()));
        break;
      case 'rem':
        // Wasm's rem_s gives 0 for INT64_MIN % -1 instead of trapping, as the spec wants.
        v = m.if(isZero, x(), m.i64.rem_s(x(), y()));
        break;
      case 'remu':
        v = m.if(isZero, x(), m.i64.rem_u(x(), y()));
        break;
    }
    return m.block(null, [
      m.local.set(L_T, this.get(ins.rs1)),
      m.local.set(L_T2, this.get(ins.rs2)),
      this.set(ins.rd, v),
    ]);
  }

  /** RV64M word division: results are sign-extended 32-bit values, with the same special cases. */
  private div32(ins: Instr, f: DivKind): Ref {
    const m = this.m;
    const x = () => m.i32.wrap(m.local.get(L_T, this.t.i64));
    const y = () => m.i32.wrap(m.local.get(L_T2, this.t.i64));
    const isZero = m.i32.eqz(y());
    let v: Ref;
    switch (f) {
      case 'div':
        v = m.if(
          isZero,
          this.c32(-1),
          m.if(
            m.i32.and(m.i32.eq(x(), this.c32(-0x80000000)), m.i32.eq(y(), this.c32(-1))),
            this.c32(-0x80000000),
            m.i32.div_s(x(), y()),
          ),
        );
        break;
      case 'divu':
        v = m.if(isZero, this.c32(-1), m.i32.div_u(x(), y()));
        break;
      case 'rem':
        v = m.if(isZero, x(), m.i32.rem_s(x(), y()));
        break;
      case 'remu':
        v = m.if(isZero, x(), m.i32.rem_u(x(), y()));
        break;
    }
    return m.block(null, [
      m.local.set(L_T, this.get(ins.rs1)),
      m.local.set(L_T2, this.get(ins.rs2)),
      this.set(ins.rd, this.sext32(v)),
    ]);
  }

  /**
   * A extension on one hart: LR records a reservation, SC succeeds (rd = 0) only on the reserved
   * address and always clears it; AMOs load, combine with rs2, store, and return the old value.
   */
  private atomic(ins: Instr, pc: number, kind: 'lr' | 'sc' | AmoKind): Ref {
    const m = this.m;
    const width = ENTRY[ins.op as RvOp].width as 4 | 8;
    const word = width === 4;
    // AMOs and LR/SC need natural alignment (A extension); a misaligned address is a fault here
    const addr = m.block(null, [
      this.address(ins.rs1, 0, width, pc),
      m.if(
        m.i64.ne(m.i64.and(m.local.get(L_E, this.t.i64), this.c64(width - 1)), this.c64(0)),
        this.trap(TrapKind.MemoryFault, pc, m.i64.add(m.local.get(L_E, this.t.i64), this.c64(this.ctx.base))),
      ),
      this.track(width),
    ]);
    const full = () => m.i64.add(m.local.get(L_E, this.t.i64), this.c64(this.ctx.base));
    const loadOld = () => this.g.load(width, true, this.ea(), width);
    const store = (v: Ref) => this.g.store(width, this.ea(), v, width);
    if (kind === 'lr') {
      return m.block(null, [addr, m.global.set(Names.resv, full()), this.set(ins.rd, loadOld())]);
    }
    if (kind === 'sc') {
      return m.block(null, [
        addr,
        m.local.set(L_T2, this.get(ins.rs2)),
        m.if(
          m.i64.eq(m.global.get(Names.resv, this.t.i64), full()),
          m.block(null, [store(m.local.get(L_T2, this.t.i64)), this.set(ins.rd, this.c64(0))]),
          this.set(ins.rd, this.c64(1)),
        ),
        m.global.set(Names.resv, this.c64(-1)),
      ]);
    }
    const old = () => m.local.get(L_T, this.t.i64);
    const src = () => m.local.get(L_T2, this.t.i64);
    const cmp = (signed: boolean, wantMin: boolean): Ref => {
      const [l, r] = word ? [m.i32.wrap(old()), m.i32.wrap(src())] : [old(), src()];
      const lt = word
        ? signed
          ? m.i32.lt_s(l, r)
          : m.i32.lt_u(l, r)
        : signed
          ? m.i64.lt_s(l, r)
          : m.i64.lt_u(l, r);
      return wantMin ? m.select(lt, old(), src()) : m.select(lt, src(), old());
    };
    let nv: Ref;
    switch (kind) {
      case 'swap':
        nv = src();
        break;
      case 'add':
        nv = m.i64.add(old(), src());
        break;
      case 'xor':
        nv = m.i64.xor(old(), src());
        break;
      case 'and':
        nv = m.i64.and(old(), src());
        break;
      case 'or':
        nv = m.i64.or(old(), src());
        break;
      case 'min':
        nv = cmp(true, true);
        break;
      case 'max':
        nv = cmp(true, false);
        break;
      case 'minu':
        nv = cmp(false, true);
        break;
      case 'maxu':
        nv = cmp(false, false);
        break;
    }
    return m.block(null, [
      addr,
      m.local.set(L_T2, this.get(ins.rs2)),
      m.local.set(L_T, loadOld()),
      store(nv),
      this.set(ins.rd, old()),
    ]);
  }
}

type I64Bin = 'add' | 'sub' | 'and' | 'or' | 'xor' | 'shl' | 'shr_u' | 'shr_s' | 'mul';
type Bitwise = 'and' | 'or' | 'xor';

type I32Bin = 'add' | 'sub' | 'shl' | 'shr_u' | 'shr_s' | 'mul';
type DivKind = 'div' | 'divu' | 'rem' | 'remu';
type AmoKind = 'swap' | 'add' | 'xor' | 'and' | 'or' | 'min' | 'max' | 'minu' | 'maxu';

/** How one instruction becomes Wasm (interpreted by FunctionEmitter.instr). */
type Lowering =
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
const amo = (f: AmoKind) => ({ via: 'amo', f }) as const;

/**
 * The lowering of every instruction of the ISA table: adding an instruction there fails to
 * compile until it has one here (no silent default).
 */
const LOWERING = {
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
const D_UPPER = 1;
const D_REG_IMM = 2;
const D_SHIFT_IMM = 3;
const D_REG_REG = 4;
const D_SET_LESS = 5;
const D_WORD_IMM = 6;
const D_WORD_REG = 7;
const D_LOAD = 8;
const D_STORE = 9;
const D_HELPER = 10;
const D_DIV = 11;
const D_DIV_WORD = 12;
const D_NOP = 13;
const D_BREAKPOINT = 14;
const D_ILLEGAL = 15;

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
const DIRECT_PLANS: readonly DirectPlan[] = [
  ...INSTRUCTIONS.map((e) => directPlan(e.name)),
  { kind: D_ILLEGAL, opcode: 0, width: 0, flag: false, low: null },
];

/** i32.const and i64.const of the smallest 32- and 64-bit integers (signed LEB128). */
const MIN32: readonly number[] = [Op.i32_const, 0x80, 0x80, 0x80, 0x80, 0x78];
const MIN64: readonly number[] = [Op.i64_const, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f];

/** The opcode of each conditional branch's i64 comparison (the one-pass form of CONDITIONS). */
const BRANCH_OPCODE: Record<OpOfKind<'branch'>, number> = {
  beq: 0x51,
  bne: 0x52,
  blt: 0x53,
  bge: 0x59,
  bltu: 0x54,
  bgeu: 0x5a,
};

/** The Wasm comparison of each conditional branch. */
const CONDITIONS = {
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

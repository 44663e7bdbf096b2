/**
 * The core of the function emitter: its state (builder, types, liveness, sp and word tracking, the
 * one-pass writer) and the register file (guest registers in locals, x0 a constant, gp/tp in
 * globals), constants, sign extension and the one trap sequence.
 */
import type { ExprBuilder, Ref, Types } from './builder.js';
import { TrapKind } from './abi.js';
import type { FunctionCfg } from './cfg.js';
import { type Gen } from './gen.js';
import { CALL_ARGS, Liveness } from './liveness.js';
import { spOffsets, type SpOffset } from './frame.js';
import { wordValues } from './words.js';
import { DirectWriter } from './direct.js';
import { type EmitContext, Names, REG_LOCAL, directFrame } from './emit-frame.js';

/** EmitterCore: see the module comment. */
export abstract class EmitterCore {
  protected readonly m: ExprBuilder;
  protected readonly t: Types;
  protected readonly g: Gen;
  /**
   * Register liveness when the context knows what calls read (the optimising tier): a load whose
   * destination is dead is reduced to its bounds check (see blockCode).
   */
  protected readonly liveness: Liveness | null;
  /**
   * sp's offset from its entry value at each block's start, in the optimising tier (frame.ts),
   * and where the code being emitted stands (null: unknown)
   */
  protected readonly spAt: Map<number, SpOffset> | null;
  protected sp: SpOffset = null;
  /**
   * The registers known to hold sign-extended 32-bit values at the instruction being emitted (bit
   * r: xr; words.ts); null in the baseline tier.
   */
  protected sext: number | null = null;
  /** the word values on entry to each block (words.ts), in the optimising tier */
  protected readonly wordsAt: Map<number, number> | null;
  /** the offset field of the access whose address() was built last (see address) */
  protected offset = 0;
  /** the baseline tier's one-pass writer of common instructions (direct.ts); null otherwise */
  protected readonly dw: DirectWriter | null;
  /** whether any fuel charge was emitted */
  charged = false;
  /**
   * @param fuelLocal whether the fuel count lives in L_FUEL while the function runs (the
   *   optimising tier only: the local is declared there)
   */
  constructor(
    protected readonly ctx: EmitContext,
    protected readonly cfg: FunctionCfg,
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

  // ---- registers ----
  protected get(r: number): Ref {
    const m = this.m;
    if (r === 0) return m.i64.const(0n);
    if (r === 3) return m.global.get(Names.gp, this.t.i64);
    if (r === 4) return m.global.get(Names.tp, this.t.i64);
    return m.local.get(REG_LOCAL[r]!, this.t.i64);
  }
  /** Write register `r`. `spGrows`: the value is sp plus a non-negative amount (see spMark). */
  protected set(r: number, v: Ref, spGrows = false): Ref {
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
  protected spMark(): Ref {
    const m = this.m;
    const off = () => m.i64.sub(this.get(2), this.c64(this.ctx.base));
    return m.if(
      m.i64.lt_s(off(), m.i64.extend_u(m.global.get(Names.dirtyLo, this.t.i32))),
      m.global.set(Names.dirtyLo, m.select(m.i64.ge_s(off(), this.c64(0)), m.i32.wrap(off()), this.c32(0))),
    );
  }
  protected c64(v: number | bigint): Ref {
    return this.g.c64(v);
  }
  /**
   * Whether a bitwise `f` of rs1 and rs2 (x0 for an immediate, itself sign-extended from 12 bits)
   * may be done on 32 bits: both hold sign-extended 32-bit values (the `sext` mask, optimising
   * tier), so the 64-bit result is the sign extension of the 32-bit one. Written that way, V8
   * folds the wrap of an operand's extension and keeps chains of word operations (sha256's
   * rotations: sllw/srlw, or, xor, addw) in 32-bit registers without re-extending every step.
   */
  protected narrow(f: string, rs1: number, rs2: number): boolean {
    return (f === 'and' || f === 'or' || f === 'xor') && this.isWord(rs1) && this.isWord(rs2);
  }
  /** Whether xr holds a sign-extended 32-bit value here (optimising tier; see {@link narrow}). */
  protected isWord(r: number): boolean {
    return this.sext !== null && (this.sext & (1 << r)) !== 0;
  }
  protected c32(v: number): Ref {
    return this.g.c32(v);
  }
  protected sext32(v: Ref): Ref {
    return this.m.i64.extend_s(v);
  }
  protected w(r: number): Ref {
    return this.m.i32.wrap(this.get(r));
  }

  // ---- traps ----
  protected trap(kind: TrapKind, pc: number, value: Ref): Ref {
    return this.g.trap(kind, pc, value);
  }
}

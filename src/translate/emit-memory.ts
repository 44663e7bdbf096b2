/**
 * Memory access: effective addresses, the bounds check against the guest memory (skipped for
 * accesses the frame analysis proves inside the stack frame), and dirty-range tracking of stores.
 */
import type { Ref } from './builder.js';
import { TrapKind } from './abi.js';
import { L_E, Names } from './emit-frame.js';
import { FuelEmitter } from './emit-fuel.js';

/** MemoryEmitter: see the module comment. */
export abstract class MemoryEmitter extends FuelEmitter {
  // ---- memory ----
  /** Sets L_E to (rs1 + imm - base) and traps MemoryFault unless the `width` bytes lie inside memory. */
  protected address(rs1: number, imm: number, width: number, pc: number): Ref {
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
  protected frameSafe(offset: number, width: number): boolean {
    return offset + width <= 0 && this.ctx.stackLimit + offset >= this.ctx.base;
  }
  /** Record a store of `width` bytes at L_E in the dirty extents (see EmitContext.dirtySplit). */
  protected track(width: number): Ref {
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
  protected ea(): Ref {
    return this.m.i32.wrap(this.m.local.get(L_E, this.t.i64));
  }
}

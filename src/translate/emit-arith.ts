/**
 * The RV64M division and remainder (with the spec's results for a zero divisor and overflow, in
 * both tiers) and the RV64A atomics: lr/sc reservations and the AMOs.
 */
import type { Ref } from './builder.js';
import { Op } from './bytes.js';
import type { Instr } from '../riscv/instr.js';
import { ENTRY, type Op as RvOp } from '../riscv/isa.js';
import { TrapKind } from './abi.js';
import { DirectWriter } from './direct.js';
import { I64_MIN, L_E, L_T, L_T2, Names } from './emit-frame.js';
import { type AmoKind, type DivKind, MIN32, MIN64 } from './lowering.js';
import { CallEmitter } from './emit-calls.js';

/** ArithEmitter: see the module comment. */
export abstract class ArithEmitter extends CallEmitter {
  /**
   * The one-pass form of {@link div64} (`word` false) and {@link div32}: the same special cases,
   * as nested typed `if`s over the operands in L_T and L_T2.
   */
  protected directDiv(dw: DirectWriter, ins: Instr, f: DivKind, word: boolean): void {
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

  /** RV64M division: x/0 = all ones, x%0 = x, INT64_MIN/-1 = INT64_MIN, INT64_MIN%-1 = 0 (spec "Division Operations"). */
  protected div64(ins: Instr, f: DivKind): Ref {
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
  protected div32(ins: Instr, f: DivKind): Ref {
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
  protected atomic(ins: Instr, pc: number, kind: 'lr' | 'sc' | AmoKind): Ref {
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

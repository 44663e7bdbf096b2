/**
 * Calls: direct calls and tail calls between translated functions (with the arguments each callee
 * reads), calls through the dispatcher, inlined millicode, and the shared switch of a function's
 * jump-table targets.
 */
import type { Ref } from './builder.js';
import { Op, type ByteModule } from './bytes.js';
import type { Instr } from '../riscv/instr.js';
import { TrapKind } from './abi.js';
import type { BasicBlock, CallSite } from './cfg.js';
import { DirectWriter } from './direct.js';
import {
  ARGUMENT_REGISTERS,
  L_PAIR,
  L_PC,
  L_T,
  L_T2,
  Names,
  functionName,
  passedArguments,
} from './emit-frame.js';
import { MemoryEmitter } from './emit-memory.js';

/** CallEmitter: see the module comment. */
export abstract class CallEmitter extends MemoryEmitter {
  /** Write `ins` through the one-pass templates when it is one of theirs (FunctionEmitter). */
  protected abstract direct(dw: DirectWriter, ins: Instr, pc: number): boolean;
  /** The general lowering of one instruction (FunctionEmitter). */
  protected abstract instr(ins: Instr, pc: number): Ref;

  /** The one-pass form of {@link callSite} (the call convention passes every argument). */
  protected directCall(dw: DirectWriter, ins: Instr, pc: number, target: number | null): void {
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
  protected directInline(
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

  /** The one-pass form of {@link tailCall}. */
  protected directTail(dw: DirectWriter, address: number, pc: number): void {
    dw.fuel(this.ctx.entryCosts.get(address)!, pc);
    dw.args();
    dw.call(Op.return_call, this.fnRef(functionName(address)));
  }

  /** A function's index or reference in the baseline module (ByteModule.functionValue). */
  protected fnRef(name: string): number {
    return (this.ctx.structure as { bytes: ByteModule }).bytes.functionValue(name);
  }

  /**
   * The call convention's arguments (sp, a0..a7) of a call to `target`, 0 for those it never reads
   * (EmitContext.argumentUses); all of them through the dispatcher (no target).
   */
  protected args(target?: number): Ref[] {
    const passed = passedArguments(this.ctx.argumentUses, target);
    return ARGUMENT_REGISTERS.map((r) => ((passed & (1 << r)) !== 0 ? this.get(r) : this.c64(0)));
  }
  protected takeResults(callExpr: Ref): Ref {
    const m = this.m;
    return m.block(null, [
      m.local.set(L_PAIR, callExpr),
      this.set(10, m.tuple.extract(m.local.get(L_PAIR, this.ctx.pair), 0)),
      this.set(11, m.tuple.extract(m.local.get(L_PAIR, this.ctx.pair), 1)),
    ]);
  }
  /** A tail call from `pc` to the function at `address`, charged its entry (enterFuel). */
  protected tailCall(address: number, pc: number): Ref {
    return this.m.block(null, [
      this.enterFuel(address, pc),
      this.fuelOut(),
      this.m.return_call(functionName(address), this.args(address), this.ctx.pair),
    ]);
  }

  /** jal/jalr with rd != x0. rd is written before the callee runs, as the spec orders it. */
  protected callSite(ins: Instr, pc: number, target: number | null): Ref {
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
  protected indirectTail(pc: number): Ref {
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
  protected hasSwitch(): boolean {
    return this.cfg.localTargets.length > 0;
  }

  /**
   * `jalr x0, imm(rs1)` with an unknown target, in block `b`. Without local jump-table targets it
   * is an indirect tail call. With them, L_T and L_PC are set for the function's shared switch
   * (switchCode), which control enters next. A target in [lowest target, b.start] is a back edge:
   * it is charged here as a static back edge would be, the length of the code it spans
   * ((b.end - target) / 2, rounded up).
   */
  protected indirectJump(rs1: number, imm: number, pc: number, b: BasicBlock): Ref {
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
  protected switchCode(): Ref {
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
  protected switchTail(): Ref {
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
  protected switchIndex(): Ref {
    const m = this.m;
    return m.i32.wrap(m.i64.shr_u(m.local.get(L_T2, this.t.i64), this.c64(1)));
  }
}

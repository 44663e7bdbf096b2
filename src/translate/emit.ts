/**
 * Binaryen code generation for one analysed guest function: guest registers
 * in Wasm locals, x0 a constant, gp/tp in globals, every memory access bounds-checked against the
 * guest memory, an interrupt/fuel check on every backward edge and on function entry.
 * Instruction semantics follow the RISC-V unprivileged spec (RV64I, M, A, Zicsr); the section is
 * named where Wasm's own behaviour differs.
 */
import type binaryen from 'binaryen';
import type { Ref } from './builder.js';
import { Op, type ByteModule } from './bytes.js';
import type { Instr } from '../riscv/instr.js';
import { ENTRY, type Op as RvOp, type OpOfKind } from '../riscv/isa.js';
import { TrapKind } from './abi.js';
import type { BasicBlock, FunctionCfg, Target } from './cfg.js';
import { stepSp } from './frame.js';
import { stepSext } from './words.js';
import { DirectWriter } from './direct.js';
import {
  type EmitContext,
  L_F,
  L_LABEL,
  L_POLL_PC,
  L_T,
  Names,
  REG_LOCAL,
  entryCost,
  frameVars,
  functionName,
  pollsOnBackEdge,
} from './emit-frame.js';
import {
  BRANCH_OPCODE,
  type Bitwise,
  CONDITIONS,
  DIRECT_PLANS,
  D_BREAKPOINT,
  D_DIV,
  D_DIV_WORD,
  D_HELPER,
  D_ILLEGAL,
  D_LOAD,
  D_NOP,
  D_REG_IMM,
  D_REG_REG,
  D_SET_LESS,
  D_SHIFT_IMM,
  D_STORE,
  D_UPPER,
  D_WORD_IMM,
  D_WORD_REG,
  LOWERING,
  type Lowering,
} from './lowering.js';
import { ArithEmitter } from './emit-arith.js';

export {
  ARGUMENT_REGISTERS,
  chargeFuel,
  directFrame,
  entryCost,
  functionName,
  Names,
  passedArguments,
  pollsOnBackEdge,
  type EmitContext,
} from './emit-frame.js';
export { BRANCH_CONDITIONS, LOWERINGS } from './lowering.js';

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

/**
 * Whether the one-pass writer writes the instructions it has templates for (default true). Off,
 * every instruction goes through the general lowering ({@link FunctionEmitter.instr}) over
 * ByteModule instead, whose bytes the templates must equal: test/baseline-templates.test.ts
 * translates every ELF of the repository both ways and compares.
 */
export const oneRunTemplates = { instructions: true };

/** Emits one guest function: its body, blocks and the general lowering of each instruction. */
class FunctionEmitter extends ArithEmitter {
  /**
   * Write `ins` through the one-pass templates when it is one of theirs (and leave its run open).
   * @returns false when it needs the general lowering ({@link instr})
   */
  protected direct(dw: DirectWriter, ins: Instr, pc: number): boolean {
    if (!oneRunTemplates.instructions) return false;
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
  protected directBody(bm: ByteModule): Ref {
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
  protected blockCode(b: BasicBlock): Ref {
    const out: Ref[] = [];
    this.blockInto(b, out);
    return this.m.block(null, out);
  }

  /**
   * {@link blockCode}'s nodes, appended to `out`. With the one-pass writer (baseline tier), the
   * code is written into its run wherever a template exists, and the run is left open at the end
   * (the caller continues it); nodes built in between go to `out` after the run they follow.
   */
  protected blockInto(b: BasicBlock, out: Ref[]): void {
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
  protected directBlock(dw: DirectWriter, b: BasicBlock, out: Ref[]): void {
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
  protected directTerminator(dw: DirectWriter, b: BasicBlock): boolean {
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

  protected terminator(b: BasicBlock): Ref {
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

  protected condition(ins: Instr): Ref {
    const cmp = CONDITIONS[ins.op as OpOfKind<'branch'>];
    if (cmp === undefined) throw new Error(`internal: ${ins.op} is not a conditional branch`);
    return this.m.i64[cmp](this.get(ins.rs1), this.get(ins.rs2));
  }

  /** One non-control instruction, lowered as {@link LOWERING} says. */
  protected instr(ins: Instr, pc: number): Ref {
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
  protected ecall(pc: number): Ref {
    return this.takeResults(
      this.m.call(
        Names.ecallHelper,
        [this.c32(pc), this.get(17), ...[10, 11, 12, 13, 14, 15].map((r) => this.get(r))],
        this.ctx.pair,
      ),
    );
  }
}

/**
 * The frame of a translated guest function and what every function of a module shares: the names
 * of module-level items, the emit context, the locals plan (registers in locals, scratch locals),
 * the fuel charged on entry and on back edges, and the arguments a call passes.
 */
import type binaryen from 'binaryen';
import type { ExprBuilder, Ref, Ty, Types } from './builder.js';
import { type ByteModule } from './bytes.js';
import type { FunctionCfg } from './cfg.js';
import { LocalPlan, type Gen } from './gen.js';
import { type DirectFrame } from './direct.js';
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
export const REG_LOCAL: (number | null)[] = (() => {
  const map: (number | null)[] = new Array(32).fill(null);
  map[2] = FRAME.param(0);
  for (let r = 10; r <= 17; r++) map[r] = FRAME.param(r - 9);
  for (const r of [1, 5, 6, 7, 8, 9, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31])
    map[r] = FRAME.add('i64');
  return map;
})();
/** i64: effective address minus base */
export const L_E = FRAME.add('i64');
/** i64: scratch (indirect targets, division and AMO operands) */
export const L_T = FRAME.add('i64');
export const L_T2 = FRAME.add('i64');
/** i32: the Relooper's label helper, the direct structure's next block */
export const L_LABEL = FRAME.add('i32');
/** i32: pc of the indirect jump that entered the function's shared switch */
export const L_PC = FRAME.add('i32');
/** i32: the fuel left after a charge (saves reading the global back) */
export const L_F = FRAME.add('i32');
/** i32: the direct structure's back edge that ran out of fuel (its pc) */
export const L_POLL_PC = FRAME.add('i32');
/** (i64, i64): call results (last: ByteModule expands it into two locals) */
export const L_PAIR = FRAME.add('pair');
/**
 * i32, optimising tier only (declared after L_PAIR: Binaryen counts a tuple local as one): the
 * fuel left in the slice while the function runs. The `fuel` global is read into it on entry and
 * after each call to a guest function, and written back before each call, tail call and return:
 * the global carries the count between functions, the local within one, so a loop's charge is
 * a register decrement rather than a load and a store of the global that the next iteration's
 * load waits on (store-to-load forwarding on the loop's critical path). No import reads the
 * global: the engine's poll grants a slice and forgets what was left.
 */
export const L_FUEL = L_PAIR + 1;

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

export const I64_MIN = -(2n ** 63n);
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
export function frameVars(t: Types): Ty[] {
  let v = FRAME_VARS.get(t);
  if (v === undefined) {
    v = FRAME.vars(t);
    FRAME_VARS.set(t, v);
  }
  return v;
}

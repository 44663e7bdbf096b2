/**
 * The baseline tier's one-pass writer for the common straight-line instructions (integer ALU,
 * lui/auipc, loads and stores): it writes each instruction's Wasm bytes straight into
 * ByteModule's value buffer from a fixed template, with no expression nodes and no BigInt
 * constants, and consecutive instructions share one raw node. A freshly started process runs the
 * translator in V8's interpreter, where every builder call costs; this path makes a few dozen
 * array stores per instruction instead of a dozen builder calls.
 *
 * The bytes are exactly those that FunctionEmitter (emit.ts) builds for the same instruction in the
 * baseline tier (no frame, liveness or word facts): its lowering is the specification, and the
 * baseline output of every fixture must stay byte-identical (bench/baseline-digest.ts; held by
 * test/baseline-templates.test.ts against the general lowering).
 * Encodings: WebAssembly core specification 2.0, chapter 5.
 */
import type { ByteModule } from './bytes.js';
import type { Ref } from './builder.js';
import { TrapKind } from './abi.js';

/**
 * What the templates need to know of the module and the function frame: the same for every guest
 * function of a module (emit.ts directFrame builds it once); an entry stub's differs only in its
 * fuel local.
 */
export interface DirectFrame {
  /** the Wasm local of each guest register (null: x0, gp, tp) */
  regLocal: readonly (number | null)[];
  /** the i64 local holding an access's effective address minus base */
  addressLocal: number;
  /** global indices */
  gp: number;
  tp: number;
  dirtyLo: number;
  dirtyHi: number;
  /** the fuel global */
  fuel: number;
  /**
   * the trap and poll imports as ByteModule.functionValue gives them: a final function index
   * (>= 0) or a reference resolved when the module is written (< 0)
   */
  trap: number;
  poll: number;
  /** i32 scratch local of a fuel charge (emit.ts chargeFuel) */
  fuelLocal: number;
  /** the (i64, i64) local a call's results land in (expanded into two i64 locals) */
  pairLocal: number;
  /** the registers a call passes, in parameter order (sp, a0..a7) */
  argumentRegisters: readonly number[];
  /** guest address of Wasm address 0, memory size in bytes, dirty-tracking split (emit.ts) */
  base: number;
  size: number;
  dirtySplit: number;
}

/** The most values one instruction's template writes (a checked, tracked store is about 90). */
const MAX_VALUES = 160;

/** Signed LEB128 of an integer in the safe range (|v| < 2^53) at buf[u]; returns the next index. */
function sleb(buf: Int32Array, u: number, v: number): number {
  if (v === (v | 0)) {
    for (;;) {
      const b = v & 0x7f;
      v >>= 7;
      if ((v === 0 && (b & 0x40) === 0) || (v === -1 && (b & 0x40) !== 0)) {
        buf[u++] = b;
        return u;
      }
      buf[u++] = b | 0x80;
    }
  }
  for (;;) {
    const q = Math.floor(v / 128);
    const b = v - q * 128;
    v = q;
    if ((v === 0 && (b & 0x40) === 0) || (v === -1 && (b & 0x40) !== 0)) {
      buf[u++] = b;
      return u;
    }
    buf[u++] = b | 0x80;
  }
}

/** Unsigned LEB128 of a non-negative 32-bit integer at buf[u]; returns the next index. */
function uleb(buf: Int32Array, u: number, v: number): number {
  while (v >= 0x80) {
    buf[u++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  buf[u++] = v;
  return u;
}

/**
 * The parts of the templates that are the same for every instruction of a module (they depend on
 * the frame only), written once per frame and copied with one `Int32Array.set` per use: in a
 * freshly started process the translator runs in V8's interpreter, where each value written costs
 * a keyed store, and a checked, tracked store writes about ninety.
 */
interface Segments {
  /** address(), between `sleb(imm - base)` and `sleb(pc)`, by access width */
  checkMid: Int32Array[];
  /** address()'s rest after `sleb(pc)` (the trap arm's end), then ea(): a load's, an untracked store's */
  checkEndEa: Int32Array;
  /** the same with track(width) before ea() (a tracked store's), by access width */
  checkEndTrackEa: Int32Array[];
  /** fuel(), up to `sleb(cost)`, between it and `sleb(pc)`, and after it */
  fuelHead: Int32Array;
  fuelMid: Int32Array;
  fuelEnd: Int32Array;
  /** args() */
  args: Int32Array;
  /** takeResults() */
  takeResults: Int32Array;
  /** whether a segment holds a function reference (the run is then not pure) */
  impure: boolean;
}

/** The segments of each frame, made on its first writer. */
const SEGMENTS = new WeakMap<DirectFrame, Segments>();

/**
 * Writes runs of straight-line instructions as raw ByteModule nodes. Between {@link open} (implicit
 * in every instruction method) and {@link close} nothing else may add nodes to the module: a
 * node's values are contiguous.
 */
export class DirectWriter {
  private from = -1;
  /** whether the open run holds no function reference (ByteModule.rawClose) */
  private pure = true;
  private buf: Int32Array;
  /** buf.length (a typed array's length is a call in a cold process) */
  private cap: number;
  /** the frame's regLocal and base, read by most templates */
  private readonly regLocal: readonly (number | null)[];
  private readonly base: number;
  private u = 0;
  constructor(
    private readonly bm: ByteModule,
    private readonly f: DirectFrame,
  ) {
    this.buf = bm.rawBuffer(0);
    this.cap = this.buf.length;
    this.regLocal = f.regLocal;
    this.base = f.base;
    let seg = SEGMENTS.get(f);
    if (seg === undefined) {
      seg = this.segments();
      SEGMENTS.set(f, seg);
    }
    this.seg = seg;
  }

  private readonly seg: Segments;

  /** The frame's {@link Segments}, written by the same code as the templates they stand for. */
  private segments(): Segments {
    const f = this.f;
    const e = f.addressLocal;
    const tmp = new Int32Array(256);
    let impure = false;
    const cut = (n: number): Int32Array => {
      const s = tmp.slice(0, n);
      for (let i = 0; i < n; i++) if (s[i] < 0) impure = true;
      return s;
    };
    const end = (u: number): number => {
      tmp[u++] = 0x20;
      u = uleb(tmp, u, e);
      tmp[u++] = 0x42;
      u = sleb(tmp, u, f.base);
      tmp[u++] = 0x7c;
      tmp[u++] = 0x10; // call
      u = this.fn(tmp, u, f.trap);
      tmp[u++] = 0x00; // unreachable
      tmp[u++] = 0x0b;
      return u;
    };
    const checkMid: Int32Array[] = [];
    const checkEndTrackEa: Int32Array[] = [];
    for (const width of [1, 2, 4, 8]) {
      let u = 0;
      tmp[u++] = 0x7c; // i64.add
      tmp[u++] = 0x21;
      u = uleb(tmp, u, e);
      tmp[u++] = 0x20;
      u = uleb(tmp, u, e);
      tmp[u++] = 0x42;
      u = sleb(tmp, u, f.size - width);
      tmp[u++] = 0x56; // i64.gt_u
      tmp[u++] = 0x04;
      tmp[u++] = 0x40;
      tmp[u++] = 0x41;
      u = sleb(tmp, u, TrapKind.MemoryFault);
      tmp[u++] = 0x41;
      checkMid[width] = cut(u);
      checkEndTrackEa[width] = cut(this.ea(tmp, this.track(tmp, end(0), width)));
    }
    const checkEndEa = cut(this.ea(tmp, end(0)));
    let u = 0;
    tmp[u++] = 0x23;
    u = uleb(tmp, u, f.fuel);
    tmp[u++] = 0x41;
    const fuelHead = cut(u);
    u = 0;
    tmp[u++] = 0x6b; // i32.sub
    tmp[u++] = 0x22; // local.tee
    u = uleb(tmp, u, f.fuelLocal);
    tmp[u++] = 0x24;
    u = uleb(tmp, u, f.fuel);
    tmp[u++] = 0x20;
    u = uleb(tmp, u, f.fuelLocal);
    tmp[u++] = 0x41;
    tmp[u++] = 0;
    tmp[u++] = 0x48; // i32.lt_s
    tmp[u++] = 0x04;
    tmp[u++] = 0x40;
    tmp[u++] = 0x41;
    const fuelMid = cut(u);
    u = 0;
    tmp[u++] = 0x10;
    u = this.fn(tmp, u, f.poll);
    tmp[u++] = 0x24;
    u = uleb(tmp, u, f.fuel);
    tmp[u++] = 0x0b;
    const fuelEnd = cut(u);
    u = 0;
    for (const r of f.argumentRegisters) u = this.get(tmp, u, r);
    const args = cut(u);
    const p = f.pairLocal;
    u = 0;
    tmp[u++] = 0x21;
    u = uleb(tmp, u, p + 1);
    tmp[u++] = 0x21;
    u = uleb(tmp, u, p);
    tmp[u++] = 0x20;
    u = uleb(tmp, u, p);
    u = this.set(tmp, u, 10, false);
    tmp[u++] = 0x20;
    u = uleb(tmp, u, p + 1);
    u = this.set(tmp, u, 11, false);
    const takeResults = cut(u);
    // (fn() above cleared `pure` for a reference: the writer's first run starts pure again)
    this.pure = true;
    return { checkMid, checkEndEa, checkEndTrackEa, fuelHead, fuelMid, fuelEnd, args, takeResults, impure };
  }

  /** Copy segment `s` to buf[u]; returns the next index. */
  private put(buf: Int32Array, u: number, s: Int32Array): number {
    buf.set(s, u);
    if (this.seg.impure) this.pure = false;
    return u + s.length;
  }

  /** Begin a template: opens a run if none is open, with room for `n` values (one template). */
  private begin(n = MAX_VALUES): Int32Array {
    if (this.from < 0) {
      this.from = this.bm.rawStart();
      this.u = this.from;
      // the module may have grown its buffer since the last run
      this.buf = this.bm.rawBuffer(n);
      this.cap = this.buf.length;
    } else if (this.u + n > this.cap) {
      this.bm.rawCommit(this.u);
      this.buf = this.bm.rawBuffer(n);
      this.cap = this.buf.length;
    }
    return this.buf;
  }

  /** The value index the next value will be written at (in the open run, or the next one's start). */
  position(): number {
    return this.from < 0 ? this.bm.rawStart() : this.u;
  }

  // ---- primitives (each opens a run if none is open) ----
  /** One byte (an opcode or an immediate below 128). */
  op(b: number): void {
    const buf = this.begin(8);
    buf[this.u++] = b;
  }
  /** Two bytes. */
  op2(a: number, b: number): void {
    const buf = this.begin(8);
    buf[this.u++] = a;
    buf[this.u++] = b;
  }
  /** Bytes. */
  raw(bytes: readonly number[]): void {
    const n = bytes.length;
    const buf = this.begin(n);
    let u = this.u;
    for (let i = 0; i < n; i++) buf[u++] = bytes[i];
    this.u = u;
  }
  /** `opcode` with an unsigned LEB128 immediate (br, br_if, local.get/set/tee, global.get/set). */
  withIndex(opcode: number, index: number): void {
    const buf = this.begin(8);
    buf[this.u] = opcode;
    this.u = uleb(buf, this.u + 1, index);
  }
  /** An unsigned LEB128 immediate (a br_table entry). */
  index(v: number): void {
    const buf = this.begin(8);
    this.u = uleb(buf, this.u, v);
  }
  /** i32.const v (wrapped to 32 bits) */
  i32(v: number): void {
    const buf = this.begin(8);
    buf[this.u] = 0x41;
    this.u = sleb(buf, this.u + 1, v | 0);
  }
  /** i64.const v (a safe integer) */
  i64(v: number): void {
    const buf = this.begin(12);
    buf[this.u] = 0x42;
    this.u = sleb(buf, this.u + 1, v);
  }
  /** Push register r. */
  getReg(r: number): void {
    const buf = this.begin(8);
    this.u = this.get(buf, this.u, r);
  }
  /** Pop into register r (with sp's dirty mark, as emit.ts set without spGrows). */
  setReg(r: number): void {
    const buf = this.begin(64);
    this.u = this.set(buf, this.u, r, false);
  }
  /** `call` (0x10) or `return_call` (0x12) of the function reference `fn`. */
  call(opcode: number, fn: number): void {
    const buf = this.begin(8);
    buf[this.u] = opcode;
    this.u = this.fn(buf, this.u + 1, fn);
  }

  /** trap(kind, pc, value) then unreachable (gen.ts trap with an i64 constant value). */
  trap(kind: number, pc: number, value: number): void {
    const buf = this.begin(40);
    let u = this.u;
    buf[u++] = 0x41;
    u = sleb(buf, u, kind);
    buf[u++] = 0x41;
    u = sleb(buf, u, pc | 0);
    buf[u++] = 0x42;
    u = sleb(buf, u, value);
    buf[u++] = 0x10;
    u = this.fn(buf, u, this.f.trap);
    buf[u++] = 0x00;
    this.u = u;
  }

  /** Charge `cost` of fuel at `pc`; poll when the slice ran out (emit.ts chargeFuel, constants). */
  fuel(cost: number, pc: number): void {
    const seg = this.seg;
    const buf = this.begin(40);
    // global.get fuel; i32.const cost; i32.sub; local.tee F; global.set fuel;
    // if (local.get F <s 0) global.set fuel (poll(pc))
    let u = this.put(buf, this.u, seg.fuelHead);
    u = sleb(buf, u, cost | 0);
    u = this.put(buf, u, seg.fuelMid);
    u = sleb(buf, u, pc | 0);
    this.u = this.put(buf, u, seg.fuelEnd);
  }

  /** Push every argument register (a call through the dispatcher, or with no argument facts). */
  args(): void {
    const a = this.seg.args;
    this.u = this.put(this.begin(a.length), this.u, a);
  }

  /** A call's (i64, i64) results into the pair local, then into a0 and a1 (emit.ts takeResults). */
  takeResults(): void {
    // local.set P+1; local.set P; local.get P -> a0; local.get P+1 -> a1
    const t = this.seg.takeResults;
    this.u = this.put(this.begin(t.length), this.u, t);
  }

  /** `local = (rs1 + imm) & ~1` (a jalr's target). */
  jalrTarget(local: number, rs1: number, imm: number): void {
    const buf = this.begin(32);
    let u = this.get(buf, this.u, rs1);
    buf[u++] = 0x42;
    u = sleb(buf, u, imm);
    buf[u++] = 0x7c; // i64.add
    buf[u++] = 0x42;
    buf[u++] = 0x7e; // -2
    buf[u++] = 0x83; // i64.and
    buf[u++] = 0x21;
    this.u = uleb(buf, u, local);
  }

  /** Push rs1 and rs2 and compare them with the i64 comparison `opcode`. */
  compare(opcode: number, rs1: number, rs2: number): void {
    const buf = this.begin(16);
    let u = this.get(buf, this.u, rs1);
    u = this.get(buf, u, rs2);
    buf[u++] = opcode;
    this.u = u;
  }

  /**
   * End the open run.
   * @returns its node (type none), or null when no run is open
   */
  close(): Ref | null {
    if (this.from < 0) return null;
    this.bm.rawCommit(this.u);
    const r = this.bm.rawClose(this.from, this.pure);
    this.from = -1;
    this.pure = true;
    return r;
  }

  /** A function index (>= 0: its LEB128 bytes) or reference (< 0: the run is no longer pure). */
  private fn(buf: Int32Array, u: number, v: number): number {
    if (v >= 0) return uleb(buf, u, v);
    this.pure = false;
    buf[u] = v;
    return u + 1;
  }

  /** Read register r (emit.ts get). */
  private get(buf: Int32Array, u: number, r: number): number {
    if (r === 0) {
      buf[u] = 0x42;
      buf[u + 1] = 0;
      return u + 2;
    }
    const l = this.regLocal[r];
    if (l === null) {
      buf[u++] = 0x23;
      return uleb(buf, u, r === 3 ? this.f.gp : this.f.tp);
    }
    buf[u] = 0x20;
    return uleb(buf, u + 1, l);
  }

  /** Write the value on the stack to register r (emit.ts set, with its sp mark). */
  private set(buf: Int32Array, u: number, r: number, spGrows: boolean): number {
    if (r === 0) {
      buf[u] = 0x1a;
      return u + 1;
    }
    const l = this.regLocal[r];
    if (l === null) {
      buf[u++] = 0x24;
      return uleb(buf, u, r === 3 ? this.f.gp : this.f.tp);
    }
    buf[u++] = 0x21;
    u = uleb(buf, u, l);
    if (r !== 2 || spGrows) return u;
    // if (sp - base <s extend_u(dirty_lo)) dirty_lo = select(wrap(sp - base), 0, sp - base >=s 0)
    const f = this.f;
    u = this.spOffset(buf, u, l);
    buf[u++] = 0x23;
    u = uleb(buf, u, f.dirtyLo);
    buf[u++] = 0xad; // i64.extend_i32_u
    buf[u++] = 0x53; // i64.lt_s
    buf[u++] = 0x04; // if
    buf[u++] = 0x40;
    u = this.spOffset(buf, u, l);
    buf[u++] = 0xa7; // i32.wrap_i64
    buf[u++] = 0x41;
    buf[u++] = 0;
    u = this.spOffset(buf, u, l);
    buf[u++] = 0x42;
    buf[u++] = 0;
    buf[u++] = 0x59; // i64.ge_s
    buf[u++] = 0x1b; // select
    buf[u++] = 0x24;
    u = uleb(buf, u, f.dirtyLo);
    buf[u++] = 0x0b;
    return u;
  }
  /** sp - base (i64) */
  private spOffset(buf: Int32Array, u: number, spLocal: number): number {
    buf[u++] = 0x20;
    u = uleb(buf, u, spLocal);
    buf[u++] = 0x42;
    u = sleb(buf, u, this.f.base);
    buf[u++] = 0x7d; // i64.sub
    return u;
  }

  /** rd = value (lui, auipc: the value is computed at translation time) */
  upper(rd: number, value: number): void {
    const buf = this.begin();
    let u = this.u;
    buf[u++] = 0x42;
    u = sleb(buf, u, value);
    this.u = this.set(buf, u, rd, false);
  }

  /** rd = rs1 op imm, i64 `opcode` (emit.ts 'reg-imm' and 'shift-imm' with the masked amount) */
  regImm(opcode: number, rd: number, rs1: number, imm: number, spGrows: boolean): void {
    const buf = this.begin();
    let u = this.get(buf, this.u, rs1);
    buf[u++] = 0x42;
    u = sleb(buf, u, imm);
    buf[u++] = opcode;
    this.u = this.set(buf, u, rd, spGrows);
  }

  /** rd = rs1 op rs2, i64 `opcode` */
  regReg(opcode: number, rd: number, rs1: number, rs2: number): void {
    const buf = this.begin();
    let u = this.get(buf, this.u, rs1);
    u = this.get(buf, u, rs2);
    buf[u++] = opcode;
    this.u = this.set(buf, u, rd, false);
  }

  /** rd = extend_u(rs1 cmp (imm or rs2)), i64 comparison `opcode` (rs2 < 0: the immediate) */
  setLess(opcode: number, rd: number, rs1: number, rs2: number, imm: number): void {
    const buf = this.begin();
    let u = this.get(buf, this.u, rs1);
    if (rs2 < 0) {
      buf[u++] = 0x42;
      u = sleb(buf, u, imm);
    } else u = this.get(buf, u, rs2);
    buf[u++] = opcode;
    buf[u++] = 0xad; // i64.extend_i32_u
    this.u = this.set(buf, u, rd, false);
  }

  /** rd = extend_s(wrap(rs1) op imm), i32 `opcode` (the caller masks shift amounts) */
  wordImm(opcode: number, rd: number, rs1: number, imm: number): void {
    const buf = this.begin();
    let u = this.get(buf, this.u, rs1);
    buf[u++] = 0xa7;
    buf[u++] = 0x41;
    u = sleb(buf, u, imm | 0);
    buf[u++] = opcode;
    buf[u++] = 0xac; // i64.extend_i32_s
    this.u = this.set(buf, u, rd, false);
  }

  /** rd = extend_s(wrap(rs1) op wrap(rs2)), i32 `opcode` */
  wordReg(opcode: number, rd: number, rs1: number, rs2: number): void {
    const buf = this.begin();
    let u = this.get(buf, this.u, rs1);
    buf[u++] = 0xa7;
    u = this.get(buf, u, rs2);
    buf[u++] = 0xa7;
    buf[u++] = opcode;
    buf[u++] = 0xac;
    this.u = this.set(buf, u, rd, false);
  }

  /**
   * L_E = rs1 + imm - base; trap MemoryFault at pc unless width bytes at L_E lie inside memory
   * (emit.ts address, unchecked forms excluded: the baseline tier has no frame facts). Written up to
   * the trap's pc: the caller continues with Segments.checkEndEa or checkEndTrackEa.
   */
  private address(buf: Int32Array, u: number, rs1: number, imm: number, width: number, pc: number): number {
    // L_E = rs1 + (imm - base); if (L_E >u size - width) { trap(MemoryFault, pc, L_E + base);
    // unreachable } up to the pc (Segments.checkMid, then checkEnd* after it)
    u = this.get(buf, u, rs1);
    buf[u++] = 0x42;
    u = sleb(buf, u, imm - this.base);
    u = this.put(buf, u, this.seg.checkMid[width]);
    return sleb(buf, u, pc | 0);
  }

  /**
   * Trap StackOverflow at `pc` unless stack limit <= sp <= limit + span (emit.ts blockCode's entry
   * check: one unsigned compare of sp - limit against span).
   */
  stackCheck(kind: number, pc: number, limit: number, span: number): void {
    const buf = this.begin(64);
    let u = this.get(buf, this.u, 2);
    buf[u++] = 0x42;
    u = sleb(buf, u, limit);
    buf[u++] = 0x7d; // i64.sub
    buf[u++] = 0x42;
    u = sleb(buf, u, span);
    buf[u++] = 0x56; // i64.gt_u
    buf[u++] = 0x04;
    buf[u++] = 0x40;
    buf[u++] = 0x41;
    u = sleb(buf, u, kind);
    buf[u++] = 0x41;
    u = sleb(buf, u, pc | 0);
    u = this.get(buf, u, 2);
    buf[u++] = 0x10;
    u = this.fn(buf, u, this.f.trap);
    buf[u++] = 0x00;
    buf[u++] = 0x0b;
    this.u = u;
  }
  /** i32.wrap(L_E) */
  private ea(buf: Int32Array, u: number): number {
    buf[u++] = 0x20;
    u = uleb(buf, u, this.f.addressLocal);
    buf[u++] = 0xa7;
    return u;
  }

  /** rd = the load `opcode` (i64.load*, alignment hint 1, offset 0) at rs1 + imm */
  load(opcode: number, width: number, rd: number, rs1: number, imm: number, pc: number): void {
    const buf = this.begin();
    let u = this.address(buf, this.u, rs1, imm, width, pc);
    u = this.put(buf, u, this.seg.checkEndEa); // the trap arm's end, i32.wrap(L_E)
    buf[u++] = opcode;
    buf[u++] = 0;
    buf[u++] = 0;
    this.u = this.set(buf, u, rd, false);
  }

  /** The store `opcode` of rs2 at rs1 + imm, tracked unless it is at sp plus imm >= 0 (emit.ts). */
  store(opcode: number, width: number, rs1: number, rs2: number, imm: number, pc: number): void {
    const buf = this.begin();
    let u = this.address(buf, this.u, rs1, imm, width, pc);
    // the trap arm's end, then track(width) unless sp-relative at imm >= 0, then i32.wrap(L_E)
    const seg = this.seg;
    u = this.put(buf, u, rs1 === 2 && imm >= 0 ? seg.checkEndEa : seg.checkEndTrackEa[width]);
    u = this.get(buf, u, rs2);
    buf[u++] = opcode;
    buf[u++] = 0;
    buf[u++] = 0;
    this.u = u;
  }

  /** emit.ts track: widen the dirty extent on L_E's side of the split. */
  private track(buf: Int32Array, u: number, width: number): number {
    const f = this.f;
    u = this.ea(buf, u);
    buf[u++] = 0x41;
    u = sleb(buf, u, f.dirtySplit | 0);
    buf[u++] = 0x4f; // i32.ge_u
    buf[u++] = 0x04;
    buf[u++] = 0x40;
    u = this.ea(buf, u);
    buf[u++] = 0x23;
    u = uleb(buf, u, f.dirtyLo);
    buf[u++] = 0x49; // i32.lt_u
    buf[u++] = 0x04;
    buf[u++] = 0x40;
    u = this.ea(buf, u);
    buf[u++] = 0x24;
    u = uleb(buf, u, f.dirtyLo);
    buf[u++] = 0x0b;
    buf[u++] = 0x05; // else
    u = this.ea(buf, u);
    buf[u++] = 0x41;
    buf[u++] = width;
    buf[u++] = 0x6a; // i32.add
    buf[u++] = 0x23;
    u = uleb(buf, u, f.dirtyHi);
    buf[u++] = 0x4b; // i32.gt_u
    buf[u++] = 0x04;
    buf[u++] = 0x40;
    u = this.ea(buf, u);
    buf[u++] = 0x41;
    buf[u++] = width;
    buf[u++] = 0x6a;
    buf[u++] = 0x24;
    u = uleb(buf, u, f.dirtyHi);
    buf[u++] = 0x0b;
    buf[u++] = 0x0b;
    return u;
  }
}

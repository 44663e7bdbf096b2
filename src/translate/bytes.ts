/**
 * A Wasm binary writer with Binaryen's expression API ({@link ExprBuilder}): the baseline tier
 * builds the same expressions as the optimising tier and gets Wasm bytes in one pass, without
 * loading Binaryen (whose import alone takes ~0.5 s). Encodings follow the WebAssembly core
 * specification 2.0 (binary format, chapter 5) plus the tail-call proposal (`return_call` 0x12)
 * and multi-value block types.
 *
 * Expressions are numbers indexing a node table; a node is a byte sequence in which values >= 256
 * stand for child nodes (`256 + ref`) and negative values for the LEB128 index of a function named
 * in `fnNames` (`-1 - k`), resolved when the module is written (calls may precede the callee).
 * The format's primitives (type codes, opcodes, LEB128, names) are in wasm-encoding.ts.
 */
import { uleb } from '../util/leb.js';
import { writeModule } from './wasm-sections.js';
import {
  Bytes,
  localDeclarations,
  Op,
  sleb32,
  sleb64,
  T_F64,
  T_I32,
  T_I64,
  T_NONE,
  T_UNREACHABLE,
  TUPLE_BASE,
  type Sink,
} from './wasm-encoding.js';
import type { ExprBuilder, Ref, Ty, Types } from './builder.js';

export { Op };

interface FuncDef {
  name: string;
  type: number;
  /** the encoded local declarations (spec 5.5.13: run-length `n:u32 t:valtype` pairs), shared */
  locals: Uint8Array;
  body: Ref;
}

/** The Wasm module being built; `emitBinary()` writes it. */
export class ByteModule implements ExprBuilder {
  /** node k: its sequence is buf[start[k] .. start[k] + len[k]), its result type type[k] */
  private buf: Int32Array;
  private used = 0;
  private start: Int32Array;
  private len: Int32Array;
  private type: Int32Array;
  /** 1 for a raw node of bytes only (no children, no function references): copied in one go */
  private pure: Uint8Array;
  private count = 0;

  /**
   * @param codeBytes bytes of guest code to be translated, if known: the tables start at the size
   *   that much code needs, instead of growing to it by repeated doubling and copying. With the
   *   baseline tier's raw runs (direct.ts) that is under one node and about 6-15 values (Wasm
   *   bytes) per byte of RISC-V code (measured on the fixtures: 0.17-0.91 nodes, 6.5-14 values).
   */
  constructor(codeBytes = 0) {
    // one guest function's module (the lazy tier, codeBytes small but known) starts small too
    const least = codeBytes > 0 && codeBytes < 1 << 12 ? 1 << 8 : 1 << 12;
    const nodes = Math.max(least, Math.min(1 << 24, Math.ceil(codeBytes)));
    this.start = new Int32Array(nodes);
    this.len = new Int32Array(nodes);
    this.type = new Int32Array(nodes);
    this.pure = new Uint8Array(nodes);
    this.buf = new Int32Array(Math.max(least * 4, Math.min(1 << 26, codeBytes * 16)));
  }
  /** node -> the tuple local a tuple-typed local.get reads */
  private readonly tupleLocals = new Map<number, number>();
  private readonly tuples: number[][] = [];
  private readonly funcTypes: string[] = [];
  private readonly funcTypeSigs: [number[], number[]][] = [];
  private readonly fnIndex = new Map<string, number>();
  private readonly fnNames: string[] = [];
  private readonly fnNameRef = new Map<string, number>();
  private readonly imports: { module: string; base: string; type: number; name: string }[] = [];
  private memoryImport: { module: string; base: string } | null = null;
  private memoryPages: [number, number] = [0, 0];
  /** whether the imported memory is shared (limits flag 3 instead of 1; threads proposal, 4.4), set by setMemory */
  sharedMemory = false;
  private readonly globals: { name: string; t: number; mutable: boolean; init: Ref }[] = [];
  private readonly globalIndex = new Map<string, number>();
  private readonly defs: FuncDef[] = [];
  private readonly exports: { name: string; kind: number; internal: string }[] = [];
  /**
   * Guest pcs whose code begins at a value index ({@link markPc}), when a listing was asked for
   * ({@link recordPcs}); null on the normal compile path, which then pays nothing for it.
   */
  private pcMarks: Map<number, number[]> | null = null;
  /**
   * After {@link emitBinary}, with {@link recordPcs}: per defined function name, `[pc, offset]`
   * pairs in code order, the offset in bytes from the start of the function's instructions (after
   * its local declarations) to the first byte of that guest instruction's code.
   */
  pcOffsets: Map<string, [number, number][]> | null = null;

  /** The types of this builder. */
  readonly types: Types = {
    none: T_NONE,
    i32: T_I32,
    i64: T_I64,
    f64: T_F64,
    tuple: (ts: Ty[]) => {
      if (ts.length === 0) return T_NONE;
      if (ts.length === 1) return ts[0];
      const key = ts.join(',');
      let k = this.tuples.findIndex((x) => x.join(',') === key);
      if (k < 0) k = this.tuples.push([...ts]) - 1;
      return TUPLE_BASE + k;
    },
  };

  private grow(): void {
    const k = this.start.length * 2;
    for (const f of ['start', 'len', 'type'] as const) {
      const a = new Int32Array(k);
      a.set(this[f]);
      this[f] = a;
    }
    const p = new Uint8Array(k);
    p.set(this.pure);
    this.pure = p;
  }
  private reserve(n: number): void {
    if (this.used + n <= this.buf.length) return;
    const b = new Int32Array(Math.max(this.buf.length * 2, this.used + n));
    b.set(this.buf.subarray(0, this.used));
    this.buf = b;
  }
  /** Close the node whose sequence began at `from`. */
  private close(t: number, from: number): Ref {
    if (this.count === this.start.length) this.grow();
    const k = this.count++;
    this.start[k] = from;
    this.len[k] = this.used - from;
    this.type[k] = t;
    return k;
  }
  /** Append one value to the node being built (the Sink that uleb/sleb write to). */
  push(v: number): void {
    if (this.used === this.buf.length) this.reserve(1);
    this.buf[this.used++] = v;
  }
  private typeOf(r: Ref): number {
    return this.type[r];
  }
  /** A node of `t` from children and raw bytes, in order. */
  seq(t: number, parts: readonly (Ref | readonly number[])[]): Ref {
    const from = this.used;
    for (const p of parts) {
      if (typeof p === 'number') this.push(256 + p);
      else {
        this.reserve(p.length);
        for (let i = 0; i < p.length; i++) this.buf[this.used++] = p[i];
      }
    }
    return this.close(t, from);
  }
  private op(t: number, kids: readonly Ref[], ...bytes: number[]): Ref {
    const from = this.used;
    this.reserve(kids.length + bytes.length);
    for (let i = 0; i < kids.length; i++) this.buf[this.used++] = 256 + kids[i];
    for (let i = 0; i < bytes.length; i++) this.buf[this.used++] = bytes[i];
    return this.close(t, from);
  }
  private op1(t: number, a: Ref, byte: number): Ref {
    const from = this.used;
    this.reserve(2);
    this.buf[this.used++] = 256 + a;
    this.buf[this.used++] = byte;
    return this.close(t, from);
  }
  private op2(t: number, a: Ref, b: Ref, byte: number): Ref {
    const from = this.used;
    this.reserve(3);
    this.buf[this.used++] = 256 + a;
    this.buf[this.used++] = 256 + b;
    this.buf[this.used++] = byte;
    return this.close(t, from);
  }
  private fnRef(name: string): number {
    let k = this.fnNameRef.get(name);
    if (k === undefined) {
      k = this.fnNames.push(name) - 1;
      this.fnNameRef.set(name, k);
    }
    return -1 - k;
  }
  private valTypes(t: number): number[] {
    if (t === T_NONE) return [];
    if (t >= TUPLE_BASE) return this.tuples[t - TUPLE_BASE];
    return [t];
  }
  private sigIndex(params: number[], results: number[]): number {
    const key = `${params.join(',')}>${results.join(',')}`;
    let k = this.funcTypes.indexOf(key);
    if (k < 0) {
      k = this.funcTypes.push(key) - 1;
      this.funcTypeSigs.push([params, results]);
    }
    return k;
  }

  // ---- pc marks (the opt-in listing of which Wasm code each guest instruction became) ----
  /** Record guest pcs from now on ({@link markPc}); {@link emitBinary} then fills {@link pcOffsets}. */
  recordPcs(): void {
    this.pcMarks = new Map();
  }
  /** Whether pcs are being recorded ({@link recordPcs}). */
  get recordingPcs(): boolean {
    return this.pcMarks !== null;
  }
  /**
   * Note that the code of the guest instruction at `pc` begins at value index `at` (a raw run's
   * position, {@link rawStart}, or {@link nodeStart} of a node). No-op unless recording.
   */
  markPc(at: number, pc: number): void {
    const marks = this.pcMarks;
    if (marks === null) return;
    const list = marks.get(at);
    if (list === undefined) marks.set(at, [pc]);
    else list.push(pc);
  }
  /** Move the marks of value index `from` to `to` (the code was built as a node after all). */
  movePcMarks(from: number, to: number): void {
    const marks = this.pcMarks;
    const list = marks?.get(from);
    if (marks === null || marks === undefined || list === undefined || from === to) return;
    marks.delete(from);
    for (const pc of list) this.markPc(to, pc);
  }
  /** The value index where node `r`'s own sequence begins (the first value written for it). */
  nodeStart(r: Ref): number {
    return this.start[r];
  }

  // ---- raw nodes (direct.ts writes instruction templates straight into the value buffer) ----
  /** Where the next node's values begin (the start of a raw node). */
  rawStart(): number {
    return this.used;
  }
  /**
   * The value buffer, with room for `n` more values after the last committed one; valid until the
   * next call that may grow it. Values are bytes (0..255) or function references
   * ({@link functionValue}); a raw node has no children.
   */
  rawBuffer(n: number): Int32Array {
    this.reserve(n);
    return this.buf;
  }
  /** Mark the values written into {@link rawBuffer} up to index `end` (exclusive) as used. */
  rawCommit(end: number): void {
    this.used = end;
  }
  /**
   * Close the raw node that began at `from` ({@link rawStart}), of type none; `pure` when its
   * values are all bytes (no function reference).
   */
  rawClose(from: number, pure: boolean): Ref {
    const r = this.close(T_NONE, from);
    if (pure) this.pure[r] = 1;
    return r;
  }
  /**
   * The function index of `name` when it is final already: an import's (imports precede every
   * defined function), or one fixed by {@link declareFunctions}; else a reference (negative) that
   * stands for it in a node, resolved when the module is written.
   */
  functionValue(name: string): number {
    return this.fnIndex.get(name) ?? this.declared.get(name) ?? this.fnRef(name);
  }
  /** signature index by (params, results) type handles, as addFunction looks them up */
  private readonly sigOf = new Map<number, number>();
  /** indices fixed before their functions are added (declareFunctions) */
  private readonly declared = new Map<string, number>();
  /**
   * Fix the indices of the functions to be added next, in this order, so that calls to them can be
   * written as final bytes before they exist. `addFunction` then checks that each gets its index.
   */
  declareFunctions(names: readonly string[]): void {
    let k = this.imports.length + this.defs.length;
    for (const n of names) this.declared.set(n, k++);
  }
  /**
   * The index of global `name`.
   * @throws Error for a global not added yet
   */
  globalIndexOf(name: string): number {
    return this.globalIdx(name);
  }

  // ---- expressions (Binaryen's argument order and typing rules) ----
  /**
   * Nothing branches to an unnamed block, so its children are simply concatenated: the stack
   * effect is the same, and a block that ends unreachably keeps the stack polymorphic after it.
   */
  block = (_label: string | null, children: readonly Ref[], resultType?: Ty): Ref => {
    const n = children.length;
    let t = resultType;
    if (t === undefined) {
      t = T_NONE;
      if (n > 0) {
        const last = this.type[children[n - 1]];
        if (last !== T_NONE) t = last;
        if (last === T_NONE) {
          for (let i = 0; i < n - 1; i++) {
            if (this.type[children[i]] === T_UNREACHABLE) {
              t = T_UNREACHABLE;
              break;
            }
          }
        }
      }
    }
    const from = this.used;
    this.reserve(n);
    const buf = this.buf;
    for (let i = 0; i < n; i++) buf[this.used++] = 256 + children[i];
    return this.close(t, from);
  };
  if = (condition: Ref, ifTrue: Ref, ifFalse?: Ref): Ref => {
    const a = this.typeOf(ifTrue);
    const b = ifFalse === undefined ? T_NONE : this.typeOf(ifFalse);
    let t = T_NONE;
    if (ifFalse !== undefined) {
      if (a === T_UNREACHABLE && b === T_UNREACHABLE) t = T_UNREACHABLE;
      else if (a !== T_UNREACHABLE && a !== T_NONE) t = a;
      else if (b !== T_UNREACHABLE && b !== T_NONE) t = b;
    }
    const from = this.used;
    this.reserve(10);
    this.buf[this.used++] = 256 + condition;
    this.buf[this.used++] = Op.if;
    if (t === T_UNREACHABLE || t === T_NONE) this.buf[this.used++] = T_NONE;
    else if (t === T_I32 || t === T_I64 || t === T_F64) this.buf[this.used++] = t;
    else sleb32(this, this.sigIndex([], this.tuples[t - TUPLE_BASE]));
    this.buf[this.used++] = 256 + ifTrue;
    if (ifFalse !== undefined) {
      this.buf[this.used++] = Op.else;
      this.buf[this.used++] = 256 + ifFalse;
    }
    this.buf[this.used++] = Op.end;
    return this.close(t, from);
  };
  call = (name: string, operands: readonly Ref[], returnType: Ty): Ref =>
    this.callOp(returnType, operands, Op.call, this.fnRef(name));
  return_call = (name: string, operands: readonly Ref[], _returnType: Ty): Ref =>
    this.callOp(T_UNREACHABLE, operands, Op.return_call, this.fnRef(name));
  select = (condition: Ref, ifTrue: Ref, ifFalse: Ref): Ref => {
    const from = this.used;
    this.reserve(4);
    this.buf[this.used++] = 256 + ifTrue;
    this.buf[this.used++] = 256 + ifFalse;
    this.buf[this.used++] = 256 + condition;
    this.buf[this.used++] = Op.select;
    return this.close(this.typeOf(ifTrue), from);
  };
  drop = (value: Ref): Ref => this.op1(T_NONE, value, Op.drop);
  return = (value?: Ref): Ref => {
    if (value !== undefined) return this.op1(T_UNREACHABLE, value, Op.return);
    const from = this.used;
    this.push(Op.return);
    return this.close(T_UNREACHABLE, from);
  };
  nop = (): Ref => this.close(T_NONE, this.used);
  unreachable = (): Ref => {
    const from = this.used;
    this.push(Op.unreachable);
    return this.close(T_UNREACHABLE, from);
  };
  /** `operands`, then `opcode` and the callee's reference (see fnRef), without temporary arrays. */
  private callOp(t: number, operands: readonly Ref[], opcode: number, fn: number): Ref {
    const from = this.used;
    const n = operands.length;
    this.reserve(n + 2);
    const buf = this.buf;
    for (let i = 0; i < n; i++) buf[this.used++] = 256 + operands[i];
    buf[this.used++] = opcode;
    buf[this.used++] = fn;
    return this.close(t, from);
  }

  readonly local = {
    get: (index: number, type: Ty): Ref => {
      if (type >= TUPLE_BASE) {
        const r = this.close(type, this.used);
        this.tupleLocals.set(r, index);
        return r;
      }
      const from = this.used;
      this.push(Op.local_get);
      uleb(this, index);
      return this.close(type, from);
    },
    set: (index: number, value: Ref): Ref => {
      const t = this.typeOf(value);
      const from = this.used;
      this.push(256 + value);
      // a tuple local is expanded into consecutive locals: pop them last to first
      const n = t >= TUPLE_BASE ? this.tuples[t - TUPLE_BASE].length : 1;
      for (let k = n - 1; k >= 0; k--) {
        this.push(Op.local_set);
        uleb(this, index + k);
      }
      return this.close(T_NONE, from);
    },
    tee: (index: number, value: Ref, type: Ty): Ref => {
      const from = this.used;
      this.push(256 + value);
      this.push(Op.local_tee);
      uleb(this, index);
      return this.close(type, from);
    },
  };
  readonly global = {
    get: (name: string, type: Ty): Ref => {
      const from = this.used;
      this.push(Op.global_get);
      uleb(this, this.globalIdx(name));
      return this.close(type, from);
    },
    set: (name: string, value: Ref): Ref => {
      const from = this.used;
      this.push(256 + value);
      this.push(Op.global_set);
      uleb(this, this.globalIdx(name));
      return this.close(T_NONE, from);
    },
  };
  private globalIdx(name: string): number {
    const k = this.globalIndex.get(name);
    if (k === undefined) throw new Error(`ByteModule: unknown global ${name}`);
    return k;
  }
  readonly tuple = {
    make: (elements: readonly Ref[]): Ref =>
      this.op(this.types.tuple(elements.map((e) => this.typeOf(e))), elements),
    extract: (tuple: Ref, index: number): Ref => {
      const local = this.tupleLocals.get(tuple);
      if (local === undefined) throw new Error('ByteModule: tuple.extract reads tuple locals only');
      const from = this.used;
      this.push(Op.local_get);
      uleb(this, local + index);
      return this.close(this.tuples[this.type[tuple] - TUPLE_BASE][index], from);
    },
  };

  readonly i32 = {
    const: (v: number): Ref => {
      const from = this.used;
      this.push(Op.i32_const);
      sleb32(this, v);
      return this.close(T_I32, from);
    },
    wrap: (v: Ref) => this.op1(T_I32, v, 0xa7),
    add: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x6a),
    sub: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x6b),
    mul: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x6c),
    div_s: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x6d),
    div_u: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x6e),
    rem_s: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x6f),
    rem_u: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x70),
    and: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x71),
    or: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x72),
    xor: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x73),
    shl: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x74),
    shr_s: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x75),
    shr_u: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x76),
    eqz: (a: Ref) => this.op1(T_I32, a, 0x45),
    eq: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x46),
    lt_s: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x48),
    lt_u: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x49),
    gt_u: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x4b),
    ge_u: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x4f),
  };
  private mem(t: number, kids: Ref[], opcode: number, align: number, offset: number): Ref {
    const from = this.used;
    for (const k of kids) this.push(256 + k);
    this.push(opcode);
    uleb(this, 31 - Math.clz32(align));
    uleb(this, offset);
    return this.close(t, from);
  }
  readonly i64 = {
    const: (v: bigint): Ref => {
      const from = this.used;
      this.push(Op.i64_const);
      sleb64(this, v);
      return this.close(T_I64, from);
    },
    extend_s: (v: Ref) => this.op1(T_I64, v, 0xac),
    extend_u: (v: Ref) => this.op1(T_I64, v, 0xad),
    add: (a: Ref, b: Ref) => this.op2(T_I64, a, b, 0x7c),
    sub: (a: Ref, b: Ref) => this.op2(T_I64, a, b, 0x7d),
    mul: (a: Ref, b: Ref) => this.op2(T_I64, a, b, 0x7e),
    div_s: (a: Ref, b: Ref) => this.op2(T_I64, a, b, 0x7f),
    div_u: (a: Ref, b: Ref) => this.op2(T_I64, a, b, 0x80),
    rem_s: (a: Ref, b: Ref) => this.op2(T_I64, a, b, 0x81),
    rem_u: (a: Ref, b: Ref) => this.op2(T_I64, a, b, 0x82),
    and: (a: Ref, b: Ref) => this.op2(T_I64, a, b, 0x83),
    or: (a: Ref, b: Ref) => this.op2(T_I64, a, b, 0x84),
    xor: (a: Ref, b: Ref) => this.op2(T_I64, a, b, 0x85),
    shl: (a: Ref, b: Ref) => this.op2(T_I64, a, b, 0x86),
    shr_s: (a: Ref, b: Ref) => this.op2(T_I64, a, b, 0x87),
    shr_u: (a: Ref, b: Ref) => this.op2(T_I64, a, b, 0x88),
    eqz: (a: Ref) => this.op1(T_I32, a, 0x50),
    eq: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x51),
    ne: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x52),
    lt_s: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x53),
    lt_u: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x54),
    gt_u: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x56),
    le_u: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x58),
    ge_s: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x59),
    ge_u: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x5a),
    load: (offset: number, align: number, ptr: Ref) => this.mem(T_I64, [ptr], 0x29, align, offset),
    load8_s: (offset: number, align: number, ptr: Ref) => this.mem(T_I64, [ptr], 0x30, align, offset),
    load8_u: (offset: number, align: number, ptr: Ref) => this.mem(T_I64, [ptr], 0x31, align, offset),
    load16_s: (offset: number, align: number, ptr: Ref) => this.mem(T_I64, [ptr], 0x32, align, offset),
    load16_u: (offset: number, align: number, ptr: Ref) => this.mem(T_I64, [ptr], 0x33, align, offset),
    load32_s: (offset: number, align: number, ptr: Ref) => this.mem(T_I64, [ptr], 0x34, align, offset),
    load32_u: (offset: number, align: number, ptr: Ref) => this.mem(T_I64, [ptr], 0x35, align, offset),
    store: (offset: number, align: number, ptr: Ref, value: Ref) =>
      this.mem(T_NONE, [ptr, value], 0x37, align, offset),
    store8: (offset: number, align: number, ptr: Ref, value: Ref) =>
      this.mem(T_NONE, [ptr, value], 0x3c, align, offset),
    store16: (offset: number, align: number, ptr: Ref, value: Ref) =>
      this.mem(T_NONE, [ptr, value], 0x3d, align, offset),
    store32: (offset: number, align: number, ptr: Ref, value: Ref) =>
      this.mem(T_NONE, [ptr, value], 0x3e, align, offset),
    /** i64.trunc_sat_f32_s / i64.trunc_sat_f64_s (0xfc 4 / 0xfc 6, non-trapping conversions) */
    trunc_s_sat: {
      f32: (v: Ref) => this.op(T_I64, [v], 0xfc, 4),
      f64: (v: Ref) => this.op(T_I64, [v], 0xfc, 6),
    },
  };
  readonly f64 = {
    ne: (a: Ref, b: Ref) => this.op2(T_I32, a, b, 0x62),
  };

  // ---- module-level declarations ----
  addFunctionImport(name: string, module: string, base: string, params: Ty, results: Ty): void {
    if (this.defs.length > 0) throw new Error('ByteModule: imports must precede functions');
    this.fnIndex.set(name, this.imports.length);
    this.imports.push({
      module,
      base,
      name,
      type: this.sigIndex(this.valTypes(params), this.valTypes(results)),
    });
  }
  addMemoryImport(_name: string, module: string, base: string): void {
    this.memoryImport = { module, base };
  }
  setMemory(
    initial: number,
    maximum: number,
    _exportName: string | null = null,
    _segments: readonly never[] = [],
    shared = false,
  ): void {
    this.memoryPages = [initial, maximum];
    this.sharedMemory = shared;
  }
  addGlobal(name: string, type: Ty, mutable: boolean, init: Ref): void {
    this.globalIndex.set(name, this.globalImports.length + this.globals.length);
    this.globals.push({ name, t: type, mutable, init });
  }
  /** Encoded declarations of locals of types `vars`, one shared array per distinct list. */
  private readonly localDecls = new Map<string, Uint8Array>();
  private localDeclarations(vars: readonly Ty[]): Uint8Array {
    // the functions of a guest share one array of local types: the same array, the same answer
    if (vars === this.lastVars) return this.lastDecl!;
    this.lastVars = vars;
    this.lastDecl = this.declarationsOf(vars);
    return this.lastDecl;
  }
  private lastVars: readonly Ty[] | null = null;
  private lastDecl: Uint8Array | null = null;
  private declarationsOf(vars: readonly Ty[]): Uint8Array {
    const key = vars.join(',');
    let decl = this.localDecls.get(key);
    if (decl === undefined) {
      const types: number[] = [];
      for (const v of vars) for (const l of this.valTypes(v)) types.push(l);
      decl = localDeclarations(types);
      this.localDecls.set(key, decl);
    }
    return decl;
  }
  /**
   * @throws Error when `name` was declared (declareFunctions) for another index: the functions
   *   were added in another order than declared (a translator bug)
   */
  addFunction(name: string, params: Ty, results: Ty, vars: readonly Ty[], body: Ref): void {
    const locals = this.localDeclarations(vars);
    const index = this.imports.length + this.defs.length;
    const want = this.declared.get(name);
    if (want !== undefined && want !== index) {
      throw new Error(`ByteModule: ${name} was declared as function ${want}, added as ${index}`);
    }
    this.fnIndex.set(name, index);
    const sig = params * 0x10000 + results;
    let type = this.sigOf.get(sig);
    if (type === undefined) {
      type = this.sigIndex(this.valTypes(params), this.valTypes(results));
      this.sigOf.set(sig, type);
    }
    this.defs.push({ name, type, locals, body });
  }
  addFunctionExport(name: string, externalName: string): void {
    this.exports.push({ name: externalName, kind: 0, internal: name });
  }
  addGlobalExport(name: string, externalName: string): void {
    this.exports.push({ name: externalName, kind: 3, internal: name });
  }

  /** Function index of each name referenced by a call (fnRef), set by emitBinary. */
  private fnRefIndex: Int32Array = new Int32Array(0);

  /** Serialise node `r` into `out`. */
  private write(out: Sink, r: Ref): void {
    if (out instanceof Bytes) return this.writeBytes(out, r);
    const buf = this.buf;
    const end = this.start[r] + this.len[r];
    for (let i = this.start[r]; i < end; i++) {
      const v = buf[i];
      if (v >= 256) this.write(out, v - 256);
      else if (v >= 0) out.push(v);
      else uleb(out, this.fnRefIndex[-1 - v]);
    }
  }

  /** {@link write} into a byte buffer: each node's own values straight into its array. */
  private writeBytes(out: Bytes, r: Ref): void {
    const buf = this.buf;
    let i = this.start[r];
    const end = i + this.len[r];
    if (this.pure[r] === 1) {
      // bytes only: one conversion of the Int32 values (each 0..255) into the output
      out.ensure(end - i);
      out.buf.set(buf.subarray(i, end), out.length);
      out.length += end - i;
      return;
    }
    // a value is at most one byte, a function index at most 5
    out.ensure(5 * (end - i));
    let o = out.buf;
    let n = out.length;
    for (; i < end; i++) {
      const v = buf[i];
      if (v >= 0 && v < 256) o[n++] = v;
      else if (v >= 256) {
        out.length = n;
        this.writeBytes(out, v - 256);
        out.ensure(5 * (end - i));
        o = out.buf;
        n = out.length;
      } else {
        out.length = n;
        uleb(out, this.fnRefIndex[-1 - v]);
        n = out.length;
      }
    }
    out.length = n;
  }

  /**
   * {@link writeBytes} value by value, noting in `out` each marked value index's byte offset
   * (relative to `base`) with its pcs. Only when recording pcs.
   */
  private writeMarked(out: Bytes, r: Ref, base: number, found: [number, number][]): void {
    const marks = this.pcMarks!;
    const buf = this.buf;
    const end = this.start[r] + this.len[r];
    for (let i = this.start[r]; i < end; i++) {
      const pcs = marks.get(i);
      if (pcs !== undefined) for (const pc of pcs) found.push([pc, out.length - base]);
      const v = buf[i];
      if (v >= 256) this.writeMarked(out, v - 256, base, found);
      else if (v >= 0) out.push(v);
      else uleb(out, this.fnRefIndex[-1 - v]);
    }
  }

  /** Resolve every called name to its function index. */
  private resolveCalls(): void {
    this.fnRefIndex = new Int32Array(this.fnNames.length);
    this.fnNames.forEach((fn, k) => {
      const i = this.fnIndex.get(fn);
      if (i === undefined) throw new Error(`ByteModule: call to unknown function ${fn}`);
      this.fnRefIndex[k] = i;
    });
  }

  /**
   * The module as Wasm bytes, with a name section naming every function (trap backtraces use it).
   * @throws Error on a call to an undeclared function or an unknown global (a translator bug).
   */
  emitBinary(): Uint8Array {
    this.resolveCalls();
    // code first: block types may add signatures to the type table
    // a small module (the lazy tier's) starts small: zeroing 64 KiB would cost more than its bytes
    const start = Math.min(1 << 16, 64 + this.used * 2);
    const code = new Bytes(start);
    const f = new Bytes(start);
    uleb(code, this.defs.length);
    for (const d of this.defs) {
      f.length = 0;
      f.append(d.locals);
      if (this.pcMarks === null) this.write(f, d.body);
      else {
        const found: [number, number][] = [];
        this.writeMarked(f, d.body, f.length, found);
        (this.pcOffsets ??= new Map()).set(d.name, found);
      }
      f.push(Op.end);
      uleb(code, f.length);
      code.append(f.bytes());
    }
    const globals = this.globals.map((g) => {
      const init: number[] = [];
      this.write(init, g.init);
      return { type: g.t, mutable: g.mutable, init };
    });
    const fnIndex = (n: string) => {
      const k = this.fnIndex.get(n);
      if (k === undefined) throw new Error(`ByteModule: unknown function ${n}`);
      return k;
    };
    const exports = this.exports.map((e) => {
      const k =
        e.kind === 0 ? this.fnIndex.get(e.internal) : e.kind === 1 ? 0 : this.globalIndex.get(e.internal);
      if (k === undefined) throw new Error(`ByteModule: export of unknown ${e.internal}`);
      return { name: e.name, kind: e.kind, index: k };
    });
    const elements = this.elements.map((e) => ({ offset: e.offset, functions: e.names.map(fnIndex) }));
    const [pages0, pages1] = this.memoryPages;
    return writeModule({
      types: this.funcTypeSigs,
      functionImports: this.imports,
      memoryImport: this.memoryImport && {
        ...this.memoryImport,
        pages: [pages0, pages1],
        shared: this.sharedMemory,
      },
      globalImports: this.globalImports,
      tableImport: this.tableImport,
      functionTypes: this.defs.map((d) => d.type),
      table: this.tableSize === null ? null : { size: this.tableSize },
      elements,
      globals,
      exports,
      code: code.bytes(),
      functionNames: [...this.imports.map((i) => i.name), ...this.defs.map((d) => d.name)],
    });
  }

  // ---- imported globals and the funcref table (the lazy tier's modules, lazy-image.ts) ----
  private readonly globalImports: { module: string; base: string; type: number; mutable: boolean }[] = [];
  private tableImport: { module: string; base: string; min: number } | null = null;
  private tableSize: number | null = null;
  private readonly elements: { offset: number; names: string[] }[] = [];
  /** Import global `name` (before any global is defined: imports come first). @throws Error after */
  addGlobalImport(name: string, module: string, base: string, type: Ty, mutable: boolean): void {
    if (this.globals.length > 0) throw new Error('ByteModule: global imports must precede globals');
    this.globalIndex.set(name, this.globalImports.length);
    this.globalImports.push({ module, base, type, mutable });
  }
  /** Import table 0, a funcref table of at least `min` entries. */
  addTableImport(module: string, base: string, min: number): void {
    this.tableImport = { module, base, min };
  }
  /** Define table 0: a funcref table of `size` entries, fixed. */
  setTable(size: number): void {
    this.tableSize = size;
  }
  /** Put the named functions, in order, in table 0 from entry `offset` on when instantiated. */
  addElements(offset: number, functions: readonly string[]): void {
    this.elements.push({ offset, names: [...functions] });
  }
  /** Export table 0 as `externalName`. */
  addTableExport(externalName: string): void {
    this.exports.push({ name: externalName, kind: 1, internal: '' });
  }
  /** The type index of the signature (params, results), added when new. */
  typeIndex(params: Ty, results: Ty): number {
    return this.sigIndex(this.valTypes(params), this.valTypes(results));
  }
  /** The names called, from the `from`th on ({@link calledCount}), not imported, added or declared. */
  unresolvedCalls(from = 0): string[] {
    return this.fnNames.slice(from).filter((n) => !this.fnIndex.has(n) && !this.declared.has(n));
  }
  /** How many distinct names have been called so far. */
  get calledCount(): number {
    return this.fnNames.length;
  }
}

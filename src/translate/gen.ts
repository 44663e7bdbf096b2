/**
 * The typed layer the code generators build with, over {@link ExprBuilder} (Binaryen or the
 * baseline ByteModule alike): value types by name, function signatures as data, a local allocator
 * in place of hand-numbered locals, 64-bit constants, guest loads and stores by width and sign,
 * and the one way a trap is raised. This file must not import Binaryen at run time.
 */
import type { Signature, TrapKind, ValType } from './abi.js';
import type { ExprBuilder, Ref, Ty, Types } from './builder.js';

export type { Signature, ValType } from './abi.js';

/** The builder's type handle for a {@link ValType} (or 'none'). */
export function typeOf(t: Types, v: ValType | 'none'): Ty {
  switch (v) {
    case 'i32':
      return t.i32;
    case 'i64':
      return t.i64;
    case 'f64':
      return t.f64;
    case 'pair':
      return t.tuple([t.i64, t.i64]);
    case 'none':
      return t.none;
  }
}

/** The builder's (params, result) type handles of a signature; one parameter is not a tuple. */
export function signatureTypes(t: Types, sig: Signature): { params: Ty; result: Ty } {
  const params = sig.params.map((p) => typeOf(t, p));
  return { params: params.length === 1 ? params[0] : t.tuple(params), result: typeOf(t, sig.result) };
}

/**
 * The locals of one function: parameters first, then variables handed out in order. A `pair`
 * local must come last (ByteModule expands it into two i64 locals at the end of the frame), so
 * nothing may be added after one.
 */
export class LocalPlan {
  private readonly kinds: ValType[] = [];
  /** @param params the signature whose parameters occupy the first indices */
  constructor(readonly signature: Signature) {}
  /** The index of parameter `k` (0-based), checked against the signature. */
  param(k: number): number {
    if (!(k >= 0 && k < this.signature.params.length)) throw new RangeError(`no parameter ${k}`);
    return k;
  }
  /**
   * Reserve a variable of type `type`.
   * @returns its local index
   * @throws Error after a `pair` local (it must stay last)
   */
  add(type: ValType): number {
    if (this.kinds[this.kinds.length - 1] === 'pair') throw new Error('a pair local must be the last local');
    this.kinds.push(type);
    return this.signature.params.length + this.kinds.length - 1;
  }
  /** The type of local `index` (parameter or variable). */
  type(index: number): ValType {
    const p = this.signature.params.length;
    return index < p ? this.signature.params[index] : this.kinds[index - p];
  }
  /** The variables' types, as `addFunction` takes them. */
  vars(t: Types): Ty[] {
    return this.kinds.map((k) => typeOf(t, k));
  }
}

/** Access widths of guest memory, in bytes. */
export type Width = 1 | 2 | 4 | 8;

type LoadOp = 'load8_s' | 'load8_u' | 'load16_s' | 'load16_u' | 'load32_s' | 'load32_u' | 'load';
type StoreOp = 'store8' | 'store16' | 'store32' | 'store';

const LOADS = {
  1: ['load8_u', 'load8_s'],
  2: ['load16_u', 'load16_s'],
  4: ['load32_u', 'load32_s'],
  // a 64-bit load has no extension: both entries are the plain load
  8: ['load', 'load'],
} as const satisfies Record<Width, readonly [LoadOp, LoadOp]>;

const STORES = { 1: 'store8', 2: 'store16', 4: 'store32', 8: 'store' } as const satisfies Record<
  Width,
  StoreOp
>;

/**
 * Expression helpers shared by the function emitter and the image's helper functions.
 * Holds the builder and its types; creates fresh nodes on every call (a Binaryen node must have
 * one parent).
 */
export class Gen {
  constructor(
    readonly m: ExprBuilder,
    readonly t: Types,
    /** the internal name of the trap import */
    private readonly trapImport: string,
  ) {}

  /** An i64 constant from a number (a safe integer) or a bigint, wrapped to 64 bits. */
  c64(v: number | bigint): Ref {
    // binaryen 132 wants one BigInt; its (low, high) form aborts
    return this.m.i64.const(BigInt.asIntN(64, BigInt(v)));
  }

  /** An i32 constant (wrapped to 32 bits). */
  c32(v: number): Ref {
    return this.m.i32.const(v | 0);
  }

  /**
   * An i64 load of `width` bytes at Wasm address `ea` (i32) plus the static `offset` (the
   * access's offset field, >= 0), sign- or zero-extended; `align` is the alignment hint in bytes
   * (1 when nothing is known).
   */
  load(width: Width, signed: boolean, ea: Ref, align: number = 1, offset: number = 0): Ref {
    const op = LOADS[width][signed ? 1 : 0];
    return this.m.i64[op](offset, align, ea);
  }

  /** Store the low `width` bytes of i64 `value` at Wasm address `ea` (i32) plus `offset` (>= 0). */
  store(width: Width, ea: Ref, value: Ref, align: number = 1, offset: number = 0): Ref {
    return this.m.i64[STORES[width]](offset, align, ea, value);
  }

  /**
   * Raise trap `kind` at guest address `pc` through the trap import `(kind, pc, value)`, then
   * `unreachable` (the import throws).
   */
  trap(kind: TrapKind, pc: number, value: Ref): Ref {
    return this.trapAt(kind, this.c32(pc), value);
  }

  /** {@link trap} with the pc computed by an i32 expression. */
  trapAt(kind: TrapKind, pc: Ref, value: Ref): Ref {
    const m = this.m;
    return m.block(null, [
      m.call(this.trapImport, [this.c32(kind), pc, value], this.t.none),
      m.unreachable(),
    ]);
  }
}

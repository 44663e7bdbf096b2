/**
 * The part of Binaryen's module API the translator builds with, as one interface with two
 * implementations: `binaryen.Module` itself (the optimising tier) and {@link ByteModule}
 * (src/translate/bytes.ts, the baseline tier, which writes Wasm bytes without loading Binaryen).
 * Expressions and types are plain numbers in both, so the code generators are written once.
 * This file must not import Binaryen at run time (types only).
 */
import type binaryen from 'binaryen';

type M = binaryen.Module;

/** An expression handle of the builder that created it. */
export type Ref = binaryen.ExpressionRef;
/** A value type handle of the builder that created it. */
export type Ty = binaryen.Type;

type I32Ops =
  | 'const'
  | 'wrap'
  | 'add'
  | 'sub'
  | 'mul'
  | 'div_s'
  | 'div_u'
  | 'rem_s'
  | 'rem_u'
  | 'and'
  | 'or'
  | 'xor'
  | 'shl'
  | 'shr_s'
  | 'shr_u'
  | 'eq'
  | 'eqz'
  | 'lt_s'
  | 'lt_u'
  | 'gt_u'
  | 'ge_u';
type I64Ops =
  | 'const'
  | 'extend_s'
  | 'extend_u'
  | 'add'
  | 'sub'
  | 'mul'
  | 'div_s'
  | 'div_u'
  | 'rem_s'
  | 'rem_u'
  | 'and'
  | 'or'
  | 'xor'
  | 'shl'
  | 'shr_s'
  | 'shr_u'
  | 'eq'
  | 'ne'
  | 'eqz'
  | 'lt_s'
  | 'lt_u'
  | 'gt_u'
  | 'le_u'
  | 'ge_s'
  | 'ge_u'
  | 'load'
  | 'load8_s'
  | 'load8_u'
  | 'load16_s'
  | 'load16_u'
  | 'load32_s'
  | 'load32_u'
  | 'store'
  | 'store8'
  | 'store16'
  | 'store32'
  | 'trunc_s_sat';

/** Expression constructors and module-level declarations the translator uses. */
export interface ExprBuilder {
  block: M['block'];
  if: M['if'];
  call: M['call'];
  return_call: M['return_call'];
  select: M['select'];
  drop: M['drop'];
  return: M['return'];
  nop: M['nop'];
  unreachable: M['unreachable'];
  local: Pick<M['local'], 'get' | 'set' | 'tee'>;
  global: Pick<M['global'], 'get' | 'set'>;
  tuple: Pick<M['tuple'], 'make' | 'extract'>;
  i32: Pick<M['i32'], I32Ops>;
  i64: Pick<M['i64'], I64Ops>;
  f64: Pick<M['f64'], 'ne'>;
  addFunction(name: string, params: Ty, results: Ty, vars: readonly Ty[], body: Ref): unknown;
  addGlobal(name: string, type: Ty, mutable: boolean, init: Ref): unknown;
  addFunctionImport(name: string, module: string, base: string, params: Ty, results: Ty): void;
  addMemoryImport(name: string, module: string, base: string): void;
  addFunctionExport(name: string, externalName: string): unknown;
  addGlobalExport(name: string, externalName: string): unknown;
  /** Binaryen's order of parameters; `shared` is kept by Binaryen only here, not by addMemoryImport */
  setMemory(
    initial: number,
    maximum: number,
    exportName: string | null,
    segments: readonly never[],
    shared: boolean,
  ): void;
}

/** The value types a builder hands out: Binaryen's, or ByteModule's own. */
export interface Types {
  none: Ty;
  i32: Ty;
  i64: Ty;
  f64: Ty;
  /** a tuple of the given types (for params, results and the (i64, i64) call result) */
  tuple(types: Ty[]): Ty;
}

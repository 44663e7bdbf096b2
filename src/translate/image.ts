/**
 * Whole-image structure shared by both tiers: one Wasm function per guest function, the
 * indirect-call dispatcher, arithmetic helpers, entry stubs and the imports the engine provides
 * (src/translate/abi.ts), built through {@link ExprBuilder} (Binaryen or ByteModule). This file
 * must not import Binaryen at run time: the baseline tier starts without it.
 */
import type { ElfImage } from '../elf/types.js';
import { relocationTargets } from '../elf/targets.js';
import {
  ECALL_ARGS,
  Exports,
  IMPORT_MODULE,
  IMPORT_SIGNATURES,
  Imports,
  memoryPages,
  SHARED_MEMORY,
  STACK_GUARD,
  TrapKind,
  TranslateError,
  type FunctionImport,
  type GuestLayout,
  type Signature,
  type ValType,
  type TranslateOptions,
} from './abi.js';
import type { ExprBuilder, Ref, Ty, Types } from './builder.js';
import { decode } from '../riscv/decode.js';
import type { Instr } from '../riscv/instr.js';
import { analyseFunction, instructionBits, type FunctionCfg } from './cfg.js';
import { argumentUses } from './liveness.js';
import {
  ARGUMENT_REGISTERS,
  chargeFuel,
  directFrame,
  emitFunction,
  entryCost,
  functionName,
  Names,
  passedArguments,
  type EmitContext,
} from './emit.js';
import { Gen, LocalPlan, signatureTypes } from './gen.js';
import { Op, type ByteModule } from './bytes.js';
import { DirectWriter } from './direct.js';

/** The result of translating one image. */
export interface Translation {
  /** the Wasm binary */
  wasm: Uint8Array;
  layout: GuestLayout;
  /** guest function entries reachable through the indirect-call dispatcher */
  indirectTargets: number[];
  /** milliseconds spent in analysis+emission, in Binaryen's optimiser, and emitting the binary */
  timings: { build: number; optimize: number; emit: number };
}

/** Read `length` bytes at guest address `address` from the image's PT_LOAD segments (zero past filesz). */
export function readImage(image: ElfImage, address: number, length: number): Uint8Array {
  const out = new Uint8Array(length);
  for (const seg of image.segments) {
    const lo = Math.max(address, seg.vaddr);
    const hi = Math.min(address + length, seg.vaddr + seg.filesz);
    if (lo < hi) out.set(seg.data.subarray(lo - seg.vaddr, hi - seg.vaddr), lo - address);
  }
  return out;
}

/**
 * The same bytes as {@link readImage}, as a view into the segment's data (no copy) when exactly one
 * PT_LOAD segment holds any of them and its file bytes cover them all (a function's code, nearly
 * always); else a copy from readImage. Read it only: it may share the image's memory.
 */
export function imageBytes(image: ElfImage, address: number, length: number): Uint8Array {
  let only: ElfImage['segments'][number] | null = null;
  for (const seg of image.segments) {
    if (Math.max(address, seg.vaddr) < Math.min(address + length, seg.vaddr + seg.filesz)) {
      if (only !== null) return readImage(image, address, length);
      only = seg;
    }
  }
  if (only === null || address < only.vaddr || address + length > only.vaddr + only.filesz) {
    return readImage(image, address, length);
  }
  return only.data.subarray(address - only.vaddr, address + length - only.vaddr);
}

/** What {@link buildImage} leaves for the tier to finish. */
export interface BuiltImage {
  indirectTargets: number[];
  /** the analysed functions, by Wasm name, with their instruction counts */
  sizes: Map<string, number>;
}

/**
 * Add the whole image to `m`: imports, globals, helpers, every guest function, the dispatcher and
 * the entry stubs.
 * @throws TranslateError naming the guest function whose analysis or emission failed.
 */
export function buildImage(
  m: ExprBuilder,
  t: Types,
  structure: EmitContext['structure'],
  image: ElfImage,
  layout: GuestLayout,
  opts: TranslateOptions,
): BuiltImage {
  addImports(m, t, opts);
  addModuleBase(m, t, layout, opts);
  const facts = imageFacts(image);
  const { functionEntries, entryCosts, named } = facts;
  const ctx = emitContext(m, t, structure, layout, facts);
  const sizes = new Map<string, number>();
  const analyse = (fn: ElfImage['functions'][number]) => analyseGuestFunction(image, fn, facts);
  const emit = (fn: ElfImage['functions'][number], cfg: FunctionCfg) => {
    try {
      emitFunction(ctx, cfg);
    } catch (e) {
      throw failedFunction(image, fn, e);
    }
    let count = 0;
    for (const b of cfg.blocks.values()) count += b.instrs.length;
    sizes.set(functionName(fn.start), count);
  };
  if (structure.kind === 'relooper') {
    // the optimising tier passes only the arguments a callee reads (dead-argument elimination then
    // drops the rest): every function is analysed before any is emitted
    const cfgs = image.functions.map(analyse);
    ctx.argumentUses = argumentUses(cfgs);
    image.functions.forEach((fn, k) => emit(fn, cfgs[k]));
  } else {
    // the baseline tier skips that analysis, and keeps one function's CFG alive at a time (all of
    // a large image's would be promoted by the collector and copied at every scavenge). The guest
    // functions and the dispatcher after them are added in this order: their indices are fixed
    // now, so calls to them are written as final bytes (ByteModule.declareFunctions).
    const names = image.functions.map((fn) => functionName(fn.start));
    if (new Set(names).size === names.length) structure.bytes.declareFunctions([...names, Names.dispatch]);
    for (const fn of image.functions) emit(fn, analyse(fn));
  }

  const indirectTargets = [...functionEntries].filter((a) => named.has(a)).sort((a, b) => a - b);
  addDispatcher(ctx.gen, indirectTargets, entryCosts, ctx.pair, ctx.argumentUses);
  addEntryStubs(ctx, image, layout);
  return { indirectTargets, sizes };
}

/** What analysing and emitting any function of an image needs to know of the whole image. */
export interface ImageFacts {
  /** entries of translated functions */
  functionEntries: Set<number>;
  /** each function's entry fuel charge (emit-frame.ts entryCost), by entry */
  entryCosts: Map<number, number>;
  /** code addresses relocations name (src/elf/targets.ts): the indirect-call candidates */
  named: Set<number>;
  /** the instruction at a guest address in an executable segment, or null */
  decodeAt: (address: number) => Instr | null;
  /** the same facts as analyseFunction takes them */
  relocationTargets: Set<number>;
}

/** The {@link ImageFacts} of `image` (one pass over its function list and its relocations). */
export function imageFacts(image: ElfImage): ImageFacts {
  const functionEntries = new Set(image.functions.map((f) => f.start));
  const entryCosts = new Map(image.functions.map((f) => [f.start, entryCost(f.start, f.start + f.size)]));
  const named = relocationTargets(image).codeAddresses;
  const exec = image.segments.filter((seg) => (seg.flags & 1) !== 0);
  const decodeAt = (address: number): Instr | null => {
    const seg = exec.find((x) => address >= x.vaddr && address < x.vaddr + x.filesz);
    const bits = seg ? instructionBits(seg.data, address - seg.vaddr) : null;
    return bits === null ? null : decode(bits);
  };
  return { functionEntries, entryCosts, named, decodeAt, relocationTargets: named };
}

/** The emit context of a module over `m` for an image with `facts`. */
export function emitContext(
  m: ExprBuilder,
  t: Types,
  structure: EmitContext['structure'],
  layout: GuestLayout,
  facts: ImageFacts,
): EmitContext {
  const i64 = t.i64;
  return {
    m,
    types: t,
    gen: new Gen(m, t, Names.trap),
    structure,
    base: layout.base,
    size: layout.size,
    stackLimit: layout.stackLimit,
    dirtySplit: layout.stackLimit - STACK_GUARD - layout.base,
    functionEntries: facts.functionEntries,
    entryCosts: facts.entryCosts,
    pair: t.tuple([i64, i64]),
    params: t.tuple(new Array(9).fill(i64)),
  };
}

/**
 * The CFG of guest function `fn`.
 * @throws TranslateError naming the function when its analysis fails
 */
export function analyseGuestFunction(
  image: ElfImage,
  fn: ElfImage['functions'][number],
  facts: ImageFacts,
): FunctionCfg {
  try {
    return analyseFunction(imageBytes(image, fn.start, fn.size), fn.start, facts);
  } catch (e) {
    throw failedFunction(image, fn, e);
  }
}

/** A TranslateError naming the guest function `fn` whose analysis or emission threw `e`. */
export function failedFunction(image: ElfImage, fn: { start: number }, e: unknown): TranslateError {
  return new TranslateError(
    `translating ${describeFunction(image, fn.start)} failed: ${errorText(e)}`,
    functionName(fn.start),
  );
}

/**
 * The function imports (ecall, trap, poll, csr: abi.ts) and the memory import; a module may add
 * more function imports after these, before {@link addModuleBase}.
 */
export function addImports(m: ExprBuilder, t: Types, opts: TranslateOptions): void {
  const pages = memoryPages(opts.memorySize);
  m.setMemory(pages, pages, null, [], SHARED_MEMORY);
  m.addMemoryImport('0', IMPORT_MODULE, Imports.memory);
  for (const key of ['ecall', 'trap', 'poll', 'csr'] as const) {
    const sig = signatureTypes(t, IMPORT_SIGNATURES[key]);
    m.addFunctionImport(IMPORT_NAMES[key], IMPORT_MODULE, Imports[key], sig.params, sig.result);
  }
}

/** The module-level globals every module of an image defines, with their types and initial values. */
export function moduleGlobals(t: Types, layout: GuestLayout): [string, Ty, bigint | number][] {
  return [
    [Names.gp, t.i64, 0n],
    [Names.tp, t.i64, 0n],
    [Names.a0, t.i64, 0n],
    [Names.a1, t.i64, 0n],
    [Names.fuel, t.i32, 0],
    [Names.resv, t.i64, -1n],
    [Names.dirtyLo, t.i32, layout.size],
    [Names.dirtyHi, t.i32, 0],
  ];
}

/**
 * The helpers (trap, poll, csr first: the baseline tier writes their indices as final bytes), the
 * globals and their exports, the multiply helpers and the ecall helper, after {@link addImports}.
 */
export function addModuleBase(m: ExprBuilder, t: Types, layout: GuestLayout, opts: TranslateOptions): void {
  addImportHelpers(m, t);
  for (const [name, type, value] of moduleGlobals(t, layout)) {
    m.addGlobal(name, type, true, typeof value === 'bigint' ? m.i64.const(value) : m.i32.const(value));
  }
  m.addGlobalExport(Names.a0, Exports.a0);
  m.addGlobalExport(Names.a1, Exports.a1);
  m.addGlobalExport(Names.dirtyLo, Exports.dirtyLo);
  m.addGlobalExport(Names.dirtyHi, Exports.dirtyHi);
  m.addGlobalExport(Names.fuel, Exports.fuel);
  addMulHelpers(m, t);
  addEcallHelper(m, t, opts.memorySize);
}

/**
 * The entry stubs, one per global symbol of a function and the ELF entry's: each sets gp, tp, the
 * reservation and fuel, lowers dirty_lo to the initial sp, charges the function's entry and tail
 * calls it with sp = initial sp and a0..a7 from its parameters; exported as
 * `Exports.entryPrefix + symbol`.
 */
export function addEntryStubs(ctx: EmitContext, image: ElfImage, layout: GuestLayout): void {
  const { m, types: t, structure, entryCosts } = ctx;
  const i32 = t.i32;
  const i64 = t.i64;
  const pair = ctx.pair;
  const gpValue = image.globalPointer ?? 0;
  const exported = new Set<string>();
  // every stub has the same signature and locals
  const frame = new LocalPlan(ENTRY_SIGNATURE);
  const scratch = frame.add('i32'); // the fuel charge's
  const sig = signatureTypes(t, ENTRY_SIGNATURE);
  const vars = frame.vars(t);
  let stubWriter: DirectWriter | undefined;
  for (const fn of image.functions) {
    const isEntry = fn.start === image.entry;
    for (const name of fn.names) {
      if (exported.has(name) || !(fn.global || isEntry)) continue;
      exported.add(name);
      const stub = `entry_${fn.start.toString(16)}_${exported.size}`;
      if (structure.kind === 'direct' && ctx.argumentUses === undefined) {
        // the same bytes as below, written as one node (a Rust harness has a thousand and more)
        // one writer for every stub: the frame's fuel local is the stub's scratch
        stubWriter ??= new DirectWriter(structure.bytes, {
          ...directFrame(ctx, structure.bytes),
          fuelLocal: scratch,
        });
        const body = directEntryStub(
          stubWriter,
          structure.bytes,
          gpValue,
          layout,
          entryCosts.get(fn.start)!,
          fn.start,
        );
        m.addFunction(stub, sig.params, sig.result, vars, body);
        m.addFunctionExport(stub, Exports.entryPrefix + name);
        continue;
      }
      // a0..a7, 0 for those the function never reads (see EmitContext.argumentUses)
      const passed = passedArguments(ctx.argumentUses, fn.start);
      const args = Array.from({ length: 8 }, (_, k) =>
        (passed & (1 << (10 + k))) !== 0 ? m.local.get(frame.param(k), i64) : m.i64.const(0n),
      );
      m.addFunction(
        stub,
        sig.params,
        sig.result,
        vars,
        m.block(null, [
          m.global.set(Names.gp, m.i64.const(BigInt(gpValue))),
          m.global.set(Names.tp, m.i64.const(0n)),
          m.global.set(Names.resv, m.i64.const(-1n)),
          m.global.set(Names.fuel, m.i32.const(0)),
          // sp starts at initialSp: the mark of stores relative to sp (emit-core.ts spMark)
          m.if(
            m.i32.gt_u(m.global.get(Names.dirtyLo, i32), m.i32.const(layout.initialSp - layout.base)),
            m.global.set(Names.dirtyLo, m.i32.const(layout.initialSp - layout.base)),
          ),
          chargeFuel(m, t, m.i32.const(entryCosts.get(fn.start)!), m.i32.const(fn.start), scratch),
          m.return_call(functionName(fn.start), [m.i64.const(BigInt(layout.initialSp)), ...args], pair),
        ]),
      );
      m.addFunctionExport(stub, Exports.entryPrefix + name);
    }
  }
}

/**
 * An entry stub's body as one ByteModule node, byte for byte what buildImage builds for it with
 * every argument passed (the baseline tier has no argument facts): gp, tp, the reservation and
 * fuel set; dirty_lo lowered to the initial sp; the entry's fuel charged; a tail call of the
 * function with sp = initial sp and a0..a7 from the stub's parameters. `w` writes into `bm` with
 * the stub's i32 scratch local as its fuel local. Core spec 5.4 encodings.
 */
function directEntryStub(
  w: DirectWriter,
  bm: ByteModule,
  gp: number,
  layout: GuestLayout,
  cost: number,
  start: number,
): Ref {
  const g = (name: string) => bm.globalIndexOf(name);
  const dirtyLo = g(Names.dirtyLo);
  const spMark = layout.initialSp - layout.base;
  w.i64(gp);
  w.withIndex(Op.global_set, g(Names.gp));
  w.i64(0);
  w.withIndex(Op.global_set, g(Names.tp));
  w.i64(-1);
  w.withIndex(Op.global_set, g(Names.resv));
  w.i32(0);
  w.withIndex(Op.global_set, g(Names.fuel));
  // if (dirty_lo >u mark) dirty_lo = mark
  w.withIndex(Op.global_get, dirtyLo);
  w.i32(spMark);
  w.op(0x4b); // i32.gt_u
  w.op2(Op.if, 0x40);
  w.i32(spMark);
  w.withIndex(Op.global_set, dirtyLo);
  w.op(Op.end);
  w.fuel(cost, start);
  // return_call f(initial sp, a0..a7)
  w.i64(layout.initialSp);
  for (let k = 0; k < 8; k++) w.withIndex(Op.local_get, k);
  w.call(Op.return_call, bm.functionValue(functionName(start)));
  return w.close()!;
}

/** The internal names of the function imports. */
const IMPORT_NAMES = {
  ecall: Names.ecall,
  trap: Names.trapImport,
  poll: Names.pollImport,
  csr: Names.csrImport,
} as const satisfies Record<FunctionImport, string>;

/** The entry stubs: `(a0..a7: i64) -> (a0, a1)` */
const ENTRY_SIGNATURE: Signature = { params: new Array<ValType>(8).fill('i64'), result: 'pair' };
/** `dispatch(pc: i32, target: i64, sp: i64, a0..a7: i64) -> (a0, a1)` */
const DISPATCH_SIGNATURE: Signature = {
  params: ['i32', ...new Array<ValType>(10).fill('i64')],
  result: 'pair',
};
/** `ecall(pc: i32, a7: i64, a0..a5: i64) -> (a0, a1)` */
const ECALL_HELPER_SIGNATURE: Signature = {
  params: ['i32', ...new Array<ValType>(7).fill('i64')],
  result: 'pair',
};
/** `mulhu(a: i64, b: i64) -> i64`, likewise mulh and mulhsu */
const MUL_HELPER_SIGNATURE: Signature = { params: ['i64', 'i64'], result: 'i64' };

/** `f_<hex> (symbol, ...)`: a guest function as error messages name it. */
export function describeFunction(image: ElfImage, start: number): string {
  const fn = image.functions.find((f) => f.start === start);
  const names = fn && fn.names.length > 0 ? ` (${fn.names.join(', ')})` : '';
  return functionName(start) + names;
}

/** The text of an error, including Binaryen's C++ exceptions (which are plain objects in JS). */
export function errorText(e: unknown, binaryenModule?: unknown): string {
  if (e instanceof Error) return e.message;
  try {
    const [type, message] = (
      binaryenModule as { getExceptionMessage(e: unknown): string[] }
    ).getExceptionMessage(e);
    return `${type}: ${message.trim()}`;
  } catch {
    return String(e);
  }
}

/**
 * `dispatch(pc, target, sp, a0..a7)`: a binary decision tree over the relocation-named function
 * entries, ending in the target's entry fuel charge (polling with `pc`) and a tail call; any other
 * target traps BadIndirectTarget{target} at `pc`.
 */
export function addDispatcher(
  g: Gen,
  targets: number[],
  entryCosts: ReadonlyMap<number, number>,
  pair: Ty,
  argumentUses: ReadonlyMap<number, number> | undefined,
): void {
  const { m, t } = g;
  const i64 = t.i64;
  const frame = new LocalPlan(DISPATCH_SIGNATURE);
  const scratch = frame.add('i32'); // the fuel charge's
  const target = () => m.local.get(frame.param(1), i64);
  // the arguments of a call to `to`: 0 for those it never reads (see EmitContext.argumentUses)
  const args = (to: number) => {
    const passed = passedArguments(argumentUses, to);
    return ARGUMENT_REGISTERS.map((r, k) =>
      (passed & (1 << r)) !== 0 ? m.local.get(frame.param(k + 2), i64) : m.i64.const(0n),
    );
  };
  // a fresh trap per leaf: an expression node must have exactly one parent (the optimiser's
  // inliner rewrites local indices in place, so a node shared by two leaves is rewritten twice)
  const bad = () => g.trapAt(TrapKind.BadIndirectTarget, m.local.get(frame.param(0), t.i32), target());
  const tree = (lo: number, hi: number): Ref => {
    if (hi - lo <= 3) {
      let e = bad();
      for (let k = hi - 1; k >= lo; k--) {
        e = m.if(
          m.i64.eq(target(), m.i64.const(BigInt(targets[k]))),
          m.block(null, [
            chargeFuel(
              m,
              t,
              m.i32.const(entryCosts.get(targets[k])!),
              m.local.get(frame.param(0), t.i32),
              scratch,
            ),
            m.return_call(functionName(targets[k]), args(targets[k]), pair),
          ]),
          e,
        );
      }
      return e;
    }
    const mid = (lo + hi) >> 1;
    return m.if(m.i64.lt_u(target(), m.i64.const(BigInt(targets[mid]))), tree(lo, mid), tree(mid, hi));
  };
  const body = targets.length === 0 ? bad() : m.block(null, [tree(0, targets.length), m.unreachable()]);
  const sig = signatureTypes(t, DISPATCH_SIGNATURE);
  m.addFunction(Names.dispatch, sig.params, sig.result, frame.vars(t), body);
}

/**
 * The ecall helper `(pc: i32, a7: i64, a0..a5: i64) -> (a0, a1)` behind every ecall site. It
 * stores a0..a5 in the ecall argument area (ECALL_ARGS, past the guest's memory) and calls the
 * import with the pc and the number only (Imports.ecall): V8's import wrapper costs about 1 ns
 * per parameter, and an i64 parameter would reach JavaScript as a freshly allocated BigInt, while
 * the engine reads an argument from memory only when a host function asks for it. The number goes
 * in three pieces (bits 0-29, 30-59, 60-63), each a small integer in JavaScript. The import
 * returns an f64: an integer is the new a0 (a1 unchanged); NaN means the engine left a0 and a1 in
 * the exported a0/a1 globals (values beyond 2^53, pairs).
 */
function addEcallHelper(m: ExprBuilder, t: Types, memorySize: number): void {
  const i64 = t.i64;
  const i32 = t.i32;
  const f64 = t.f64;
  const c = (v: bigint) => m.i64.const(v);
  // parameters: 0 pc, 1 a7, 2..7 a0..a5; one variable: the import's result
  const frame = new LocalPlan(ECALL_HELPER_SIGNATURE);
  const result = frame.add('f64');
  const g = (k: number) => m.local.get(frame.param(k), i64);
  const piece = (shift: bigint, mask: bigint) => m.i32.wrap(m.i64.and(m.i64.shr_u(g(1), c(shift)), c(mask)));
  // one address constant, the registers at static offsets from it (8-byte aligned)
  const area = ECALL_ARGS.offset(memorySize);
  const stores = [0, 1, 2, 3, 4, 5].map((k) => m.i64.store(8 * k, 8, m.i32.const(area), g(k + 2)));
  const r = () => m.local.get(result, f64);
  const body = m.block(
    null,
    [
      ...stores,
      m.local.set(
        result,
        m.call(
          Names.ecall,
          [
            m.local.get(frame.param(0), i32),
            piece(0n, 0x3fffffffn),
            piece(30n, 0x3fffffffn),
            piece(60n, 0xfn),
          ],
          f64,
        ),
      ),
      m.if(
        m.f64.ne(r(), r()),
        m.tuple.make([m.global.get(Names.a0, i64), m.global.get(Names.a1, i64)]),
        m.tuple.make([m.i64.trunc_s_sat.f64(r()), g(3)]),
      ),
    ],
    t.tuple([i64, i64]),
  );
  const sig = signatureTypes(t, ECALL_HELPER_SIGNATURE);
  m.addFunction(Names.ecallHelper, sig.params, sig.result, frame.vars(t), body);
}

/** `trap(kind: i32, pc: i32, value: i64)`, never returns (the trap signature hints.ts knows) */
const TRAP_HELPER_SIGNATURE: Signature = { params: ['i32', 'i32', 'i64'], result: 'none' };
/** `poll(pc: i32) -> i32` */
const POLL_HELPER_SIGNATURE: Signature = { params: ['i32'], result: 'i32' };
/** `csr(csr: i32, pc: i32) -> i64` */
const CSR_HELPER_SIGNATURE: Signature = { params: ['i32', 'i32'], result: 'i64' };

/**
 * The helpers behind the trap, poll and csr imports, which share the ecall import's signature
 * `(i32, i32, i32, i32) -> f64` (IMPORT_SIGNATURES: V8 compiles one wasm-to-JS wrapper per
 * distinct import signature when it compiles a module). Translated code calls these, with the
 * signatures the imports had before: trap passes the value's halves and never returns; poll turns
 * the slice (an integer-valued f64) into an i32; csr turns whole milliseconds into nanoseconds.
 * They run once per trap, fuel slice and counter read, so the extra call costs nothing that counts.
 */
function addImportHelpers(m: ExprBuilder, t: Types): void {
  const { i32, i64, f64 } = t;
  const zero = () => m.i32.const(0);
  {
    const frame = new LocalPlan(TRAP_HELPER_SIGNATURE);
    const value = () => m.local.get(frame.param(2), i64);
    const body = m.block(null, [
      m.drop(
        m.call(
          Names.trapImport,
          [
            m.local.get(frame.param(0), i32),
            m.local.get(frame.param(1), i32),
            m.i32.wrap(value()),
            m.i32.wrap(m.i64.shr_u(value(), m.i64.const(32n))),
          ],
          f64,
        ),
      ),
      m.unreachable(),
    ]);
    const sig = signatureTypes(t, TRAP_HELPER_SIGNATURE);
    m.addFunction(Names.trap, sig.params, sig.result, frame.vars(t), body);
  }
  {
    const frame = new LocalPlan(POLL_HELPER_SIGNATURE);
    const slice = m.call(Names.pollImport, [m.local.get(frame.param(0), i32), zero(), zero(), zero()], f64);
    const body = m.i32.wrap(m.i64.trunc_s_sat.f64(slice));
    const sig = signatureTypes(t, POLL_HELPER_SIGNATURE);
    m.addFunction(Names.poll, sig.params, sig.result, frame.vars(t), body);
  }
  {
    const frame = new LocalPlan(CSR_HELPER_SIGNATURE);
    const ms = m.call(
      Names.csrImport,
      [m.local.get(frame.param(0), i32), m.local.get(frame.param(1), i32), zero(), zero()],
      f64,
    );
    const body = m.i64.mul(m.i64.trunc_s_sat.f64(ms), m.i64.const(1_000_000n));
    const sig = signatureTypes(t, CSR_HELPER_SIGNATURE);
    m.addFunction(Names.csr, sig.params, sig.result, frame.vars(t), body);
  }
}

/** MULHU, MULH, MULHSU: the high 64 bits of 128-bit products from 32-bit partial products. */
function addMulHelpers(m: ExprBuilder, t: Types): void {
  const i64 = t.i64;
  const c = (v: bigint) => m.i64.const(v);
  const g = (k: number) => m.local.get(k, i64);
  const mask = c(0xffffffffn);
  const frame = new LocalPlan(MUL_HELPER_SIGNATURE);
  const [a, b] = [frame.param(0), frame.param(1)];
  const [aLo, aHi, bLo, bHi, tmp, w1, w2] = Array.from({ length: 7 }, () => frame.add('i64'));
  const body = m.block(
    null,
    [
      m.local.set(aLo, m.i64.and(g(a), mask)),
      m.local.set(aHi, m.i64.shr_u(g(a), c(32n))),
      m.local.set(bLo, m.i64.and(g(b), mask)),
      m.local.set(bHi, m.i64.shr_u(g(b), c(32n))),
      // t = aHi*bLo + (aLo*bLo >> 32): fits in 64 bits
      m.local.set(tmp, m.i64.add(m.i64.mul(g(aHi), g(bLo)), m.i64.shr_u(m.i64.mul(g(aLo), g(bLo)), c(32n)))),
      m.local.set(w1, m.i64.and(g(tmp), mask)),
      m.local.set(w2, m.i64.shr_u(g(tmp), c(32n))),
      // t = aLo*bHi + w1
      m.local.set(tmp, m.i64.add(m.i64.mul(g(aLo), g(bHi)), g(w1))),
      m.i64.add(m.i64.add(m.i64.mul(g(aHi), g(bHi)), g(w2)), m.i64.shr_u(g(tmp), c(32n))),
    ],
    i64,
  );
  const two = signatureTypes(t, MUL_HELPER_SIGNATURE).params;
  m.addFunction(Names.mulhu, two, i64, frame.vars(t), body);
  // signed corrections: mulh = mulhu - (a<0 ? b : 0) - (b<0 ? a : 0); mulhsu drops the second term
  const neg = (k: number, other: number) => m.select(m.i64.lt_s(g(k), c(0n)), g(other), c(0n));
  m.addFunction(
    Names.mulh,
    two,
    i64,
    [],
    m.i64.sub(m.i64.sub(m.call(Names.mulhu, [g(a), g(b)], i64), neg(a, b)), neg(b, a)),
  );
  m.addFunction(Names.mulhsu, two, i64, [], m.i64.sub(m.call(Names.mulhu, [g(a), g(b)], i64), neg(a, b)));
}

/**
 * The functions every module of an image calls besides the guest functions, with their
 * signatures: the helpers of {@link addModuleBase} and the dispatcher. A module of the lazy tier
 * (lazy-image.ts) imports these from the module that defines them.
 */
export const SHARED_FUNCTIONS: readonly (readonly [string, Signature])[] = [
  [Names.trap, TRAP_HELPER_SIGNATURE],
  [Names.poll, POLL_HELPER_SIGNATURE],
  [Names.csr, CSR_HELPER_SIGNATURE],
  [Names.ecallHelper, ECALL_HELPER_SIGNATURE],
  [Names.mulhu, MUL_HELPER_SIGNATURE],
  [Names.mulh, MUL_HELPER_SIGNATURE],
  [Names.mulhsu, MUL_HELPER_SIGNATURE],
  [Names.dispatch, DISPATCH_SIGNATURE],
];

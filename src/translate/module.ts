/**
 * Whole-image translation: one Wasm function per guest function, the indirect-call dispatcher,
 * arithmetic helpers, entry stubs and the imports the engine provides (src/translate/abi.ts).
 */
import binaryen from 'binaryen';
import type { ElfImage } from '../elf/types.js';
import { relocationTargets } from '../elf/targets.js';
import {
  checkOptions,
  computeLayout,
  Exports,
  IMPORT_MODULE,
  Imports,
  STACK_GUARD,
  TrapKind,
  type GuestLayout,
  type TranslateOptions,
} from './abi.js';
import { decode } from '../riscv/decode.js';
import type { Instr } from '../riscv/instr.js';
import { analyseFunction, instructionBits } from './cfg.js';
import { emitFunction, functionName, Names, type EmitContext } from './emit.js';

/** Functions longer than this (in instructions) are not given to Binaryen's optimiser. */
export const MAX_OPTIMIZED_INSTRUCTIONS = 3000;

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
 * Translate a parsed image to a Wasm module.
 * @throws RangeError for bad options; Error when the image does not fit the memory layout.
 */
export function translate(image: ElfImage, opts: TranslateOptions): Translation {
  checkOptions(opts);
  const layout = computeLayout(image.imageStart, image.imageEnd, opts);
  const t0 = performance.now();
  const m = new binaryen.Module();
  try {
    m.setFeatures(
      binaryen.Features.MVP |
        binaryen.Features.MutableGlobals |
        binaryen.Features.SignExt |
        binaryen.Features.TailCall |
        binaryen.Features.Multivalue |
        binaryen.Features.BulkMemory |
        binaryen.Features.NontrappingFPToInt,
    );
    const i64 = binaryen.i64;
    const i32 = binaryen.i32;
    const pair = binaryen.createType([i64, i64]);
    const params = binaryen.createType(new Array(9).fill(i64));
    const pages = opts.memorySize / 65536;
    m.setMemory(pages, pages, null);
    m.addMemoryImport('0', IMPORT_MODULE, Imports.memory);
    m.addFunctionImport(
      Names.ecall,
      IMPORT_MODULE,
      Imports.ecall,
      binaryen.createType([i32, i32, i32, i32, i64, i64, i64, i64, i64, i64]),
      i64,
    );
    m.addFunctionImport(
      Names.trap,
      IMPORT_MODULE,
      Imports.trap,
      binaryen.createType([i32, i32, i64]),
      binaryen.none,
    );
    m.addFunctionImport(Names.poll, IMPORT_MODULE, Imports.poll, i32, i32);
    m.addFunctionImport(Names.csr, IMPORT_MODULE, Imports.csr, binaryen.createType([i32, i32]), i64);

    m.addGlobal(Names.gp, i64, true, m.i64.const(0n));
    m.addGlobal(Names.tp, i64, true, m.i64.const(0n));
    m.addGlobal(Names.a1, i64, true, m.i64.const(0n));
    m.addGlobal(Names.fuel, i32, true, m.i32.const(0));
    m.addGlobal(Names.resv, i64, true, m.i64.const(-1n));
    m.addGlobal(Names.dirtyLo, i32, true, m.i32.const(layout.size));
    m.addGlobal(Names.dirtyHi, i32, true, m.i32.const(0));
    m.addGlobalExport(Names.a1, Exports.a1);
    m.addGlobalExport(Names.dirtyLo, Exports.dirtyLo);
    m.addGlobalExport(Names.dirtyHi, Exports.dirtyHi);
    m.addGlobalExport(Names.fuel, Exports.fuel);

    addMulHelpers(m);

    const functionEntries = new Set(image.functions.map((f) => f.start));
    const named = relocationTargets(image).codeAddresses;
    const ctx: EmitContext = {
      m,
      base: layout.base,
      size: layout.size,
      stackLimit: layout.stackLimit,
      dirtySplit: layout.stackLimit - STACK_GUARD - layout.base,
      functionEntries,
      pair,
      params,
    };
    const exec = image.segments.filter((seg) => (seg.flags & 1) !== 0);
    const decodeAt = (address: number): Instr | null => {
      const seg = exec.find((x) => address >= x.vaddr && address < x.vaddr + x.filesz);
      const bits = seg ? instructionBits(seg.data, address - seg.vaddr) : null;
      return bits === null ? null : decode(bits);
    };
    const facts = { functionEntries, relocationTargets: named, decodeAt };
    const huge: string[] = [];
    for (const fn of image.functions) {
      const cfg = analyseFunction(readImage(image, fn.start, fn.size), fn.start, facts);
      emitFunction(ctx, cfg);
      let count = 0;
      for (const b of cfg.blocks.values()) count += b.instrs.length;
      if (count > MAX_OPTIMIZED_INSTRUCTIONS) huge.push(functionName(fn.start));
    }

    const indirectTargets = [...functionEntries].filter((a) => named.has(a)).sort((a, b) => a - b);
    addDispatcher(m, indirectTargets, pair);

    const gpValue = image.globalPointer ?? 0;
    const exported = new Set<string>();
    for (const fn of image.functions) {
      const isEntry = fn.start === image.entry;
      for (const name of fn.names) {
        if (exported.has(name) || !(fn.global || isEntry)) continue;
        exported.add(name);
        const stub = `entry_${fn.start.toString(16)}_${exported.size}`;
        const args = Array.from({ length: 8 }, (_, k) => m.local.get(k, i64));
        m.addFunction(
          stub,
          binaryen.createType(new Array(8).fill(i64)),
          pair,
          [],
          m.block(null, [
            m.global.set(Names.gp, m.i64.const(BigInt(gpValue))),
            m.global.set(Names.tp, m.i64.const(0n)),
            m.global.set(Names.resv, m.i64.const(-1n)),
            m.global.set(Names.fuel, m.i32.const(0)),
            m.return_call(functionName(fn.start), [m.i64.const(BigInt(layout.initialSp)), ...args], pair),
          ]),
        );
        m.addFunctionExport(stub, Exports.entryPrefix + name);
      }
    }

    if (!m.validate()) throw new Error('internal error: translated module failed validation');
    const t1 = performance.now();
    binaryen.setOptimizeLevel(opts.optimizeLevel);
    binaryen.setShrinkLevel(0);
    // names stay in the binary so trap backtraces can name guest functions
    binaryen.setDebugInfo(true);
    if (opts.optimizeLevel > 0 && huge.length === 0) m.optimize();
    else if (opts.optimizeLevel > 0) {
      // Binaryen's optimiser is superlinear in function size (10,000 instructions: ~11 s; 100,000:
      // ~11 min): with a huge function present, optimise the others one by one and leave it as is.
      const skip = new Set(huge);
      for (let i = 0; i < m.getNumFunctions(); i++) {
        const f = m.getFunctionByIndex(i);
        const info = binaryen.getFunctionInfo(f);
        if (!info.module && !skip.has(info.name)) m.optimizeFunction(f);
      }
    }
    const t2 = performance.now();
    const wasm = m.emitBinary();
    const t3 = performance.now();
    return { wasm, layout, indirectTargets, timings: { build: t1 - t0, optimize: t2 - t1, emit: t3 - t2 } };
  } finally {
    m.dispose();
  }
}

/**
 * `dispatch(pc, target, sp, a0..a7)`: a binary decision tree over the relocation-named function
 * entries, ending in a tail call; any other target traps BadIndirectTarget{target} at `pc`.
 */
function addDispatcher(m: binaryen.Module, targets: number[], pair: binaryen.Type): void {
  const i64 = binaryen.i64;
  const target = () => m.local.get(1, i64);
  const args = () => [2, 3, 4, 5, 6, 7, 8, 9, 10].map((k) => m.local.get(k, i64));
  // a fresh expression at every use: Binaryen expressions form a tree and must not be shared
  const bad = () =>
    m.block(null, [
      m.call(
        Names.trap,
        [m.i32.const(TrapKind.BadIndirectTarget), m.local.get(0, binaryen.i32), target()],
        binaryen.none,
      ),
      m.unreachable(),
    ]);
  const tree = (lo: number, hi: number): binaryen.ExpressionRef => {
    if (hi - lo <= 3) {
      let e = bad();
      for (let k = hi - 1; k >= lo; k--) {
        e = m.if(
          m.i64.eq(target(), m.i64.const(BigInt(targets[k]))),
          m.return_call(functionName(targets[k]), args(), pair),
          e,
        );
      }
      return e;
    }
    const mid = (lo + hi) >> 1;
    return m.if(m.i64.lt_u(target(), m.i64.const(BigInt(targets[mid]))), tree(lo, mid), tree(mid, hi));
  };
  const body = targets.length === 0 ? bad() : m.block(null, [tree(0, targets.length), m.unreachable()]);
  m.addFunction(
    Names.dispatch,
    binaryen.createType([binaryen.i32, ...new Array(10).fill(i64)]),
    pair,
    [],
    body,
  );
}

/** MULHU, MULH, MULHSU: the high 64 bits of 128-bit products from 32-bit partial products. */
function addMulHelpers(m: binaryen.Module): void {
  const i64 = binaryen.i64;
  const c = (v: bigint) => m.i64.const(v);
  const g = (k: number) => m.local.get(k, i64);
  const mask = c(0xffffffffn);
  // locals: 0 a, 1 b, 2 aLo, 3 aHi, 4 bLo, 5 bHi, 6 t, 7 w1, 8 w2
  const body = m.block(
    null,
    [
      m.local.set(2, m.i64.and(g(0), mask)),
      m.local.set(3, m.i64.shr_u(g(0), c(32n))),
      m.local.set(4, m.i64.and(g(1), mask)),
      m.local.set(5, m.i64.shr_u(g(1), c(32n))),
      // t = aHi*bLo + (aLo*bLo >> 32): fits in 64 bits
      m.local.set(6, m.i64.add(m.i64.mul(g(3), g(4)), m.i64.shr_u(m.i64.mul(g(2), g(4)), c(32n)))),
      m.local.set(7, m.i64.and(g(6), mask)),
      m.local.set(8, m.i64.shr_u(g(6), c(32n))),
      // t = aLo*bHi + w1
      m.local.set(6, m.i64.add(m.i64.mul(g(2), g(5)), g(7))),
      m.i64.add(m.i64.add(m.i64.mul(g(3), g(5)), g(8)), m.i64.shr_u(g(6), c(32n))),
    ],
    i64,
  );
  const two = binaryen.createType([i64, i64]);
  m.addFunction(Names.mulhu, two, i64, new Array(7).fill(i64), body);
  // signed corrections: mulh = mulhu - (a<0 ? b : 0) - (b<0 ? a : 0); mulhsu drops the second term
  const neg = (k: number, other: number) => m.select(m.i64.lt_s(g(k), c(0n)), g(other), c(0n));
  m.addFunction(
    Names.mulh,
    two,
    i64,
    [],
    m.i64.sub(m.i64.sub(m.call(Names.mulhu, [g(0), g(1)], i64), neg(0, 1)), neg(1, 0)),
  );
  m.addFunction(Names.mulhsu, two, i64, [], m.i64.sub(m.call(Names.mulhu, [g(0), g(1)], i64), neg(0, 1)));
}

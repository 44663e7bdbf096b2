/**
 * The lazy tier: an image translated one guest function at a time, when a call first reaches it,
 * instead of whole before the first call.
 *
 * The shell module holds what the whole-image module (image.ts) has besides the guest functions:
 * the imports, globals, helpers, the dispatcher and the entry stubs, plus a funcref table: one
 * slot per guest function, then the helpers and the dispatcher (SHARED_FUNCTIONS' order). In the
 * shell, the name of a guest function (`f_<hex>`) is a trampoline that tail calls the function's
 * slot; each slot starts out holding a stub that calls the engine's `lazy` import with the slot's
 * index (the engine translates the function into a module of its own and instantiates it against
 * this instance's shell, which puts its function in the slot) and then tail calls the slot. A
 * function module imports the memory, the shell's globals and its table, and reaches every other
 * function (guest functions, helpers, dispatcher) through trampolines of its own to their slots;
 * it exports nothing (an export would cost V8 a JS-to-Wasm wrapper per module), an active element
 * segment installs its function. Each function's code is what the baseline tier writes for it
 * (the same emitFunction, the same facts about the image), so fuel charges, polls and trap sites
 * are the baseline tier's: the trampolines and stubs charge nothing and leave by tail calls, so
 * they appear in no backtrace. This file must not import Binaryen at run time.
 */
import type { ElfImage } from '../elf/types.js';
import {
  IMPORT_MODULE,
  IMPORT_SIGNATURES,
  Imports,
  LazyAbi,
  memoryPages,
  SHARED_MEMORY,
  type GuestLayout,
  type TranslateOptions,
} from './abi.js';
import { ByteModule, Op } from './bytes.js';
import { emitFunction, functionName } from './emit.js';
import { signatureTypes } from './gen.js';
import {
  addDispatcher,
  addEntryStubs,
  addImports,
  addModuleBase,
  analyseGuestFunction,
  emitContext,
  failedFunction,
  imageFacts,
  moduleGlobals,
  SHARED_FUNCTIONS,
  type ImageFacts,
} from './image.js';
import { sleb32, T_UNREACHABLE } from './wasm-encoding.js';
import { uleb } from '../util/leb.js';

const { shellModule: SHELL_MODULE, lazyImport: LAZY_IMPORT, exportPrefix: LAZY_EXPORT_PREFIX } = LazyAbi;
const LAZY_TABLE_EXPORT = LazyAbi.tableExport;

/** A shell module's binary and what building it took. */
export interface LazyShell {
  wasm: Uint8Array;
  /** milliseconds to build the shell's nodes and to write its binary */
  timings: { build: number; optimize: number; emit: number };
}

/** `return_call_indirect` (tail-call proposal, 0x13) */
const RETURN_CALL_INDIRECT = 0x13;

/**
 * Translates one image lazily: the shell ({@link shell}) once, then any guest function by its
 * slot ({@link translateSlot}). Analysis facts about the whole image are gathered once, at
 * construction (a pass over the function list and the relocations, no decoding).
 */
export class LazyTranslator {
  private readonly facts: ImageFacts;
  /** the guest function in each table slot (one per distinct entry, in image order) */
  readonly slotFunctions: ElfImage['functions'][number][] = [];
  /** the table slot of each guest function entry */
  readonly slotOf = new Map<number, number>();

  constructor(
    readonly image: ElfImage,
    readonly layout: GuestLayout,
    readonly opts: TranslateOptions,
  ) {
    this.facts = imageFacts(image);
    for (const fn of image.functions) {
      if (this.slotOf.has(fn.start)) continue;
      this.slotOf.set(fn.start, this.slotFunctions.length);
      this.slotFunctions.push(fn);
    }
  }

  /**
   * The shell module: imports (with the `lazy` import), globals, helpers, one trampoline and one
   * slot stub per guest function, the dispatcher, the table and the entry stubs, exporting the
   * globals and the table for the function modules.
   */
  shell(): LazyShell {
    const t0 = performance.now();
    const m = new ByteModule();
    const t = m.types;
    addImports(m, t, this.opts);
    const lazySig = signatureTypes(t, IMPORT_SIGNATURES.ecall);
    m.addFunctionImport('imp_lazy', IMPORT_MODULE, LAZY_IMPORT, lazySig.params, lazySig.result);
    addModuleBase(m, t, this.layout, this.opts);
    for (const [name] of moduleGlobals(t, this.layout)) m.addGlobalExport(name, LAZY_EXPORT_PREFIX + name);
    const ctx = emitContext(m, t, { kind: 'direct', bytes: m }, this.layout, this.facts);
    const type = m.typeIndex(ctx.params, ctx.pair);
    const lazy = m.functionValue('imp_lazy');
    const stubs: string[] = [];
    this.slotFunctions.forEach((fn, k) => {
      m.addFunction(functionName(fn.start), ctx.params, ctx.pair, [], trampoline(m, k, type, 9));
      const stub = `lazy_${fn.start.toString(16)}`;
      // lazy(k, 0, 0, 0), dropped; then the slot, which now holds the translated function
      const head: number[] = [Op.i32_const];
      sleb32(head, k);
      head.push(Op.i32_const, 0, Op.i32_const, 0, Op.i32_const, 0, Op.call);
      uleb(head, lazy);
      head.push(Op.drop);
      m.addFunction(stub, ctx.params, ctx.pair, [], m.seq(T_UNREACHABLE, [head, trampoline(m, k, type, 9)]));
      stubs.push(stub);
    });
    const indirectTargets = [...this.facts.functionEntries]
      .filter((a) => this.facts.named.has(a))
      .sort((a, b) => a - b);
    addDispatcher(ctx.gen, indirectTargets, this.facts.entryCosts, ctx.pair, undefined);
    const shared = SHARED_FUNCTIONS.map(([name]) => name);
    m.setTable(stubs.length + shared.length);
    m.addElements(0, [...stubs, ...shared]);
    m.addTableExport(LAZY_TABLE_EXPORT);
    addEntryStubs(ctx, this.image, this.layout);
    const t1 = performance.now();
    const wasm = m.emitBinary();
    return { wasm, timings: { build: t1 - t0, optimize: 0, emit: performance.now() - t1 } };
  }

  /**
   * The module of the guest function in table slot `slot` and of the functions it calls directly,
   * transitively, that `translated` does not hold, up to `limit` functions (in breadth-first
   * order): the baseline tier's code for each, calls among them direct, calls to any other
   * function through trampolines to their slots. Active element segments install each function
   * in the imported table at its slot when the module is instantiated.
   * @param translated whether a slot's function is translated already (in an earlier module)
   * @returns the module and the slots it fills, `slot` first
   * @throws RangeError for a slot out of range; TranslateError naming the function whose analysis
   *   or emission failed
   */
  translateGroup(
    slot: number,
    translated: (slot: number) => boolean,
    limit: number,
  ): { wasm: Uint8Array; slots: number[] } {
    const first = this.slotFunctions[slot];
    if (first === undefined) throw new RangeError(`no guest function in slot ${slot}`);
    const slots = this.slotFunctions.length;
    const m = new ByteModule(first.size * 4);
    const t = m.types;
    const pages = memoryPages(this.opts.memorySize);
    m.setMemory(pages, pages, null, [], SHARED_MEMORY);
    m.addMemoryImport('0', IMPORT_MODULE, Imports.memory);
    for (const [name, type] of moduleGlobals(t, this.layout)) {
      m.addGlobalImport(name, SHELL_MODULE, LAZY_EXPORT_PREFIX + name, type, true);
    }
    m.addTableImport(SHELL_MODULE, LAZY_TABLE_EXPORT, slots + SHARED_FUNCTIONS.length);
    const ctx = emitContext(m, t, { kind: 'direct', bytes: m }, this.layout, this.facts);
    const group = [slot];
    const inGroup = new Set(group);
    // breadth first: each function emitted names its callees (ByteModule.unresolvedCalls)
    for (let next = 0; next < group.length; next++) {
      const fn = this.slotFunctions[group[next]];
      const seen = m.calledCount;
      const cfg = analyseGuestFunction(this.image, fn, this.facts);
      try {
        emitFunction(ctx, cfg);
      } catch (e) {
        throw failedFunction(this.image, fn, e);
      }
      for (const name of m.unresolvedCalls(seen)) {
        const callee = /^f_([0-9a-f]+)$/.exec(name);
        const k = callee === null ? undefined : this.slotOf.get(parseInt(callee[1], 16));
        if (k === undefined || inGroup.has(k) || translated(k) || group.length >= limit) continue;
        group.push(k);
        inGroup.add(k);
      }
    }
    const guest = m.typeIndex(ctx.params, ctx.pair);
    for (const name of m.unresolvedCalls()) {
      const shared = SHARED_FUNCTIONS.findIndex(([n]) => n === name);
      if (shared >= 0) {
        const sig = signatureTypes(t, SHARED_FUNCTIONS[shared][1]);
        const type = m.typeIndex(sig.params, sig.result);
        const body = trampoline(m, slots + shared, type, SHARED_FUNCTIONS[shared][1].params.length);
        m.addFunction(name, sig.params, sig.result, [], body);
        continue;
      }
      const callee = /^f_([0-9a-f]+)$/.exec(name);
      const k = callee === null ? undefined : this.slotOf.get(parseInt(callee[1], 16));
      if (k === undefined)
        throw failedFunction(this.image, first, new Error(`call to unknown function ${name}`));
      m.addFunction(name, ctx.params, ctx.pair, [], trampoline(m, k, guest, 9));
    }
    for (const k of group) m.addElements(k, [functionName(this.slotFunctions[k].start)]);
    return { wasm: m.emitBinary(), slots: group };
  }
}

/**
 * The body of a trampoline: `return_call_indirect type` of table 0's entry `slot` with the
 * function's `params` parameters.
 */
function trampoline(m: ByteModule, slot: number, type: number, params: number): number {
  const code: number[] = [];
  for (let k = 0; k < params; k++) code.push(Op.local_get, k);
  code.push(Op.i32_const);
  sleb32(code, slot);
  code.push(RETURN_CALL_INDIRECT);
  uleb(code, type);
  code.push(0x00);
  return m.seq(T_UNREACHABLE, [code]);
}

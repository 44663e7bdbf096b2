/**
 * Guest code beside the WebAssembly it became: each RISC-V instruction of a guest function (the
 * `berm disasm` text) with the lines of WAT its baseline-tier code printed as, and the function's
 * whole WAT. The WAT is printed by wabt (an implementation independent of the translator and of
 * Binaryen). Lining up: the baseline translator, when asked (translateBaseline's `listing`),
 * records where in each function body every guest instruction's code begins; wasm-code.ts turns
 * those byte offsets into instruction indices, and wabt's unfolded text prints one instruction per
 * line, so instruction k of a body is line k after the function's header and locals.
 */
import { createRequire } from 'node:module';
import type { ElfImage, GuestFunction } from '../elf/types.js';
import { codeBytes, codeSymbolizer, functionAt } from '../elf/code.js';
import { disassembleRange } from '../riscv/disasm.js';
import { DEFAULT_TRANSLATE_OPTIONS, type TranslateOptions } from './abi.js';
import { translateBaseline, type ListedTranslation } from './baseline.js';
import { functionName } from './emit.js';
import {
  functionBodies,
  functionNames,
  instructionStarts,
  keepBodies,
  sections,
  WasmReadError,
  type FunctionBody,
  type WasmSection,
} from './wasm-code.js';

/** The wasm features berm's modules use beyond the MVP, as wabt names them (read and validate). */
export const WABT_FEATURES = { tail_call: true, threads: true } as const;

/** The part of wabt's module API berm uses (its typings omit validate's feature argument). */
export interface WabtModule {
  validate(features?: typeof WABT_FEATURES): void;
  generateNames(): void;
  applyNames(): void;
  /** resolve `$name` references to indices (a parsed text module, before validate) */
  resolveNames(): void;
  toText(options: { foldExprs?: boolean; inlineExport?: boolean }): string;
  destroy(): void;
}

/** The wabt entry points berm uses. */
export interface Wabt {
  readWasm(buffer: Uint8Array, options: { readDebugNames?: boolean } & typeof WABT_FEATURES): WabtModule;
  parseWat(filename: string, text: string, features?: typeof WABT_FEATURES): WabtModule;
}

let wabtLoad: Promise<Wabt> | null = null;
/** wabt, loaded on first use (its Wasm build takes ~0.1 s to start); a CommonJS package, required. */
export function loadWabt(): Promise<Wabt> {
  wabtLoad ??= (createRequire(import.meta.url)('wabt') as () => Promise<unknown>)() as Promise<Wabt>;
  return wabtLoad;
}

/**
 * Validate a Wasm binary with wabt (the features berm uses enabled).
 * @throws Error with wabt's messages when the module is invalid
 */
export async function validateWithWabt(wasm: Uint8Array): Promise<void> {
  const wabt = await loadWabt();
  // wabt reads a Uint8Array of its own (a view into a larger buffer is misread)
  const m = wabt.readWasm(new Uint8Array(wasm), { readDebugNames: false, ...WABT_FEATURES });
  try {
    m.validate(WABT_FEATURES);
  } finally {
    m.destroy();
  }
}

/** One guest instruction with the WAT lines of its code. */
export interface ListingRow {
  /** guest address */
  pc: number;
  /** the encoding as llvm-objdump shows it: 4 (compressed) or 8 lowercase hex digits */
  hex: string;
  /** `berm disasm`'s text (llvm-objdump -d -M no-aliases) */
  asm: string;
  /**
   * the WAT lines of the code emitted for it, in code order, indented by block depth; the
   * function entry's lines (block structure, stack check) go with the first instruction of the
   * body, the code a block's end needs (its branch) with the block's last instruction; empty when
   * the instruction became no code of its own or is unreachable (not translated)
   */
  wat: string[];
}

/** A guest function's listing. */
export interface FunctionListing {
  name: string;
  /** guest address of its entry */
  pc: number;
  /** bytes */
  size: number;
  rows: ListingRow[];
  /** the function's whole WAT as wabt prints it (`(func $f_<hex> ...)`), empty if not translated */
  wat: string;
}

/** The listing of one translated image (translated once; functions printed on request). */
export class CodeListing {
  private readonly secs: WasmSection[];
  private readonly bodies = new Map<string, FunctionBody>();

  private constructor(
    readonly image: ElfImage,
    private readonly translation: ListedTranslation,
    private readonly wabt: Wabt,
  ) {
    const wasm = translation.wasm;
    this.secs = sections(wasm);
    const names = functionNames(wasm, this.secs);
    for (const b of functionBodies(wasm, this.secs)) {
      const n = names.get(b.index);
      if (n !== undefined) this.bodies.set(n, b);
    }
  }

  /**
   * Translate `image` with the baseline tier, recording where each instruction's code is.
   * @throws what translateBaseline throws (LayoutError, TranslateError, RangeError)
   */
  static async build(
    image: ElfImage,
    opts: TranslateOptions = DEFAULT_TRANSLATE_OPTIONS,
  ): Promise<CodeListing> {
    const wabt = await loadWabt();
    return new CodeListing(image, translateBaseline(image, opts, true), wabt);
  }

  /** The translated module. */
  get wasm(): Uint8Array {
    return this.translation.wasm;
  }

  /** The image's functions, sorted by address. */
  get functions(): readonly GuestFunction[] {
    return this.image.functions;
  }

  /** The function named `name` (any of its aliases), or null. */
  find(name: string): GuestFunction | null {
    return this.image.functions.find((f) => f.names.includes(name)) ?? null;
  }

  /** The function containing guest address `pc`, or null. */
  at(pc: number): GuestFunction | null {
    return functionAt(this.image.functions, pc);
  }

  /**
   * The listings of `fns`, printed by one wabt call (all functions of a big image at once cost
   * about as much as printing its whole module).
   * @throws WasmReadError when wabt's text does not line up with the binary (one line per
   *   instruction): a bug, never the guest's doing
   */
  list(fns: readonly GuestFunction[]): FunctionListing[] {
    const wanted = new Map<string, FunctionBody>();
    for (const f of fns) {
      const b = this.bodies.get(functionName(f.start));
      if (b) wanted.set(functionName(f.start), b);
    }
    const texts = this.functionTexts(wanted);
    const symbolize = codeSymbolizer(this.image);
    return fns.map((f) => {
      const wasmName = functionName(f.start);
      const body = wanted.get(wasmName);
      const lines = texts.get(wasmName) ?? [];
      const bytes = codeBytes(this.image, f.start, f.size);
      const rows: ListingRow[] = (bytes ? disassembleRange(bytes, f.start, symbolize) : []).map((l) => ({
        pc: l.address,
        hex: encodingHex(bytes!, l.address - f.start, l.size),
        asm: l.text,
        wat: [],
      }));
      if (body !== undefined && lines.length > 0) this.align(wasmName, body, lines, rows);
      return { name: f.name, pc: f.start, size: f.size, rows, wat: lines.join('\n') };
    });
  }

  /** Fill `rows[].wat` from the function's text `lines` and the recorded pc offsets. */
  private align(wasmName: string, body: FunctionBody, lines: string[], rows: ListingRow[]): void {
    const starts = instructionStarts(this.translation.wasm, body);
    // header, then `(local ...)` lines, then one line per instruction but the final `end`
    let first = 1;
    while (first < lines.length && lines[first].startsWith('  (local ')) first++;
    const count = lines.length - first;
    if (count !== starts.length - 1) {
      throw new WasmReadError(
        `${wasmName}: wabt printed ${count} instruction lines for ${starts.length - 1} instructions`,
      );
    }
    const marks = (this.translation.pcOffsets.get(wasmName) ?? []).map(([pc, off]) => {
      // the first instruction starting at or after the offset (an offset is an instruction start)
      let lo = 0;
      let hi = starts.length - 1;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (starts[mid] < off) lo = mid + 1;
        else hi = mid;
      }
      return { pc, index: lo };
    });
    marks.sort((a, b) => a.index - b.index);
    const byPc = new Map(rows.map((r) => [r.pc, r]));
    for (let k = 0; k < marks.length; k++) {
      const from = k === 0 ? 0 : marks[k].index;
      const to = k + 1 < marks.length ? marks[k + 1].index : count;
      const row = byPc.get(marks[k].pc);
      if (!row) continue;
      for (let i = from; i < to; i++) {
        let line = lines[first + i].slice(2);
        // the last instruction's line also closes the function
        if (first + i === lines.length - 1 && line.endsWith(')')) line = line.slice(0, -1);
        row.wat.push(line);
      }
    }
  }

  /**
   * The translated module as WAT (wabt's text, names from the name section), with the bodies of
   * the functions not in `fns` replaced by `unreachable` (all of them kept by default): a whole
   * module that wabt's own parser reads back.
   */
  moduleText(fns: readonly GuestFunction[] = this.image.functions): string {
    const wanted = new Map<string, FunctionBody>();
    for (const f of fns) {
      const b = this.bodies.get(functionName(f.start));
      if (b) wanted.set(functionName(f.start), b);
    }
    return this.print(wanted);
  }

  /** wabt's text of the module with only `wanted`'s bodies (all when it holds every function). */
  private print(wanted: Map<string, FunctionBody>): string {
    const wasm =
      wanted.size === this.bodies.size
        ? this.translation.wasm
        : keepBodies(this.translation.wasm, new Set([...wanted.values()].map((b) => b.index)), this.secs);
    const m = this.wabt.readWasm(new Uint8Array(wasm), { readDebugNames: true, ...WABT_FEATURES });
    let text: string;
    try {
      // names from the name section for calls too, generated ones ($l3, $g4, $t1) for the rest
      m.generateNames();
      m.applyNames();
      text = m.toText({ foldExprs: false, inlineExport: false });
    } finally {
      m.destroy();
    }
    return text;
  }

  /** The WAT lines of each function in `wanted` (by Wasm name), from one wabt print. */
  private functionTexts(wanted: Map<string, FunctionBody>): Map<string, string[]> {
    const out = new Map<string, string[]>();
    if (wanted.size === 0) return out;
    const lines = this.print(wanted).split('\n');
    for (let i = 0; i < lines.length; i++) {
      const l = lines[i];
      if (!l.startsWith('  (func $')) continue;
      const name = l.slice(9, l.indexOf(' ', 9) < 0 ? l.length : l.indexOf(' ', 9));
      if (!wanted.has(name)) continue;
      let j = i + 1;
      while (j < lines.length && !lines[j].startsWith('  (')) j++;
      // (the module's indentation of its fields removed)
      out.set(
        name,
        lines.slice(i, j).map((x) => x.slice(2)),
      );
      i = j - 1;
    }
    return out;
  }
}

/** The encoding of the instruction at `bytes[at]` of `size` bytes, as llvm-objdump prints it. */
function encodingHex(bytes: Uint8Array, at: number, size: number): string {
  let v = 0;
  for (let k = Math.min(size, bytes.length - at) - 1; k >= 0; k--) v = v * 256 + bytes[at + k];
  return v.toString(16).padStart(size * 2, '0');
}

/**
 * Branch hints for an emitted module: a `metadata.code.branch_hint` custom section (WebAssembly
 * branch hinting proposal, "Binary format") marking as unlikely every `if` whose then-arm calls
 * the `poll` or `trap` import or the module's helper for it (the fuel slice running out, a fault). V8 then places that arm in
 * deferred code, and its register allocator saves the values live across the arm's call inside
 * the arm instead of at their definitions on every iteration of the loop around it. A V8 that
 * does not read the section ignores it (a custom section has no effect on semantics).
 */
import { BRANCH_HINT_SECTION, unlikelyHintsContent } from '../util/branch-hints.js';
import { readUleb32, uleb } from '../util/leb.js';
import { IMPORT_MODULE, Imports } from './abi.js';

/** Name of the custom section (branch hinting proposal). */
export { BRANCH_HINT_SECTION };

/** A malformed module: hints are skipped (thrown inside this module only). */
class Malformed extends Error {}

class Reader {
  constructor(
    readonly b: Uint8Array,
    public p: number,
  ) {}
  u32(): number {
    const r = readUleb32(this.b, this.p);
    if (r === null) throw new Malformed();
    this.p = r[1];
    return r[0];
  }
  byte(): number {
    if (this.p >= this.b.length) throw new Malformed();
    return this.b[this.p++];
  }
  /** skip a signed LEB128 of any width */
  sleb(): void {
    while (this.byte() & 0x80);
  }
  name(): string {
    const n = this.u32();
    const s = Buffer.from(this.b.subarray(this.p, this.p + n)).toString('utf8');
    this.p += n;
    return s;
  }
}

/**
 * The offsets (from the start of the function body, its locals declarations) of the `if`s in one
 * body whose then-arm (up to its `else` or `end`) calls one of `cold` directly.
 * Decodes the instructions this translator emits (MVP, sign extension, tail calls, multi-value,
 * bulk memory, non-trapping conversions); throws Malformed on anything else.
 */
function coldIfs(b: Uint8Array, start: number, end: number, cold: ReadonlySet<number>): number[] {
  const r = new Reader(b, start);
  const groups = r.u32();
  for (let i = 0; i < groups; i++) {
    r.u32();
    r.byte();
  }
  const out: number[] = [];
  // per open structure: the offset of its `if` while still in the then-arm, else -1
  const open: number[] = [];
  const hinted = new Set<number>();
  const blockType = (): void => {
    const x = b[r.p];
    if (x === 0x40 || (x >= 0x6f && x <= 0x7f)) r.p++;
    else r.sleb();
  };
  while (r.p < end) {
    const at = r.p;
    const op = r.byte();
    switch (op) {
      case 0x02:
      case 0x03:
        blockType();
        open.push(-1);
        break;
      case 0x04:
        blockType();
        open.push(at - start);
        break;
      case 0x05:
        if (open.length === 0) throw new Malformed();
        open[open.length - 1] = -1;
        break;
      case 0x0b:
        open.pop();
        break;
      case 0x0c:
      case 0x0d:
      case 0x20:
      case 0x21:
      case 0x22:
      case 0x23:
      case 0x24:
      case 0x25:
      case 0x26:
      case 0xd2:
        r.u32();
        break;
      case 0x0e: {
        const n = r.u32();
        for (let i = 0; i <= n; i++) r.u32();
        break;
      }
      case 0x10:
      case 0x12: {
        const f = r.u32();
        if (op === 0x10 && cold.has(f)) {
          // the innermost if whose then-arm this is (structures nested inside the arm count too)
          for (let k = open.length - 1; k >= 0; k--) {
            if (open[k] >= 0) {
              if (!hinted.has(open[k])) {
                hinted.add(open[k]);
                out.push(open[k]);
              }
              break;
            }
          }
        }
        break;
      }
      case 0x11:
      case 0x13:
        r.u32();
        r.u32();
        break;
      case 0x1c: {
        const n = r.u32();
        for (let i = 0; i < n; i++) r.byte();
        break;
      }
      case 0x3f:
      case 0x40:
      case 0xd0:
        r.byte();
        break;
      case 0x41:
      case 0x42:
        r.sleb();
        break;
      case 0x43:
        r.p += 4;
        break;
      case 0x44:
        r.p += 8;
        break;
      case 0xfc: {
        const sub = r.u32();
        if (sub <= 7) break;
        if (sub === 8 || sub === 12 || sub === 14) {
          r.u32();
          r.u32();
        } else if (sub === 10) {
          r.byte();
          r.byte();
        } else if (sub === 11) r.byte();
        else if (sub <= 17) r.u32();
        else throw new Malformed();
        break;
      }
      default:
        if (op >= 0x28 && op <= 0x3e) {
          r.u32();
          r.u32();
        } else if (!(
          op <= 0x01 ||
          op === 0x0f ||
          op === 0x1a ||
          op === 0x1b ||
          op === 0xd1 ||
          (op >= 0x45 && op <= 0xc4)
        )) {
          throw new Malformed();
        }
    }
  }
  if (r.p !== end) throw new Malformed();
  return out.sort((x, y) => x - y);
}

/**
 * The types of the module's trap and poll helpers (src/translate/image.ts addImportHelpers), as
 * `params>results` in value type bytes: trap(i32, i32, i64) and poll(i32) -> i32. Translated code
 * calls the imports through them, so an arm calling one is as cold as one calling the import. No
 * other function of a translated module has either type (guest functions, entry stubs and the
 * other helpers take i64 registers and return pairs or i64).
 */
const COLD_HELPER_TYPES = new Set(['127,127,126>', '127>127']);

/**
 * `wasm` with a branch hint section (inserted before the code section) marking the cold `if`s
 * of every function unlikely; `wasm` itself when it has no such `if`, no code section, or bytes
 * this reader does not decode (the module is then left as it was: hints are an optimisation).
 */
export function addBranchHints(wasm: Uint8Array): Uint8Array {
  try {
    const r = new Reader(wasm, 8);
    const cold = new Set<number>();
    const coldTypes = new Set<number>();
    const coldDefined: number[] = [];
    let imported = 0;
    let funcs: { index: number; hints: number[] }[] = [];
    let codeAt = -1;
    while (r.p < wasm.length) {
      const sectionAt = r.p;
      const id = r.byte();
      const size = r.u32();
      const bodyAt = r.p;
      if (id === 1) {
        // function types: those of the trap and poll helpers mark them (see COLD_HELPER_TYPES)
        const n = r.u32();
        for (let i = 0; i < n; i++) {
          if (r.byte() !== 0x60) throw new Malformed();
          const params = Array.from({ length: r.u32() }, () => r.byte());
          const results = Array.from({ length: r.u32() }, () => r.byte());
          const shape = `${params.join(',')}>${results.join(',')}`;
          if (COLD_HELPER_TYPES.has(shape)) coldTypes.add(i);
        }
      } else if (id === 3) {
        const n = r.u32();
        for (let i = 0; i < n; i++) if (coldTypes.has(r.u32())) coldDefined.push(i);
      } else if (id === 2) {
        const n = r.u32();
        for (let i = 0; i < n; i++) {
          const mod = r.name();
          const field = r.name();
          const kind = r.byte();
          if (kind === 0) {
            if (mod === IMPORT_MODULE && (field === Imports.poll || field === Imports.trap))
              cold.add(imported);
            imported++;
            r.u32();
          } else if (kind === 1) {
            r.byte();
            const flags = r.u32();
            r.u32();
            if (flags & 1) r.u32();
          } else if (kind === 2) {
            const flags = r.u32();
            r.u32();
            if (flags & 1) r.u32();
          } else if (kind === 3) {
            r.byte();
            r.byte();
          } else throw new Malformed();
        }
      } else if (id === 10) {
        // the helpers are numbered after the imports (the function section precedes this one)
        for (const i of coldDefined) cold.add(imported + i);
        codeAt = sectionAt;
        const n = r.u32();
        funcs = [];
        for (let i = 0; i < n; i++) {
          const len = r.u32();
          const hints = cold.size === 0 ? [] : coldIfs(wasm, r.p, r.p + len, cold);
          if (hints.length > 0) funcs.push({ index: imported + i, hints });
          r.p += len;
        }
      } else if (id === 0 && r.name() === BRANCH_HINT_SECTION) {
        return wasm; // hinted already
      }
      r.p = bodyAt + size;
    }
    if (codeAt < 0 || funcs.length === 0) return wasm;
    const content = unlikelyHintsContent(funcs.map((f) => ({ index: f.index, offsets: f.hints })));
    const head: number[] = [0];
    uleb(head, content.length);
    const out = new Uint8Array(wasm.length + head.length + content.length);
    out.set(wasm.subarray(0, codeAt), 0);
    out.set(head, codeAt);
    out.set(content, codeAt + head.length);
    out.set(wasm.subarray(codeAt), codeAt + head.length + content.length);
    return out;
  } catch (e) {
    if (e instanceof Malformed) return wasm;
    throw e;
  }
}

/**
 * Instrumentation of a Wasm harness image before it is compiled: the limits a translated ELF
 * obeys, added to a module written for the harness ABI (src/wasm/reader.ts).
 *
 * - Fuel and interrupts. Fuel is charged at the entry of every function with the number of the
 *   function's instructions outside any loop, and at the head of every loop with the number of
 *   instructions directly inside that loop (a nested loop charges its own). Between functions the
 *   count lives in a mutable i32 global; inside one it lives in a local of its own (a register to
 *   V8): loaded from the global at entry, stored back before every call of guest code (the callee
 *   charges the global) and loaded again after it, and stored back before the function is left
 *   (`return`, a branch to the body's own label, a tail call, the final `end`). Calls of
 *   `berm.syscall` do not touch it. When the counter goes negative, a helper asks the host for
 *   the next slice through `berm.syscall` with the number {@link POLL_CALL} and the original
 *   offset of the charging site, and returns the counter plus the slice: the host checks the
 *   interrupt flag, the deadline and the budget there, exactly as the translator's poll does for
 *   ELF code, and traps when one has run out. A guest that loops or recurses for ever is
 *   therefore stopped within a slice. Each charge's `if` is hinted unlikely (the branch hinting
 *   section {@link BRANCH_HINT_SECTION}), so V8 puts the helper call out of the loop's way.
 * - Memory. The module's own memory becomes an import ({@link MEMORY_IMPORT}) of the same limits,
 *   its maximum set to the configured limit when the module declares none (a declared maximum
 *   above it was refused by the reader): the host makes a memory of those limits for an instance,
 *   or hands it one an earlier instance left at its initial size, zeroed, which its data segments
 *   then fill as they would a new one (a memory is the most expensive part of an instance to make
 *   in V8). Every `memory.grow` goes through
 *   a helper that, when the growth fails, tells the host (number {@link GROW_CALL}, the pages
 *   asked for, the site's offset): growing past the configured limit is a trap with a clear
 *   message, while a failure under it (the guest's own smaller maximum) stays the -1 the spec
 *   gives.
 *
 * Nothing is renumbered: the helpers, their types, the fuel global and each function's counter
 * local are appended after the module's own, and the one memory keeps index 0 as an import, so every function, type, global
 * and memory index keeps its meaning (and the `name`
 * section stays true). The instrumented module carries the custom section {@link MAP_SECTION}
 * mapping its code offsets back to the original's, so a trap V8 reports names the guest's own
 * offset.
 */
import { BRANCH_HINT_SECTION, unlikelyHintsContent } from '../util/branch-hints.js';
import { fnv1a64 } from '../util/fnv.js';
import { sleb64, uleb } from '../util/leb.js';
import { Cursor, WasmImageError } from './cursor.js';
import { I32, WASM_PAGE, type WasmHarnessImage } from './reader.js';

/** The host-call number the fuel helper polls with (never a capability's). */
export const POLL_CALL = fnv1a64('berm.engine.poll');
/** The host-call number the grow helper reports a failed `memory.grow` with. */
export const GROW_CALL = fnv1a64('berm.engine.grow');

/** The custom section of branch hints (the branch hinting proposal's binary format). */
export { BRANCH_HINT_SECTION };

/** The custom section holding the code offset map of an instrumented module. */
export const MAP_SECTION = 'berm.offset-map';

/** Bumped whenever the instrumented output changes: part of the cache key. */
export const INSTRUMENT_VERSION = 3;

/**
 * The import the module's memory becomes: the host hands each instance a memory of the module's
 * own limits (src/engine/wasm-slot.ts), zeroed, so a memory can be reused by the next instance.
 */
export const MEMORY_IMPORT = { module: 'berm', name: 'memory' } as const;

/**
 * The limits of the memory an instance of the instrumented module imports, in pages: the module's
 * initial size, and its maximum or, when it declares none, the configured limit.
 */
export function memoryLimits(
  image: WasmHarnessImage,
  memoryLimit: number,
): { initial: number; maximum: number } {
  const mem = image.info.memory!;
  return { initial: mem.min, maximum: mem.max ?? Math.floor(memoryLimit / WASM_PAGE) };
}

/** The single-byte block types: empty and the value types. */
const SHORT_BLOCK_TYPES = new Set([0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f]);

/** Skip a block type: one byte, or a type index as a signed LEB128. */
function skipBlockType(c: Cursor): void {
  const b = c.data[c.pos];
  if (b !== undefined && SHORT_BLOCK_TYPES.has(b)) c.pos++;
  else c.s64('block type');
}

/** Skip a memory argument (alignment, with a memory index when bit 6 is set, and offset). */
function skipMemarg(c: Cursor): void {
  const align = c.u32('alignment');
  if (align & 0x40) c.u32('memory index');
  c.u32('offset');
}

/** One decoded instruction: its opcode and where it lies. */
interface Instr {
  op: number;
  start: number;
  /** offset just past its immediates */
  end: number;
}

function unsupported(what: string, at: number): WasmImageError {
  return new WasmImageError(
    `the module uses ${what} (at offset ${at}), which berm does not run in Wasm harnesses: build without it ` +
      `(clang: no -msimd128, -matomics or -fwasm-exceptions)`,
  );
}

/**
 * Decode the instructions of one function body from `c.pos` to the body's end.
 * @throws WasmImageError for an instruction outside the supported set (SIMD, atomics, exceptions)
 */
function decodeBody(c: Cursor): Instr[] {
  const out: Instr[] = [];
  while (!c.done()) {
    const start = c.pos;
    const op = c.u8('instruction');
    if (op <= 0x01 || op === 0x05 || op === 0x0b || op === 0x0f || op === 0x1a || op === 0x1b) {
      // unreachable, nop, else, end, return, drop, select
    } else if (op >= 0x02 && op <= 0x04) skipBlockType(c);
    else if (op === 0x0c || op === 0x0d || op === 0x10 || op === 0x12) c.u32('index');
    else if (op === 0x0e) {
      const n = c.u32('branch table length');
      for (let i = 0; i <= n; i++) c.u32('branch label');
    } else if (op === 0x11 || op === 0x13) {
      c.u32('type index');
      c.u32('table index');
    } else if (op === 0x1c) {
      const n = c.u32('select types');
      for (let i = 0; i < n; i++) c.u8('value type');
    } else if (op >= 0x20 && op <= 0x26) c.u32('index');
    else if (op >= 0x28 && op <= 0x3e) skipMemarg(c);
    else if (op === 0x3f || op === 0x40) c.u32('memory index');
    else if (op === 0x41 || op === 0x42) c.s64('constant');
    else if (op === 0x43) c.bytes(4, 'f32 constant');
    else if (op === 0x44) c.bytes(8, 'f64 constant');
    else if (op >= 0x45 && op <= 0xc4) {
      // numeric instructions without immediates (MVP and sign extension)
    } else if (op === 0xd0) c.u8('reference type');
    else if (op === 0xd1) {
      // ref.is_null
    } else if (op === 0xd2) c.u32('function index');
    else if (op === 0xfc) {
      const sub = c.u32('0xfc opcode');
      if (sub <= 7) {
        // saturating truncations
      } else if (sub === 8) {
        c.u32('data index');
        c.u32('memory index');
      } else if (sub === 9 || sub === 13 || sub === 15 || sub === 16 || sub === 17) c.u32('index');
      else if (sub === 10 || sub === 12 || sub === 14) {
        c.u32('index');
        c.u32('index');
      } else if (sub === 11) c.u32('memory index');
      else throw unsupported(`the instruction 0xfc ${sub}`, start);
    } else if (op === 0xfd) throw unsupported('SIMD instructions', start);
    else if (op === 0xfe) throw unsupported('atomic instructions', start);
    else if ((op >= 0x06 && op <= 0x09) || op === 0x18 || op === 0x19)
      throw unsupported('exception handling', start);
    else throw unsupported(`the opcode 0x${op.toString(16)}`, start);
    out.push({ op, start, end: c.pos });
  }
  return out;
}

/**
 * The charge sequence on the function's counter (a local): counter -= cost; if counter < 0,
 * counter = refuel(counter, site). The offset of its `if` in the body is added to `cold`.
 */
function charge(
  out: number[],
  counter: number,
  refuel: number,
  cost: number,
  site: number,
  cold: number[],
): void {
  out.push(0x20);
  uleb(out, counter);
  out.push(0x41);
  sleb64(out, BigInt(cost));
  out.push(0x6b, 0x22);
  uleb(out, counter);
  out.push(0x41, 0x00, 0x48);
  cold.push(out.length);
  out.push(0x04, 0x40, 0x20);
  uleb(out, counter);
  out.push(0x41);
  sleb64(out, BigInt(site));
  out.push(0x10);
  uleb(out, refuel);
  out.push(0x21);
  uleb(out, counter);
  out.push(0x0b);
}

/** `bytes` as a section with id `id`. */
function section(id: number, content: number[] | Uint8Array): Uint8Array {
  const head: number[] = [id];
  uleb(head, content.length);
  const out = new Uint8Array(head.length + content.length);
  out.set(head);
  out.set(content, head.length);
  return out;
}

/** The count of a vector section grown by `extra` entries (appended after the originals), as LEB128. */
function extendVector(bytes: Uint8Array, s: { contentStart: number; end: number }, extra: number): number[] {
  const c = new Cursor(bytes, s.contentStart, s.end);
  const n = c.u32('count');
  const out: number[] = [];
  uleb(out, n + extra);
  return out;
}

/** The order of the known sections in a module (core spec, 5.5.2), by section id. */
const ORDER: Record<number, number> = {
  1: 1,
  2: 2,
  3: 3,
  4: 4,
  5: 5,
  13: 6,
  6: 7,
  7: 8,
  8: 9,
  9: 10,
  12: 11,
  10: 12,
  11: 13,
};

/** The offset map of an instrumented module: runs of copied code, instrumented offset → original. */
export interface OffsetMap {
  /** module offsets in the instrumented module where a run of original code starts, ascending */
  out: number[];
  /** the original module offset of each run's first byte */
  orig: number[];
}

/** The original offset of instrumented offset `x`, or -1 when it precedes every run. */
export function originalOffset(map: OffsetMap, x: number): number {
  let lo = 0;
  let hi = map.out.length - 1;
  let best = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (map.out[mid]! <= x) {
      best = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return best < 0 ? -1 : map.orig[best]! + (x - map.out[best]!);
}

/**
 * Instrument a checked harness module (see the module comment).
 * @param memoryLimit the configured memory limit, bytes (the maximum given a module without one)
 * @returns the instrumented module, its custom map section included
 * @throws WasmImageError for code the instrumentation does not support (SIMD, atomics, exceptions)
 */
export function instrument(bytes: Uint8Array, image: WasmHarnessImage, memoryLimit: number): Uint8Array {
  const { info } = image;
  const fuel = info.definedGlobals; // no imported globals: the reader refused them
  const refuel = info.importedFunctions + info.functionTypes.length;
  const grow = refuel + 1;
  const refuelType = info.types.length;
  const growType = refuelType + 1;
  const syscall = 0; // the one import

  // bodies, each with the runs of original code it copies (offsets relative to the code section's content)
  const code: number[] = [];
  uleb(code, info.bodies.length + 2);
  const runs: { out: number; orig: number }[] = [];
  // per function with a cold `if`: its index and the offsets of those `if`s (branch hints)
  const hints: { index: number; offsets: number[] }[] = [];
  for (const body of info.bodies) {
    const c = new Cursor(bytes, body.bodyStart, body.end);
    const groups = c.u32('local declarations');
    const declsStart = c.pos;
    const type = info.types[info.functionTypes[body.index - info.importedFunctions]!]!;
    let locals = type.params.length;
    for (let i = 0; i < groups; i++) {
      locals += c.u32('local count');
      c.u8('local type');
    }
    const localsEnd = c.pos;
    const instrs = decodeBody(c);
    // cost of each loop (by the index of its `loop`) and of the function outside loops
    const cost = new Map<number, number>();
    // per open block: the index of the innermost loop around its contents, or -1
    const inner: number[] = [];
    let entryCost = 0;
    for (let i = 0; i < instrs.length; i++) {
      const op = instrs[i]!.op;
      const loop = inner.length > 0 ? inner[inner.length - 1]! : -1;
      if (loop < 0) entryCost++;
      else cost.set(loop, (cost.get(loop) ?? 0) + 1);
      if (op >= 0x02 && op <= 0x04) inner.push(op === 0x03 ? i : loop);
      else if (op === 0x0b) inner.pop();
    }
    // the function's fuel counter: one more i32 local, after the module's own
    const counter = locals;
    const out: number[] = [];
    uleb(out, groups + 1);
    out.push(...bytes.subarray(declsStart, localsEnd), 0x01, I32);
    const cold: number[] = [];
    const fnRuns: { out: number; orig: number }[] = [];
    const load = () => {
      out.push(0x23);
      uleb(out, fuel);
      out.push(0x21);
      uleb(out, counter);
    };
    const spill = () => {
      out.push(0x20);
      uleb(out, counter);
      out.push(0x24);
      uleb(out, fuel);
    };
    load();
    charge(out, counter, refuel, Math.max(1, entryCost), body.bodyStart, cold);
    let runStart = instrs.length > 0 ? instrs[0]!.start : c.pos;
    const flush = (upTo: number) => {
      if (upTo > runStart) {
        fnRuns.push({ out: out.length, orig: runStart });
        for (let p = runStart; p < upTo; p++) out.push(bytes[p]!);
      }
      runStart = upTo;
    };
    // open blocks: a branch to label `depth` leaves the function (the body's own block)
    let depth = 0;
    for (let i = 0; i < instrs.length; i++) {
      const ins = instrs[i]!;
      const op = ins.op;
      if (op >= 0x02 && op <= 0x04) depth++;
      if (op === 0x03) {
        flush(ins.end);
        charge(out, counter, refuel, Math.max(1, cost.get(i) ?? 0), ins.start, cold);
      } else if (op === 0x40) {
        flush(ins.start);
        // the pages asked for are on the stack: the helper takes them and the site
        out.push(0x41);
        sleb64(out, BigInt(ins.start));
        out.push(0x10);
        uleb(out, grow);
        runStart = ins.end;
      } else if (op === 0x10 || op === 0x11) {
        // a call of guest code: the callee charges the global, so the counter is handed over
        // and taken back (the one import, berm.syscall, never touches fuel)
        const callee = op === 0x10 ? new Cursor(bytes, ins.start + 1, ins.end).u32('index') : -1;
        if (callee < 0 || callee >= info.importedFunctions) {
          flush(ins.start);
          spill();
          flush(ins.end);
          load();
        }
      } else if (op === 0x12 || op === 0x13 || op === 0x0f || (op === 0x0b && depth === 0)) {
        // leaving the function: a tail call, return, the body's final end
        flush(ins.start);
        spill();
      } else if (op === 0x0c || op === 0x0d || op === 0x0e) {
        const r = new Cursor(bytes, ins.start + 1, ins.end);
        const labels = op === 0x0e ? r.u32('branch table length') + 1 : 1;
        let leaves = false;
        for (let k = 0; k < labels; k++) if (r.u32('label') === depth) leaves = true;
        if (leaves) {
          flush(ins.start);
          spill();
        }
      }
      if (op === 0x0b) depth--;
    }
    flush(body.end);
    const sizeBytes: number[] = [];
    uleb(sizeBytes, out.length);
    const bodyOut = code.length + sizeBytes.length;
    for (const r of fnRuns) runs.push({ out: bodyOut + r.out, orig: r.orig });
    if (cold.length > 0) hints.push({ index: body.index, offsets: cold });
    code.push(...sizeBytes, ...out);
  }
  // refuel(fuel: i32, site: i32) -> i32: fuel + i32(berm.syscall(POLL_CALL, site, 0))
  const refuelBody: number[] = [0x00, 0x20, 0x00, 0x42];
  sleb64(refuelBody, POLL_CALL);
  refuelBody.push(0x20, 0x01, 0x41, 0x00, 0x10);
  uleb(refuelBody, syscall);
  refuelBody.push(0xa7, 0x6a, 0x0b);
  // grow(pages: i32, site: i32) -> i32: memory.grow, and on failure tell the host (which may trap)
  const growBody: number[] = [
    0x01,
    0x01,
    I32,
    0x20,
    0x00,
    0x40,
    0x00,
    0x22,
    0x02,
    0x41,
    0x7f,
    0x46,
    0x04,
    0x40,
    0x42,
  ];
  sleb64(growBody, GROW_CALL);
  growBody.push(0x20, 0x00, 0x20, 0x01, 0x10);
  uleb(growBody, syscall);
  growBody.push(0x1a, 0x0b, 0x20, 0x02, 0x0b);
  for (const b of [refuelBody, growBody]) {
    uleb(code, b.length);
    code.push(...b);
  }

  const replaced = new Map<number, Uint8Array>();
  const dropped = new Set<number>();
  const added: { id: number; bytes: Uint8Array }[] = [];
  const byId = new Map(info.sections.filter((s) => s.id !== 0).map((s) => [s.id, s]));
  // types of the helpers: both (i32, i32) -> (i32)
  const newTypes = [0x60, 0x02, I32, I32, 0x01, I32, 0x60, 0x02, I32, I32, 0x01, I32];
  const types = byId.get(1)!;
  replaced.set(1, section(1, [...extendVector(bytes, types, 2), ...vectorBody(bytes, types), ...newTypes]));
  const fns = byId.get(3);
  const fnEntries: number[] = [];
  uleb(fnEntries, refuelType);
  uleb(fnEntries, growType);
  if (fns)
    replaced.set(3, section(3, [...extendVector(bytes, fns, 2), ...vectorBody(bytes, fns), ...fnEntries]));
  else added.push({ id: 3, bytes: section(3, [2, ...fnEntries]) });
  // the memory becomes the import MEMORY_IMPORT with the same limits (the maximum filled in)
  const imports = byId.get(2)!; // the reader required the syscall import
  const memImport: number[] = [];
  for (const part of [MEMORY_IMPORT.module, MEMORY_IMPORT.name]) {
    const b = new TextEncoder().encode(part);
    uleb(memImport, b.length);
    memImport.push(...b);
  }
  memImport.push(0x02, 0x01);
  const limits = memoryLimits(image, memoryLimit);
  uleb(memImport, limits.initial);
  uleb(memImport, limits.maximum);
  replaced.set(
    2,
    section(2, [...extendVector(bytes, imports, 1), ...vectorBody(bytes, imports), ...memImport]),
  );
  dropped.add(5);
  const fuelGlobal = [I32, 0x01, 0x41, 0x00, 0x0b];
  const globals = byId.get(6);
  if (globals)
    replaced.set(
      6,
      section(6, [...extendVector(bytes, globals, 1), ...vectorBody(bytes, globals), ...fuelGlobal]),
    );
  else added.push({ id: 6, bytes: section(6, [1, ...fuelGlobal]) });
  const codeSection = section(10, code);
  if (byId.has(10)) replaced.set(10, codeSection);
  else added.push({ id: 10, bytes: codeSection });

  // the charges' `if`s are unlikely (branch hinting, "metadata.code.branch_hint"): V8 places the
  // refuel call out of line; custom sections of this kind precede the code section
  let hintSection: Uint8Array | null = null;
  if (hints.length > 0) {
    const content = unlikelyHintsContent(hints);
    hintSection = section(0, content);
  }

  // assemble: originals in order (replaced where rebuilt), missing sections at their place
  const parts: Uint8Array[] = [bytes.subarray(0, 8)];
  let size = 8;
  let codeContentAt = -1;
  const put = (id: number, b: Uint8Array) => {
    if (id === 10) codeContentAt = size + 1 + lebLength(code.length);
    parts.push(b);
    size += b.length;
  };
  const pending = [...added].sort((a, b) => ORDER[a.id]! - ORDER[b.id]!);
  for (const s of info.sections) {
    if (s.id !== 0) {
      while (pending.length > 0 && ORDER[pending[0]!.id]! < ORDER[s.id]!) {
        const p = pending.shift()!;
        put(p.id, p.bytes);
      }
    }
    if ((s.id === 0 && (s.name === MAP_SECTION || s.name === BRANCH_HINT_SECTION)) || dropped.has(s.id))
      continue;
    if (s.id === 10 && hintSection !== null) put(0, hintSection);
    put(s.id, replaced.get(s.id) ?? bytes.subarray(s.start, s.end));
  }
  for (const p of pending) put(p.id, p.bytes);
  const map: OffsetMap = {
    out: runs.map((r) => codeContentAt + r.out),
    orig: runs.map((r) => r.orig),
  };
  const name = new TextEncoder().encode(MAP_SECTION);
  const payload = new TextEncoder().encode(JSON.stringify(map));
  const custom: number[] = [];
  uleb(custom, name.length);
  parts.push(section(0, Uint8Array.from([...custom, ...name, ...payload])));
  return Buffer.concat(parts);
}

/** The entries of a vector section: its content after the count. */
function vectorBody(bytes: Uint8Array, s: { contentStart: number; end: number }): Uint8Array {
  const c = new Cursor(bytes, s.contentStart, s.end);
  c.u32('count');
  return bytes.subarray(c.pos, s.end);
}

/** Bytes of the unsigned LEB128 of `n`. */
function lebLength(n: number): number {
  let k = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    k++;
  }
  return k;
}

/** The offset map kept in an instrumented module, or null when it has none. */
export function readOffsetMap(module: WebAssembly.Module): OffsetMap | null {
  const sections = (
    WebAssembly.Module as unknown as { customSections(m: WebAssembly.Module, n: string): ArrayBuffer[] }
  ).customSections(module, MAP_SECTION);
  const sec = sections[0];
  if (sec === undefined) return null;
  try {
    const m = JSON.parse(new TextDecoder().decode(sec)) as OffsetMap;
    return Array.isArray(m.out) && Array.isArray(m.orig) ? m : null;
  } catch {
    return null;
  }
}

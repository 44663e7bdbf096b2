/**
 * Just enough of a Wasm binary reader to line up code with its text form: the sections, each
 * defined function's body, the start of every instruction in a body, the function names of the
 * name section, and a copy of a module in which all but chosen bodies are `unreachable` (so a text
 * printer prints those functions only, with the same indices and names). Encodings follow the
 * WebAssembly core specification 2.0 (binary format, chapter 5) with the tail-call, threads
 * (atomics), bulk-memory and reference-types opcodes.
 */

/** A section: its id, where it begins (its id byte) and the byte range of its payload. */
export interface WasmSection {
  id: number;
  head: number;
  start: number;
  end: number;
}

/** A defined function's body. */
export interface FunctionBody {
  /** the function's index (imported functions come first) */
  index: number;
  /** byte range of the body (after its size), local declarations included */
  start: number;
  end: number;
  /** offset of its first instruction (after the local declarations) */
  code: number;
}

/** A malformed or unsupported binary. */
export class WasmReadError extends Error {
  override name = 'WasmReadError';
}

class Reader {
  constructor(
    readonly b: Uint8Array,
    public p: number,
  ) {}
  byte(): number {
    if (this.p >= this.b.length) throw new WasmReadError(`unexpected end of the binary at ${this.p}`);
    return this.b[this.p++];
  }
  /** an unsigned or signed LEB128 of up to 64 bits, skipped or read as a number (indices, sizes) */
  leb(): number {
    let v = 0;
    let scale = 1;
    for (let k = 0; k < 10; k++) {
      const x = this.byte();
      v += (x & 0x7f) * scale;
      scale *= 128;
      if ((x & 0x80) === 0) return v;
    }
    throw new WasmReadError(`LEB128 longer than 10 bytes at ${this.p}`);
  }
  skip(n: number): void {
    this.p += n;
    if (this.p > this.b.length) throw new WasmReadError('unexpected end of the binary');
  }
  name(): string {
    const n = this.leb();
    const s = new TextDecoder().decode(this.b.subarray(this.p, this.p + n));
    this.skip(n);
    return s;
  }
  limits(): void {
    const flags = this.byte();
    this.leb();
    if (flags & 1) this.leb();
  }
}

/**
 * The sections of `wasm` in order.
 * @throws WasmReadError for a bad header or a section running past the end
 */
export function sections(wasm: Uint8Array): WasmSection[] {
  if (wasm.length < 8 || wasm[0] !== 0 || wasm[1] !== 0x61 || wasm[2] !== 0x73 || wasm[3] !== 0x6d) {
    throw new WasmReadError('not a WebAssembly binary');
  }
  const r = new Reader(wasm, 8);
  const out: WasmSection[] = [];
  while (r.p < wasm.length) {
    const head = r.p;
    const id = r.byte();
    const size = r.leb();
    const start = r.p;
    r.skip(size);
    out.push({ id, head, start, end: r.p });
  }
  return out;
}

/** The number of imported functions (they take the first function indices). */
export function importedFunctions(wasm: Uint8Array, secs = sections(wasm)): number {
  const s = secs.find((x) => x.id === 2);
  if (!s) return 0;
  const r = new Reader(wasm, s.start);
  let fns = 0;
  for (let n = r.leb(); n > 0; n--) {
    r.name();
    r.name();
    const kind = r.byte();
    if (kind === 0) {
      fns++;
      r.leb();
    } else if (kind === 1) {
      r.byte();
      r.limits();
    } else if (kind === 2) r.limits();
    else if (kind === 3) r.skip(2);
    else if (kind === 4) {
      r.byte();
      r.leb();
    } else throw new WasmReadError(`unknown import kind ${kind}`);
  }
  return fns;
}

/** Every defined function's body, in index order. */
export function functionBodies(wasm: Uint8Array, secs = sections(wasm)): FunctionBody[] {
  const s = secs.find((x) => x.id === 10);
  if (!s) return [];
  const first = importedFunctions(wasm, secs);
  const r = new Reader(wasm, s.start);
  const out: FunctionBody[] = [];
  const n = r.leb();
  for (let k = 0; k < n; k++) {
    const size = r.leb();
    const start = r.p;
    for (let d = r.leb(); d > 0; d--) {
      r.leb();
      r.byte();
    }
    out.push({ index: first + k, start, end: start + size, code: r.p });
    r.p = start + size;
  }
  return out;
}

/** Function names by index from the name section (subsection 1), empty without one. */
export function functionNames(wasm: Uint8Array, secs = sections(wasm)): Map<number, string> {
  const names = new Map<number, string>();
  for (const s of secs) {
    if (s.id !== 0) continue;
    const r = new Reader(wasm, s.start);
    if (r.name() !== 'name') continue;
    while (r.p < s.end) {
      const sub = r.byte();
      const size = r.leb();
      const end = r.p + size;
      if (sub === 1) {
        for (let n = r.leb(); n > 0; n--) {
          const i = r.leb();
          names.set(i, r.name());
        }
      }
      r.p = end;
    }
  }
  return names;
}

/** Opcodes followed by one LEB128 immediate (branch depths, indices, constants). */
const ONE_LEB = new Set([
  0x0c, 0x0d, 0x10, 0x12, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x41, 0x42, 0xd2, 0x3f, 0x40,
]); // prettier-ignore

/**
 * The offset (from `body.code`) of each instruction of `body`, its final `end` included, so the
 * count is the number of instructions a text printer writes one per line plus that `end`.
 * @throws WasmReadError for an opcode this reader does not know
 */
export function instructionStarts(wasm: Uint8Array, body: FunctionBody): number[] {
  const r = new Reader(wasm, body.code);
  const out: number[] = [];
  while (r.p < body.end) {
    out.push(r.p - body.code);
    const op = r.byte();
    if (op === 0x02 || op === 0x03 || op === 0x04) {
      // block type: 0x40, a value type (one byte), or a type index (a positive s33)
      const t = wasm[r.p];
      if (t === 0x40 || (t >= 0x6f && t <= 0x7f)) r.p++;
      else r.leb();
    } else if (ONE_LEB.has(op)) r.leb();
    else if (op === 0x0e) {
      for (let n = r.leb(); n >= 0; n--) r.leb(); // the labels and the default
    } else if (op === 0x11 || op === 0x13) {
      r.leb();
      r.leb();
    } else if (op === 0x1c) {
      for (let n = r.leb(); n > 0; n--) r.byte();
    } else if (op >= 0x28 && op <= 0x3e) memarg(r);
    else if (op === 0x43) r.skip(4);
    else if (op === 0x44) r.skip(8);
    else if (op === 0xd0) r.byte();
    else if (op === 0xfc) prefixedFc(r);
    else if (op === 0xfe) {
      const sub = r.leb();
      if (sub === 0x03) r.byte();
      else memarg(r);
    } else if (op > 0xc4 && op !== 0xd1) {
      throw new WasmReadError(`unknown opcode 0x${op.toString(16)} at ${r.p - 1}`);
    }
  }
  return out;
}

function memarg(r: Reader): void {
  const align = r.leb();
  if (align & 0x40) r.leb(); // multi-memory: a memory index follows
  r.leb();
}

function prefixedFc(r: Reader): void {
  const sub = r.leb();
  if (sub <= 7) return; // saturating truncations
  switch (sub) {
    case 8: // memory.init data mem
    case 12: // table.init elem table
    case 14: // table.copy t t
    case 10: // memory.copy m m
      r.leb();
      r.leb();
      return;
    case 9: // data.drop
    case 11: // memory.fill
    case 13: // elem.drop
    case 15: // table.grow
    case 16: // table.size
    case 17: // table.fill
      r.leb();
      return;
    default:
      throw new WasmReadError(`unknown 0xfc opcode ${sub}`);
  }
}

/**
 * A copy of `wasm` whose defined functions not in `keep` (function indices) have the body
 * `unreachable` and no locals: valid whatever their signatures, with every index and name as
 * before, so the kept functions print exactly as in the whole module.
 */
export function keepBodies(wasm: Uint8Array, keep: ReadonlySet<number>, secs = sections(wasm)): Uint8Array {
  const bodies = functionBodies(wasm, secs);
  const code: number[] = [];
  const parts: Uint8Array[] = [];
  uleb(code, bodies.length);
  for (const b of bodies) {
    if (keep.has(b.index)) {
      uleb(code, b.end - b.start);
      parts.push(Uint8Array.from(code), wasm.subarray(b.start, b.end));
      code.length = 0;
    } else code.push(3, 0, 0x00, 0x0b);
  }
  parts.push(Uint8Array.from(code));
  const payload = concat(parts);
  const out: Uint8Array[] = [wasm.subarray(0, 8)];
  for (const s of secs) {
    if (s.id !== 10) {
      out.push(wasm.subarray(s.head, s.end));
      continue;
    }
    const head: number[] = [10];
    uleb(head, payload.length);
    out.push(Uint8Array.from(head), payload);
  }
  return concat(out);
}

function uleb(out: number[], v: number): void {
  do {
    let b = v % 128;
    v = Math.floor(v / 128);
    if (v > 0) b |= 0x80;
    out.push(b);
  } while (v > 0);
}

function concat(parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

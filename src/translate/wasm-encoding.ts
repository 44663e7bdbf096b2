/**
 * The Wasm binary format's primitives (WebAssembly core specification 2.0, chapter 5): value and
 * block type codes, the opcodes the module writer spells by name, a growable byte buffer, signed
 * LEB128 and names. The module writer (bytes.ts) builds on them.
 */
import { sleb64 as slebBig, uleb, type ByteSink } from '../util/leb.js';

/** Value and block types. Tuples get indices >= TUPLE_BASE into the tuple table. */
export const T_NONE = 0x40;
export const T_UNREACHABLE = 1;
export const T_I32 = 0x7f;
export const T_I64 = 0x7e;
export const T_F64 = 0x7c;
export const TUPLE_BASE = 0x1000;

/** Opcodes (core spec 5.4). */
export const Op = {
  unreachable: 0x00,
  nop: 0x01,
  block: 0x02,
  loop: 0x03,
  if: 0x04,
  else: 0x05,
  end: 0x0b,
  br: 0x0c,
  br_if: 0x0d,
  br_table: 0x0e,
  return: 0x0f,
  call: 0x10,
  return_call: 0x12,
  drop: 0x1a,
  select: 0x1b,
  local_get: 0x20,
  local_set: 0x21,
  local_tee: 0x22,
  global_get: 0x23,
  global_set: 0x24,
  i32_const: 0x41,
  i64_const: 0x42,
} as const;

/** Where encoders append bytes: a number[] or a {@link Bytes}. */
export type Sink = ByteSink;

/** A growable byte buffer (the module's output). */
export class Bytes implements Sink {
  buf: Uint8Array;
  length = 0;
  /** @param capacity bytes to start with (default 64 KiB; it doubles as needed) */
  constructor(capacity = 1 << 16) {
    this.buf = new Uint8Array(Math.max(16, capacity));
  }
  push(b: number): void {
    if (this.length === this.buf.length) this.ensure(1);
    this.buf[this.length++] = b;
  }
  ensure(n: number): void {
    if (this.length + n <= this.buf.length) return;
    const b = new Uint8Array(Math.max(this.buf.length * 2, this.length + n));
    b.set(this.buf.subarray(0, this.length));
    this.buf = b;
  }
  append(src: Uint8Array | readonly number[]): void {
    this.ensure(src.length);
    if (src instanceof Uint8Array) this.buf.set(src, this.length);
    else for (let i = 0; i < src.length; i++) this.buf[this.length + i] = src[i];
    this.length += src.length;
  }
  bytes(): Uint8Array {
    return this.buf.subarray(0, this.length);
  }
}

/** Signed LEB128 of a 32-bit integer. */
export function sleb32(out: Sink, v: number): void {
  v |= 0;
  for (;;) {
    const b = v & 0x7f;
    v >>= 7;
    if ((v === 0 && (b & 0x40) === 0) || (v === -1 && (b & 0x40) !== 0)) {
      out.push(b);
      return;
    }
    out.push(b | 0x80);
  }
}

/** Signed LEB128 of a 64-bit integer. */
export function sleb64(out: Sink, v: bigint): void {
  v = BigInt.asIntN(64, v);
  if (v >= -0x80000000n && v <= 0x7fffffffn) return sleb32(out, Number(v));
  slebBig(out, v);
}

const utf8 = new TextEncoder();
/** Append a name (spec 5.2.4): its UTF-8 length, then its bytes. */
export function name(out: Sink, s: string): void {
  const n = s.length;
  let ascii = true;
  for (let i = 0; i < n; i++) {
    if (s.charCodeAt(i) > 0x7f) {
      ascii = false;
      break;
    }
  }
  // the names berm writes (f_<hex>, entry stubs, imports) are ASCII: a byte per character
  if (ascii) {
    uleb(out, n);
    for (let i = 0; i < n; i++) out.push(s.charCodeAt(i));
    return;
  }
  const b = utf8.encode(s);
  uleb(out, b.length);
  for (const x of b) out.push(x);
}

/**
 * A function's local declarations (spec 5.5.13): run-length `n:u32 t:valtype` pairs of the value
 * types `types`, in order, preceded by the number of runs.
 */
export function localDeclarations(types: readonly number[]): Uint8Array {
  const runs: [number, number][] = [];
  for (const l of types) {
    if (runs.length > 0 && runs[runs.length - 1][1] === l) runs[runs.length - 1][0]++;
    else runs.push([1, l]);
  }
  const out: number[] = [];
  uleb(out, runs.length);
  for (const [n, t] of runs) {
    uleb(out, n);
    out.push(t);
  }
  return Uint8Array.from(out);
}

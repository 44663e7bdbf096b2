/**
 * LEB128 integers as the WebAssembly binary format writes them (WebAssembly core spec, 5.2.2
 * "Integers"): shared by the baseline tier's byte writer (src/translate/bytes.ts), the branch
 * hints section (src/translate/hints.ts) and the engine's custom section of a cached module
 * (src/engine/summary-section.ts) and the Wasm image instrumentation (src/wasm/instrument.ts). The one-pass writer (src/translate/direct.ts) has its own,
 * writing into the module's value buffer.
 */

/** Where encoders append bytes: a number[] or a growable buffer. */
export interface ByteSink {
  push(b: number): unknown;
}

/** Unsigned LEB128 of a non-negative integer below 2^53, appended to `out`. */
export function uleb(out: ByteSink, v: number): void {
  do {
    let b = v % 128;
    v = Math.floor(v / 128);
    if (v !== 0) b |= 0x80;
    out.push(b);
  } while (v !== 0);
}

/** Signed LEB128 of a bigint read as a 64-bit two's-complement integer, appended to `out`. */
export function sleb64(out: ByteSink, v: bigint): void {
  v = BigInt.asIntN(64, v);
  for (;;) {
    const b = Number(v & 0x7fn);
    v >>= 7n;
    if ((v === 0n && (b & 0x40) === 0) || (v === -1n && (b & 0x40) !== 0)) {
      out.push(b);
      return;
    }
    out.push(b | 0x80);
  }
}

/**
 * The unsigned LEB128 at offset `p` of `b`.
 * @returns [value, offset after it], or null when it runs past the end or is over 32 bits (a
 *   malformed length).
 */
export function readUleb32(b: Uint8Array, p: number): [number, number] | null {
  let v = 0;
  for (let shift = 0; shift < 35; shift += 7) {
    if (p >= b.length) return null;
    const x = b[p++];
    v += (x & 0x7f) * 2 ** shift;
    if ((x & 0x80) === 0) return v <= 0xffffffff ? [v, p] : null;
  }
  return null;
}

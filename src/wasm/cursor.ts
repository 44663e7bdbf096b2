/**
 * A bounds-checked reader of the WebAssembly binary format's primitives (core spec, 5.2 "Values":
 * bytes, LEB128 integers): every read past the end of its range is a {@link WasmImageError}, so a
 * damaged image never reads outside its bytes or loops.
 */

/** A Wasm image berm refuses: malformed, or outside the harness ABI. The message names the fix. */
export class WasmImageError extends Error {
  override name = 'WasmImageError';
}

/** A position in `bytes`, reading up to `end`. */
export class Cursor {
  constructor(
    readonly data: Uint8Array,
    public pos: number,
    readonly end: number,
  ) {}

  done(): boolean {
    return this.pos >= this.end;
  }

  private short(what: string): WasmImageError {
    return new WasmImageError(`the module is malformed: ${what} runs past its end (at offset ${this.pos})`);
  }

  u8(what: string): number {
    if (this.pos >= this.end) throw this.short(what);
    return this.data[this.pos++]!;
  }

  /** An unsigned LEB128 of at most 32 bits. */
  u32(what: string): number {
    let v = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      const b = this.u8(what);
      v += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) {
        if (v > 0xffffffff) break;
        return v;
      }
    }
    throw new WasmImageError(
      `the module is malformed: ${what} is not a 32-bit LEB128 (at offset ${this.pos})`,
    );
  }

  /** Skip a signed LEB128 of at most 64 bits (its value is not needed). */
  s64(what: string): void {
    for (let i = 0; i < 10; i++) if ((this.u8(what) & 0x80) === 0) return;
    throw new WasmImageError(`the module is malformed: ${what} is not a LEB128 (at offset ${this.pos})`);
  }

  bytes(n: number, what: string): Uint8Array {
    if (n > this.end - this.pos) throw this.short(what);
    const out = this.data.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
}

/**
 * UTF-8 text from bytes, as `Buffer.prototype.toString('utf8')` gives it (invalid sequences become
 * U+FFFD, a leading U+FEFF is kept) but from any Uint8Array and with one decoder per process: on a
 * warm compile, where every first call of a function costs, it is the cheapest way to text (no
 * Buffer view, no encoding lookup).
 */
let decoder: InstanceType<typeof TextDecoder> | null = null;

/** The bytes decoded as UTF-8 (WHATWG Encoding, "utf-8" decode with BOM kept). */
export function utf8(bytes: Uint8Array): string {
  return (decoder ??= new TextDecoder('utf-8', { ignoreBOM: true })).decode(bytes);
}

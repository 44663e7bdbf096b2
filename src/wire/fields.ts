/**
 * Upstream berm wire framing of capability requests and replies.
 *
 * A request or reply is a list of fields. Framed, each field is a little-endian u32 byte length
 * followed by that many bytes; fields follow each other with no padding and no count prefix (the
 * count is implied by the total length). Integers travel as decimal ASCII text, strings as UTF-8.
 *
 * Replies are "staged": the host keeps the bytes and returns a staged length in a0 that the guest
 * uses to size its buffer. A reply with exactly one field stages that field's raw bytes; any other
 * count stages the framed encoding. Ambiguity (upstream's, kept on purpose): zero fields frame to
 * zero bytes, which is indistinguishable from one empty field staged raw. Callers that must tell
 * "absent" from "empty" (for example berm.get) document which one they mean.
 */

/** Thrown for malformed wire input; the message names the field and offset. */
export class WireError extends Error {
  override name = 'WireError';
}

/** Bounds applied while decoding guest-supplied framing. */
export interface DecodeLimits {
  /** most fields accepted (default 4096) */
  maxFields?: number;
  /** largest single field in bytes (default: no limit beyond the input itself) */
  maxFieldBytes?: number;
}

/** Default field-count bound of {@link decodeFields}. */
export const DEFAULT_MAX_FIELDS = 4096;

const U32_MAX = 0xffffffff;

/**
 * Frame fields: for each, a little-endian u32 length then its bytes.
 * @throws WireError when a field is longer than 2^32 - 1 bytes.
 */
export function encodeFields(fields: readonly Uint8Array[]): Uint8Array {
  let total = 0;
  for (const [i, f] of fields.entries()) {
    if (f.length > U32_MAX) throw new WireError(`field ${i} is ${f.length} bytes; the u32 length caps it`);
    total += 4 + f.length;
  }
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  let at = 0;
  for (const f of fields) {
    view.setUint32(at, f.length, true);
    out.set(f, at + 4);
    at += 4 + f.length;
  }
  return out;
}

/**
 * Split framed bytes into fields. The returned arrays are copies, so later writes to `bytes`
 * (guest memory) cannot change them.
 * @throws WireError on a truncated length prefix, a length running past the end, a field over
 *   `limits.maxFieldBytes`, or more than `limits.maxFields` fields.
 */
export function decodeFields(bytes: Uint8Array, limits: DecodeLimits = {}): Uint8Array[] {
  const maxFields = limits.maxFields ?? DEFAULT_MAX_FIELDS;
  const maxFieldBytes = limits.maxFieldBytes ?? Infinity;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: Uint8Array[] = [];
  let at = 0;
  while (at < bytes.length) {
    if (out.length >= maxFields) {
      throw new WireError(`more than ${maxFields} fields (next field starts at byte ${at})`);
    }
    if (bytes.length - at < 4) {
      throw new WireError(
        `truncated length prefix of field ${out.length} at byte ${at}: ${bytes.length - at} of 4 bytes present`,
      );
    }
    const len = view.getUint32(at, true);
    if (len > maxFieldBytes) {
      throw new WireError(`field ${out.length} declares ${len} bytes; the limit is ${maxFieldBytes}`);
    }
    if (len > bytes.length - at - 4) {
      throw new WireError(
        `field ${out.length} at byte ${at} declares ${len} bytes but only ${bytes.length - at - 4} follow`,
      );
    }
    out.push(bytes.slice(at + 4, at + 4 + len));
    at += 4 + len;
  }
  return out;
}

const encoder = new TextEncoder();
const strictDecoder = new TextDecoder('utf-8', { fatal: true });

/** UTF-8 bytes of `text`, for use as a field. */
export function textField(text: string): Uint8Array {
  return encoder.encode(text);
}

/**
 * Decode a field as UTF-8 text.
 * @param what names the field in the error message, e.g. "path".
 * @throws WireError when the bytes are not valid UTF-8 (lossy decoding would let two different
 *   guest byte strings name the same host path).
 */
export function fieldText(field: Uint8Array, what = 'field'): string {
  try {
    return strictDecoder.decode(field);
  } catch {
    throw new WireError(`${what} is not valid UTF-8`);
  }
}

/** Decimal text of an integer, the wire form of every integer. */
export function intField(value: number | bigint): Uint8Array {
  if (typeof value === 'number' && !Number.isSafeInteger(value)) {
    throw new WireError(`${value} is not a safe integer`);
  }
  return encoder.encode(value.toString(10));
}

/**
 * Parse a decimal integer field: optional '-', then 1..20 ASCII digits, nothing else (no spaces,
 * '+', hex or exponent, so one number has one spelling).
 * @throws WireError when the text is not such an integer or lies outside [min, max].
 */
export function fieldInt(
  field: Uint8Array,
  what = 'integer',
  bounds: { min?: bigint; max?: bigint } = {},
): bigint {
  const text = fieldText(field, what);
  if (!/^-?[0-9]{1,20}$/.test(text)) {
    throw new WireError(`${what} must be decimal digits, got ${JSON.stringify(text.slice(0, 40))}`);
  }
  const value = BigInt(text);
  if (bounds.min !== undefined && value < bounds.min)
    throw new WireError(`${what} ${value} is below ${bounds.min}`);
  if (bounds.max !== undefined && value > bounds.max)
    throw new WireError(`${what} ${value} is above ${bounds.max}`);
  return value;
}

/** Bit 63 of a staged length: the staged bytes are a UTF-8 error message. */
export const STAGED_ERROR = 1n << 63n;
/** Bit 62 of a staged length: the call was refused by policy; nothing ran. The bytes say why. */
export const STAGED_REFUSED = 1n << 62n;
/** Mask of the length part of a staged length. */
export const STAGED_LENGTH_MASK = (1n << 62n) - 1n;

/**
 * The a0 value announcing `len` staged bytes. A refusal sets both bits 63 and 62 (it is an error
 * message too, so guests that test only bit 63 still see a failure).
 * @throws WireError when `len` is negative or does not fit in 62 bits.
 */
export function stagedLength(
  len: number | bigint,
  flags: { error?: boolean; refused?: boolean } = {},
): bigint {
  const n = BigInt(len);
  if (n < 0n || n > STAGED_LENGTH_MASK) throw new WireError(`staged length ${n} does not fit in 62 bits`);
  let v = n;
  if (flags.error || flags.refused) v |= STAGED_ERROR;
  if (flags.refused) v |= STAGED_REFUSED;
  return v;
}

/** Split a staged length into its parts (inverse of {@link stagedLength}). */
export function parseStagedLength(value: bigint): { length: bigint; error: boolean; refused: boolean } {
  const v = BigInt.asUintN(64, value);
  return {
    length: v & STAGED_LENGTH_MASK,
    error: (v & STAGED_ERROR) !== 0n,
    refused: (v & STAGED_REFUSED) !== 0n,
  };
}

/**
 * The bytes staged for a successful reply: one field raw, any other count framed (zero fields
 * therefore stage zero bytes, the same as one empty field; see the module comment).
 */
export function stageFields(fields: readonly Uint8Array[]): Uint8Array {
  return fields.length === 1 ? fields[0]! : encodeFields(fields);
}

/**
 * What a capability call replies. `fields`: success. `error`: the call was allowed and ran (or
 * started) but failed. `refused`: policy said no and nothing ran. Messages are UTF-8 text.
 */
export type WireReply = { fields: Uint8Array[] } | { error: string } | { refused: string };

/**
 * Stage a reply: the bytes the guest reads back with berm.result.read and the staged length
 * returned in a0 (bit 63 error, bits 63 and 62 refused).
 */
export function stageReply(reply: WireReply): { bytes: Uint8Array; word: bigint } {
  if ('fields' in reply) {
    const bytes = stageFields(reply.fields);
    return { bytes, word: stagedLength(bytes.length) };
  }
  if ('refused' in reply) {
    const bytes = textField(reply.refused);
    return { bytes, word: stagedLength(bytes.length, { refused: true }) };
  }
  const bytes = textField(reply.error);
  return { bytes, word: stagedLength(bytes.length, { error: true }) };
}

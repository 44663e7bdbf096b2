/**
 * The cache's file format, apart from the WasmCache class: an entry's path, its header and its
 * check, and the keys. The engine's warm path (src/engine/warm-path.ts) reads an entry with these
 * functions inside its code-cached script, so they hold no state and define no class.
 */
// crypto.hash (one-shot) rather than createHash: ~0.2 ms less per digest in a fresh process, where a
// warm compile computes three (the ELF, the key, the entry)
import { hash } from 'node:crypto';
import { utf8 } from '../util/utf8.js';

/**
 * An entry is a header of ASCII text, then the bytes: the magic, the bytes' length as 16 hex
 * digits and their sha256 as 64 (one string comparison checks it, with no Buffer method or byte
 * loop: a warm compile in a fresh process pays for the first call of every function it runs).
 */
const MAGIC = 'BERMWC02';
const HEADER = MAGIC.length + 16 + 64;

/** What a file of the cache holds (see WasmCache): a translated module, or an image summary. */
export type EntryKind = 'wasm' | 'image';

/**
 * The file of entry `key` of `kind` in the cache directory `dir`.
 * @throws Error when `key` is not 64 lowercase hex digits (a key of {@link cacheKey})
 */
export function entryPath(dir: string, key: string, kind: EntryKind = 'wasm'): string {
  if (key.length !== 64 || /[^0-9a-f]/.test(key)) throw new Error(`bad cache key ${key}`);
  // not path.join: its first call costs a warm compile more than the rest of the lookup
  const sep = dir === '' || dir.endsWith('/') ? '' : '/';
  return `${dir}${sep}${key}.${kind}`;
}

/** The header of an entry holding `body`. */
export function entryHeader(body: Uint8Array): string {
  return `${MAGIC}${body.length.toString(16).padStart(16, '0')}${hash('sha256', body, 'hex')}`;
}

/**
 * The bytes an entry file's contents `buf` hold, a view into `buf`, or null when it is truncated
 * or corrupt (its header does not name exactly these bytes' length and sha256).
 */
export function entryBody(buf: Uint8Array): Uint8Array | null {
  if (buf.length < HEADER) return null;
  // plain views: Buffer's own subarray is JavaScript, run for the first time here
  const head = new Uint8Array(buf.buffer, buf.byteOffset, HEADER);
  const body = new Uint8Array(buf.buffer, buf.byteOffset + HEADER, buf.length - HEADER);
  return utf8(head) === entryHeader(body) ? body : null;
}

/**
 * sha256 over the parts, each length-prefixed so that no two part lists collide.
 * @returns 64 hex characters.
 */
export function cacheKey(parts: (Uint8Array | string)[]): string {
  // ASCII strings under 128 characters (an engine's keys: a hex digest, the translator's version
  // and digest, the options) frame to ASCII text, which hash() takes as it is
  let text = '';
  for (const p of parts) {
    if (typeof p !== 'string' || p.length > 127 || NOT_ASCII.test(p))
      return hash('sha256', frame(parts), 'hex');
    text += `${String.fromCharCode(p.length)}${SEVEN_ZEROS}${p}`;
  }
  return hash('sha256', text, 'hex');
}

const NOT_ASCII = /[\u0080-\uffff]/;
const SEVEN_ZEROS = '\0'.repeat(7);

/** The parts, each preceded by its length as 8 bytes little-endian. */
function frame(parts: (Uint8Array | string)[]): Buffer {
  const chunks: Uint8Array[] = [];
  for (const p of parts) {
    const b = typeof p === 'string' ? Buffer.from(p) : p;
    const len = new Uint8Array(8);
    for (let i = 0, n = b.length; i < 8; i++, n = Math.floor(n / 256)) len[i] = n % 256;
    chunks.push(len, b);
  }
  return Buffer.concat(chunks);
}

/**
 * The warm path of `Engine.compile`: read the ELF, hash it, make the cache key, read and check the
 * cached module, find and restore the image summary inside it, lay the image out and compile the
 * module with V8, apart from the engine's state (the engine keeps digests and images per byte
 * array, and removes entries). Stateless functions only.
 *
 * Measured and dropped (bench/README.md, "Warm compile: the warm path as a code-cached script"):
 * running these functions from a CommonJS script with a V8 code cache, as the baseline translator
 * runs, so that a fresh process does not compile each on its first call. The compile got ~1 ms
 * faster, but loading the script and its checked cache when the engine loads cost more than that.
 */
import { hash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { cacheKey, entryBody, entryPath } from '../cache/entry.js';
import { restoreImage } from '../elf/summary.js';
import type { ElfImage } from '../elf/types.js';
import { computeLayout, type GuestLayout, type TranslateOptions } from '../translate/abi.js';
import { findSummary } from './summary-section.js';

export { cacheKey };

/**
 * A file's bytes as a plain Uint8Array: a view of the Buffer readFileSync allocated for the file
 * alone (no copy: ~0.15 ms of a warm compile for a 250 KB ELF), a copy when the Buffer shares its
 * memory (a file of unknown size read in chunks may land in Node's buffer pool).
 * @throws the Error of readFileSync (ENOENT, EACCES, ...)
 */
export function readBytes(path: string): Uint8Array {
  const b = readFileSync(path);
  return b.byteOffset === 0 && b.byteLength === b.buffer.byteLength
    ? new Uint8Array(b.buffer, 0, b.byteLength)
    : new Uint8Array(b);
}

/** The SHA-256 of `bytes`, 64 lowercase hex digits. */
export function sha256Hex(bytes: Uint8Array): string {
  return hash('sha256', bytes, 'hex');
}

/** A cached module ready to use, as {@link loadCached} found it. */
export interface CachedModule {
  image: ElfImage;
  /** whether `image` was restored from the summary inside the module (not given, not parsed) */
  restored: boolean;
  layout: GuestLayout;
  compiled: WebAssembly.Module;
  /** bytes of the module without the summary section */
  moduleBytes: number;
  /** performance.now() before and after V8's compile */
  c0: number;
  c1: number;
}

/**
 * The cached module of entry `key` in the cache directory `dir`, compiled by V8, for the ELF
 * `bytes`, with its image: `known` when given, else the summary the module carries
 * (src/engine/summary-section.ts), else what `inspect` returns (it parses the ELF).
 * @returns the module, or why there is none: 'absent' (no readable entry), 'damaged' (its header
 *   does not match its bytes: truncated or corrupt), 'refused' (V8 refused the module). The
 *   caller removes a damaged or refused entry.
 * @throws ElfError from `inspect`; LayoutError when the image does not fit `options`' memory
 */
export function loadCached(
  dir: string,
  key: string,
  bytes: Uint8Array,
  known: ElfImage | undefined,
  inspect: (bytes: Uint8Array) => ElfImage,
  options: TranslateOptions,
): CachedModule | 'absent' | 'damaged' | 'refused' {
  let buf: Uint8Array;
  try {
    buf = readFileSync(entryPath(dir, key));
  } catch {
    return 'absent';
  }
  const wasm = entryBody(buf);
  if (wasm === null) return 'damaged';
  const found = findSummary(wasm);
  let image = known ?? null;
  let restored = false;
  if (image === null && found !== null) {
    image = restoreImage(found.text, bytes);
    restored = image !== null;
  }
  image ??= inspect(bytes);
  const layout = computeLayout(image.imageStart, image.imageEnd, options);
  const c0 = performance.now();
  let compiled: WebAssembly.Module;
  try {
    compiled = new WebAssembly.Module(wasm);
  } catch {
    return 'refused';
  }
  const c1 = performance.now();
  return { image, restored, layout, compiled, moduleBytes: found?.moduleBytes ?? wasm.length, c0, c1 };
}

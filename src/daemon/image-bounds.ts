/**
 * Bounds on what a deployed image may cost to read and translate. The upload limit
 * (--max-image-bytes) bounds the bytes, not the work: translation's memory grows with the code and
 * the function count (a 61 MiB ELF of 1,500,000 two-instruction functions drove bermd to 2.7 GiB
 * RSS before V8 refused the module; 4 MiB of code took the optimising tier ~790 MiB and 50 s), and
 * the ELF reader keeps every symbol and relocation as an object on the serving thread. So a deploy
 * (and a restore) first counts the symbols and relocations from the section headers alone
 * (src/elf/reader.ts elfTableSizes) and refuses an image over either bound before any table is
 * read; then, once read, refuses one whose functions hold more code than the code bound, before
 * anything is translated.
 */
import { elfTableSizes } from '../elf/reader.js';
import { HttpError } from './http.js';

/** The bounds in force (each >= 1). */
export interface ImageBounds {
  /** bytes of the guest functions (the code translated), --max-code-bytes */
  maxCodeBytes: number;
  /** .symtab entries (an upper bound of the guest functions), --max-symbols */
  maxSymbols: number;
  /** relocation entries (--emit-relocs), --max-relocations */
  maxRelocations: number;
}

/**
 * Defaults: 4 MiB of code (ten times the largest fixture, the Rust JSON harness at -O0 with 411 KB
 * of code in 5,328 functions; translating 4 MiB took at most ~800 MiB, in the optimising tier),
 * 131,072 symbols (~1.3 KiB each to read and translate: ~170 MiB) and 1,048,576 relocations
 * (~280 MiB to read; compilers emit about one per 7 bytes of code, ~600,000 for 4 MiB).
 */
export const DEFAULT_IMAGE_BOUNDS: ImageBounds = {
  maxCodeBytes: 4 << 20,
  maxSymbols: 131_072,
  maxRelocations: 1_048_576,
};

function over(limit: string, what: string, actual: number, max: number): void {
  if (actual <= max) return;
  throw new HttpError(
    413,
    `the image has ${actual} ${what}, over the limit of ${max} (--${limit}): bermd does not translate images that large; split the harness, or raise --${limit} on a host with the memory for it`,
    { limit, actual, max },
  );
}

/**
 * Refuse an image whose section headers declare more symbols or relocations than the bounds,
 * before its tables are read. An image whose headers cannot be read passes: the ELF reader names
 * its problem next.
 * @throws HttpError 413 with `limit` = the setting's name (`max-symbols`, `max-relocations`),
 *   `actual` and `max`
 */
export function checkTableBounds(bytes: Uint8Array, bounds: ImageBounds): void {
  const sizes = elfTableSizes(bytes);
  if (sizes === null) return;
  over('max-symbols', 'symbols in .symtab', sizes.symbols, bounds.maxSymbols);
  over('max-relocations', 'relocations', sizes.relocations, bounds.maxRelocations);
}

/**
 * Refuse a read image whose guest functions hold more code than the bound (the bytes translation
 * works through; data beside the code in an executable segment does not count).
 * @throws HttpError 413 with `limit` = `max-code-bytes`, `actual` and `max`
 */
export function checkCodeBounds(image: { functions: { size: number }[] }, bounds: ImageBounds): void {
  let code = 0;
  for (const f of image.functions) code += f.size;
  over('max-code-bytes', 'bytes of code in functions', code, bounds.maxCodeBytes);
}

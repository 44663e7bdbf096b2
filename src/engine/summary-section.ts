/**
 * The image summary inside a cached module: the engine appends the summary of the ELF image a
 * module was translated from (src/elf/summary.ts, JSON text) to the module as a Wasm custom
 * section before caching it, so that a warm compile reads one cache entry instead of two (the
 * summary is also kept beside the modules, for entries written without it). A custom section is
 * part of the binary format and has no effect on the module: V8 skips one whose name it does not
 * know (WebAssembly core spec, 5.5.3 "Custom Section").
 */
import { readUleb32, uleb } from '../util/leb.js';
import { utf8 } from '../util/utf8.js';

/** The custom section's name. */
export const SUMMARY_SECTION = 'berm.image-summary';
const NAME = new TextEncoder().encode(SUMMARY_SECTION);

/** The unsigned LEB128 of `n` as bytes. */
function leb(n: number): number[] {
  const out: number[] = [];
  uleb(out, n);
  return out;
}

/** `wasm` (a complete module) followed by a custom section holding `text` (UTF-8). */
export function appendSummary(wasm: Uint8Array, text: string): Uint8Array {
  const payload = Buffer.from(text, 'utf8');
  const nameLen = leb(NAME.length);
  const size = leb(nameLen.length + NAME.length + payload.length);
  const out = new Uint8Array(wasm.length + 1 + size.length + nameLen.length + NAME.length + payload.length);
  let p = 0;
  out.set(wasm, p);
  p += wasm.length;
  out[p++] = 0; // custom section id
  out.set(size, p);
  p += size.length;
  out.set(nameLen, p);
  p += nameLen.length;
  out.set(NAME, p);
  p += NAME.length;
  out.set(payload, p);
  return out;
}

/**
 * Find the summary section in a module: walks the section headers (a dozen), reads no code.
 * @returns the summary text and `moduleBytes`, the size of the module without the section (it is
 *   the last one when the engine appended it), or null when the module has none or its section
 *   headers are malformed (V8 then judges the module).
 */
export function findSummary(wasm: Uint8Array): { text: string; moduleBytes: number } | null {
  let p = 8; // magic and version
  while (p < wasm.length) {
    const start = p;
    const id = wasm[p++];
    const size = readUleb32(wasm, p);
    if (size === null) return null;
    const end = size[1] + size[0];
    if (end > wasm.length) return null;
    if (id === 0) {
      const name = readUleb32(wasm, size[1]);
      if (name !== null && name[0] === NAME.length && name[1] + NAME.length <= end) {
        const at = name[1];
        let same = true;
        for (let i = 0; i < NAME.length && same; i++) same = wasm[at + i] === NAME[i];
        if (same) {
          const text = utf8(wasm.subarray(at + NAME.length, end));
          return { text, moduleBytes: end === wasm.length ? start : wasm.length };
        }
      }
    }
    p = end;
  }
  return null;
}

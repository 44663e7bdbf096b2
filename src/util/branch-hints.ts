/**
 * The branch hint custom section (WebAssembly branch hinting, "metadata.code.branch_hint"), as
 * both writers of hinted modules emit it: the translator's (src/translate/hints.ts) and the Wasm
 * image instrumentation's (src/wasm/instrument.ts). Every hint they write marks one `if` unlikely.
 */
import { uleb } from './leb.js';

/** The custom section's name. */
export const BRANCH_HINT_SECTION = 'metadata.code.branch_hint';

/**
 * The content of a branch hint section (its name included, the section id and size not) marking
 * each listed `if` unlikely.
 * @param funcs per function, in increasing function index: its index in the function index space
 *   and the byte offsets of its `if` instructions from the start of its body (after the body's
 *   size), increasing
 * @returns the bytes, to be framed as custom section 0 before the code section
 */
export function unlikelyHintsContent(
  funcs: readonly { index: number; offsets: readonly number[] }[],
): number[] {
  const content: number[] = [];
  const name = new TextEncoder().encode(BRANCH_HINT_SECTION);
  uleb(content, name.length);
  content.push(...name);
  uleb(content, funcs.length);
  for (const f of funcs) {
    uleb(content, f.index);
    uleb(content, f.offsets.length);
    for (const o of f.offsets) {
      uleb(content, o);
      content.push(1, 0); // hint size 1 (the `if`), value 0: unlikely
    }
  }
  return content;
}

/**
 * The sha256 of the baseline tier's Wasm for every ELF under fixtures/ and test/data/, one line per
 * ELF ("<digest>  <path>"), for checking that a change to the baseline writer keeps its output
 * byte-identical:
 *   node --stack-size=4000 --import ./scripts/ts/register.mjs bench/baseline-digest.ts > a.txt
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { readElf } from '../src/elf/reader.js';
import { DEFAULT_TRANSLATE_OPTIONS } from '../src/translate/abi.js';
import { translateBaseline } from '../src/translate/baseline.js';

const ROOT = resolve(import.meta.dirname, '..');

/** Every file under `dir` whose first bytes are the ELF magic, sorted. */
function elfsUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const st = statSync(p);
    if (st.isDirectory()) out.push(...elfsUnder(p));
    else if (st.size > 4) {
      const head = readFileSync(p).subarray(0, 4);
      if (head[0] === 0x7f && head[1] === 0x45 && head[2] === 0x4c && head[3] === 0x46) out.push(p);
    }
  }
  return out.sort();
}

for (const path of [...elfsUnder(join(ROOT, 'fixtures')), ...elfsUnder(join(ROOT, 'test', 'data'))]) {
  const image = readElf(new Uint8Array(readFileSync(path)));
  const { wasm } = translateBaseline(image, DEFAULT_TRANSLATE_OPTIONS);
  console.log(`${createHash('sha256').update(wasm).digest('hex')}  ${relative(ROOT, path)}`);
}

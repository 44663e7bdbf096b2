// Malformed input never crashes or hangs the engine: every fixture truncated at 50 random offsets,
// and with random ELF/program/section header bytes flipped, either compiles or is refused with a
// clean ElfError (or, for images that do not fit the memory, a LayoutError naming the size needed).
import t from 'tap';
import { readFileSync } from 'node:fs';
import { Engine } from '../src/engine/engine.js';
import { ElfError } from '../src/elf/reader.js';
import { LayoutError } from '../src/translate/abi.js';
import { fixtureElfs } from './helpers/fixtures.js';

// Translation at -O0 and no disk cache: the point is robustness, not speed.
const engine = new Engine({ cacheDir: null, optimizeLevel: 0 });

/** Deterministic PRNG (mulberry32) so a failure reproduces from the printed seed. */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

async function outcome(bytes: Uint8Array): Promise<string> {
  try {
    await engine.compile(bytes);
    return 'compiled';
  } catch (e) {
    // an ElfError wrapping an internal error (a missed bounds check) is not a clean refusal
    if (e instanceof ElfError && e.cause === undefined) return 'refused';
    if (e instanceof LayoutError) return 'refused';
    throw e;
  }
}

const elfs = fixtureElfs();
let seed = 1;
for (const elf of elfs) {
  t.test(elf.path.split('/').pop()!, async (t) => {
    const bytes = new Uint8Array(readFileSync(elf.path));
    const rand = rng(seed++);
    let refused = 0;
    for (let i = 0; i < 50; i++) {
      const cut = Math.floor(rand() * bytes.length);
      const r = await outcome(bytes.slice(0, cut));
      if (r === 'refused') refused++;
    }
    t.equal(refused, 50, 'every truncation is refused with an ElfError (section headers sit at the end)');
    // header flips: the ELF header, the program headers and the section headers
    const dv = new DataView(bytes.buffer, bytes.byteOffset);
    const phoff = Number(dv.getBigUint64(32, true));
    const shoff = Number(dv.getBigUint64(40, true));
    const regions: [number, number][] = [
      [0, 64],
      [phoff, phoff + 56 * dv.getUint16(56, true)],
      [shoff, Math.min(bytes.length, shoff + 64 * dv.getUint16(60, true))],
    ];
    const kinds = new Map<string, number>();
    for (let i = 0; i < 20; i++) {
      const copy = bytes.slice();
      const [lo, hi] = regions[i % regions.length];
      const at = lo + Math.floor(rand() * (hi - lo));
      copy[at] ^= 1 << Math.floor(rand() * 8);
      const r = await outcome(copy);
      kinds.set(r, (kinds.get(r) ?? 0) + 1);
    }
    t.pass(`20 header flips: ${[...kinds].map(([k, v]) => `${v} ${k}`).join(', ')}`);
  });
}

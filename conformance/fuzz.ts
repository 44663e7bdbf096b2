/**
 * Long differential fuzzing (`make fuzz`): random programs in batches, alternating Binaryen -O0 and
 * -O2, until FUZZ_SECONDS (default 3600) pass. Each divergence is minimised by delta debugging over
 * the program's items and saved under conformance/regressions/ (the .s and qemu's output).
 * Usage: node --stack-size=4000 --import ./scripts/ts/register.mjs conformance/fuzz.ts [firstSeed]
 */
import { generate, toTest, type FuzzProgram } from './gen-fuzz.js';
import { runBatch, saveRegression } from './lib.js';

const seconds = Number(process.env.FUZZ_SECONDS ?? 3600);
const batchSize = Number(process.env.FUZZ_BATCH ?? 200);
let seed = Number(process.argv[2] ?? process.env.FUZZ_SEED ?? Date.now() % 1_000_000_000);

async function diverges(p: FuzzProgram, keep: number[], level: number): Promise<boolean> {
  try {
    const r = await runBatch([toTest(p, keep)], false, level);
    return r.divergences.length > 0;
  } catch {
    return false; // does not build or qemu fails: not the same failure
  }
}

/** ddmin-style reduction of the item list. */
export async function minimise(p: FuzzProgram, level: number): Promise<number[]> {
  let keep = p.items.map((_, i) => i);
  let n = 2;
  while (keep.length >= 2) {
    const size = Math.ceil(keep.length / n);
    let reduced = false;
    for (let i = 0; i < keep.length; i += size) {
      const cand = [...keep.slice(0, i), ...keep.slice(i + size)];
      if (await diverges(p, cand, level)) {
        keep = cand;
        n = Math.max(n - 1, 2);
        reduced = true;
        break;
      }
    }
    if (!reduced) {
      if (size === 1) break;
      n = Math.min(n * 2, keep.length);
    }
  }
  return keep;
}

if (process.argv[1]?.endsWith('fuzz.ts')) await main();

async function main(): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  let programs = 0;
  let instructions = 0;
  let found = 0;
  let level = 0;
  while (Date.now() < deadline) {
    const progs = Array.from({ length: batchSize }, (_, i) => generate(seed + i));
    const r = await runBatch(
      progs.map((p) => toTest(p)),
      false,
      level,
    );
    programs += progs.length;
    instructions += r.names.reduce((a, n) => a + n.length, 0);
    for (const d of r.divergences) {
      const p = progs[d.index];
      found++;
      console.log(`divergence: seed ${p.seed} at O${level}\n  ${d.details.join('\n  ')}`);
      const keep = await minimise(p, level);
      const test = toTest(p, keep);
      const again = await runBatch([test], false, level);
      const name = `fuzz-${p.seed}-O${level}`;
      saveRegression(
        name,
        [test],
        again.qemuOut,
        [
          `fuzz divergence, seed ${p.seed}, Binaryen -O${level}, minimised to ${keep.length} of ${p.items.length} items`,
          ...again.divergences.flatMap((x) => x.details),
        ].join('\n'),
        true,
      );
      console.log(`  saved conformance/regressions/${name}.s (${keep.length} items)`);
    }
    seed += batchSize;
    level = level === 0 ? 2 : 0;
    console.log(
      `${programs} programs, ${instructions} instructions, ${found} divergences (next seed ${seed})`,
    );
  }
}

/**
 * How the optimising tier's time grows with function size, on real guests: every guest function
 * is built into a Binaryen module (as src/translate/module.ts does), then optimised one function
 * at a time with the function passes of module.ts's PIPELINE (`functions` up to
 * MAX_OPTIMIZED_INSTRUCTIONS, `long` above), timing each. Prints, per size bucket, the
 * functions, instructions and ms, and the least-squares exponent k of ms ~ instructions^k over
 * functions of at least 200 instructions (k ≈ 1: linear; k well above 1: superlinear).
 *   node --stack-size=4000 --import ./scripts/ts/register.mjs bench/opt-scaling.ts ELF...
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import binaryen from 'binaryen';
import { readElf } from '../src/elf/reader.js';
import { DEFAULT_TRANSLATE_OPTIONS } from '../src/translate/abi.js';
import { buildModule, PIPELINE } from '../src/translate/module.js';

for (const path of process.argv.slice(2)) {
  const image = readElf(new Uint8Array(readFileSync(path)));
  const { module: m, long, sizes } = buildModule(image, DEFAULT_TRANSLATE_OPTIONS);
  const rows: { n: number; ms: number }[] = [];
  for (let i = 0; i < m.getNumFunctions(); i++) {
    const f = m.getFunctionByIndex(i);
    const info = binaryen.getFunctionInfo(f);
    const n = sizes.get(info.name);
    if (info.module || n === undefined) continue;
    const t0 = performance.now();
    m.runPassesOnFunction(f, long.has(info.name) ? PIPELINE.long : PIPELINE.functions);
    rows.push({ n, ms: performance.now() - t0 });
  }
  m.dispose();
  const total = rows.reduce((s, r) => s + r.ms, 0);
  console.log(`${basename(path)}: ${rows.length} functions, optimised in ${total.toFixed(0)} ms`);
  for (const [lo, hi] of [
    [0, 100],
    [100, 300],
    [300, 1000],
    [1000, 2000],
    [2000, Infinity],
  ]) {
    const b = rows.filter((r) => r.n >= lo && r.n < hi);
    if (b.length === 0) continue;
    const insns = b.reduce((s, r) => s + r.n, 0);
    const ms = b.reduce((s, r) => s + r.ms, 0);
    console.log(
      `  ${lo}-${hi} instructions: ${b.length} functions, ${insns} instructions, ${ms.toFixed(0)} ms, ` +
        `${((1000 * ms) / insns).toFixed(1)} µs/instruction`,
    );
  }
  const big = rows.filter((r) => r.n >= 200 && r.ms > 0);
  const xs = big.map((r) => Math.log(r.n));
  const ys = big.map((r) => Math.log(r.ms));
  const mx = xs.reduce((a, b) => a + b, 0) / xs.length;
  const my = ys.reduce((a, b) => a + b, 0) / ys.length;
  const k =
    xs.reduce((s, x, i) => s + (x - mx) * (ys[i] - my), 0) / xs.reduce((s, x) => s + (x - mx) ** 2, 0);
  console.log(
    `  exponent k of ms ~ instructions^k over ${big.length} functions >= 200 instructions: ${k.toFixed(2)}`,
  );
}

/**
 * Compare two benchmark result files figure by figure:
 *   node --import ./scripts/ts/register.mjs bench/compare.ts A.json B.json [--threshold 1.10] [--fail]
 * prints B/A for every figure; with --fail the exit status is 1 when any figure regressed by more
 * than the threshold (for CI jobs comparing two commits).
 */
import { readFileSync } from 'node:fs';
import { compareResults, comparisonTable } from './lib/compare.js';
import type { Results } from './lib/figures.js';

function main(argv: string[]): number {
  const files: string[] = [];
  let threshold = 1.1;
  let fail = false;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--threshold') threshold = Number(argv[++i]);
    else if (argv[i] === '--fail') fail = true;
    else files.push(argv[i]);
  }
  if (files.length !== 2) {
    console.error('usage: bench/compare.ts A.json B.json [--threshold 1.10] [--fail]');
    return 2;
  }
  const [a, b] = files.map((f) => JSON.parse(readFileSync(f, 'utf8')) as Results);
  const c = compareResults(a, b, threshold);
  console.log(`A: ${files[0]} (${a.meta.commit}, ${a.meta.date})`);
  console.log(`B: ${files[1]} (${b.meta.commit}, ${b.meta.date})`);
  console.log(comparisonTable(c));
  if (c.regressions.length > 0) {
    console.log(
      `\n${c.regressions.length} figure(s) regressed by more than ${threshold}x: ${c.regressions.join(', ')}`,
    );
  }
  return fail && c.regressions.length > 0 ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));

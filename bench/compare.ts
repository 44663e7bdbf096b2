/**
 * Compare two benchmark result files figure by figure:
 *   node --import ./scripts/ts/register.mjs bench/compare.ts A.json B.json [--threshold 1.10] [--fail]
 * prints B/A for every figure; with --fail the exit status is 1 when any figure regressed by more
 * than the threshold (for CI jobs comparing two commits). Exit 2 for a usage error or a file that
 * cannot be read or is not a results file (bench/results/*.json), so that a CI job never takes a
 * missing file for a regression.
 */
import { readFileSync } from 'node:fs';
import { compareResults, comparisonTable } from './lib/compare.js';
import type { Results } from './lib/figures.js';

const USAGE = 'usage: bench/compare.ts A.json B.json [--threshold 1.10] [--fail]';

/** A refusal of the command line or of an input file (exit 2). */
class InputError extends Error {}

/**
 * Read a results file written by bench/run.ts.
 * @throws InputError naming the file and what is wrong with it
 */
function readResults(file: string): Results {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new InputError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  let r: unknown;
  try {
    r = JSON.parse(text);
  } catch (e) {
    throw new InputError(`${file} is not JSON: ${(e as Error).message}`);
  }
  const o = r as Partial<Results> | null;
  if (
    typeof o !== 'object' ||
    o === null ||
    typeof o.meta !== 'object' ||
    o.meta === null ||
    typeof o.figures !== 'object' ||
    o.figures === null
  ) {
    throw new InputError(
      `${file} is not a benchmark results file ({version, meta, figures}, as make bench writes to bench/results/)`,
    );
  }
  return o as Results;
}

function main(argv: string[]): number {
  const files: string[] = [];
  let threshold = 1.1;
  let fail = false;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--threshold') {
      threshold = Number(argv[++i]);
      if (!(threshold >= 1))
        throw new InputError(`--threshold must be a number >= 1 (got ${argv[i]}); ${USAGE}`);
    } else if (argv[i] === '--fail') fail = true;
    else if (argv[i].startsWith('-')) throw new InputError(`unknown option ${argv[i]}; ${USAGE}`);
    else files.push(argv[i]);
  }
  if (files.length !== 2) throw new InputError(USAGE);
  const [a, b] = files.map(readResults);
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

try {
  process.exitCode = main(process.argv.slice(2));
} catch (e) {
  if (!(e instanceof InputError)) throw e;
  console.error(`bench/compare.ts: ${e.message}`);
  process.exitCode = 2;
}

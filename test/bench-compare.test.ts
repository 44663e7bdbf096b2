// bench/lib/compare.ts: figure-by-figure ratios of two benchmark result files (logic only, no timing).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { compareResults, comparisonTable } from '../bench/lib/compare.js';
import { geomean, percentile, type Figure, type Results } from '../bench/lib/figures.js';
import { ROOT } from './helpers/fixtures.js';

function results(figures: Record<string, Partial<Figure> & { value: number }>): Results {
  const full: Record<string, Figure> = {};
  for (const [k, f] of Object.entries(figures)) full[k] = { unit: 'ms', better: 'lower', label: k, ...f };
  return {
    version: 1,
    meta: {
      date: '2026-01-01T00:00:00Z',
      commit: 'abc',
      node: 'v20',
      cpu: 'x',
      nproc: 1,
      platform: 'linux-x64',
      durationS: 1,
    },
    figures: full,
  };
}

t.test('ratios and statuses', async (t) => {
  const a = results({
    lat: { value: 10 },
    speed: { value: 100, better: 'higher' },
    same: { value: 5 },
    small: { value: 10 },
    gone: { value: 1 },
  });
  const b = results({
    lat: { value: 12 },
    speed: { value: 80, better: 'higher' },
    same: { value: 5 },
    small: { value: 10.5 },
    added: { value: 2 },
  });
  const c = compareResults(a, b, 1.1);
  const by = Object.fromEntries(c.rows.map((r) => [r.name, r]));
  t.equal(by.lat.ratio, 1.2);
  t.equal(by.lat.status, 'regressed', 'lower-is-better figure up 20 % is a regression');
  t.equal(by.speed.status, 'regressed', 'higher-is-better figure down 20 % is a regression');
  t.equal(by.same.status, 'same');
  t.equal(by.small.status, 'worse', 'within the threshold: worse, not regressed');
  t.equal(by.gone.status, 'only-a');
  t.equal(by.added.status, 'only-b');
  t.equal(by.added.ratio, null);
  t.same(c.regressions.sort(), ['lat', 'speed']);
  const better = compareResults(b, a, 1.1);
  t.equal(better.rows.find((r) => r.name === 'lat')!.status, 'better');
  t.match(comparisonTable(c), /lat\s+10\s+12\s+ms\s+1\.200\s+regressed/);
});

t.test('edge cases', async (t) => {
  const c = compareResults(results({ z: { value: 0 } }), results({ z: { value: 3 } }));
  t.equal(c.rows[0].ratio, null, 'a zero base gives no ratio');
  t.throws(() => compareResults(results({}), results({}), 0.5), RangeError);
});

t.test('statistics helpers', async (t) => {
  const s = [5, 1, 4, 2, 3, 6, 7, 8, 9, 10];
  t.equal(percentile(s, 50), 5);
  t.equal(percentile(s, 99), 10);
  t.equal(percentile(s, 0), 1);
  t.ok(Number.isNaN(percentile([], 50)));
  t.equal(geomean([2, 8]), 4);
});

t.test(
  'bench/compare.ts: exit 1 only for a regression under --fail; 2 for what is not a comparison',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'berm-compare-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const base = join(dir, 'base.json');
    const slower = join(dir, 'slower.json');
    const notResults = join(dir, 'other.json');
    writeFileSync(base, JSON.stringify(results({ lat: { value: 10 } })));
    writeFileSync(slower, JSON.stringify(results({ lat: { value: 20 } })));
    writeFileSync(notResults, '{"name":"berm"}');
    const compare = (...args: string[]) =>
      spawnSync(process.execPath, ['--import', './scripts/ts/register.mjs', 'bench/compare.ts', ...args], {
        cwd: ROOT,
        encoding: 'utf8',
        timeout: 60_000,
      });
    t.equal(compare(base, slower).status, 0, 'a regression without --fail');
    t.equal(compare(base, slower, '--fail').status, 1, 'a regression with --fail');
    t.equal(compare(base, base, '--fail').status, 0, 'no regression');
    const cases: [string[], string][] = [
      [
        [base, join(dir, 'missing.json'), '--fail'],
        `bench/compare.ts: cannot read ${join(dir, 'missing.json')}: ENOENT`,
      ],
      [[notResults, slower, '--fail'], `bench/compare.ts: ${notResults} is not a benchmark results file`],
      [[base, slower, '--threshold', 'x', '--fail'], '--threshold must be a number >= 1 (got x)'],
      [[base, slower, '--threshold', '0.5'], '--threshold must be a number >= 1 (got 0.5)'],
      [[base, slower, '--fial'], 'unknown option --fial'],
      [[base], 'usage: bench/compare.ts A.json B.json'],
    ];
    for (const [args, message] of cases) {
      const r = compare(...args);
      t.equal(r.status, 2, args.join(' '));
      t.match(r.stderr, message, args.join(' '));
      t.notMatch(r.stderr, /\n\s+at /, 'no stack trace');
    }
  },
);

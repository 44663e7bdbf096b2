// bench/lib/compare.ts: figure-by-figure ratios of two benchmark result files (logic only, no timing).
import t from 'tap';
import { compareResults, comparisonTable } from '../bench/lib/compare.js';
import { geomean, percentile, type Figure, type Results } from '../bench/lib/figures.js';

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

/**
 * Figure-by-figure comparison of two benchmark result files (A = base, B = candidate).
 * ratio = B / A. A figure "regressed" when it moved in its worse direction by more than the
 * threshold factor (e.g. 1.10 = 10 %): ratio > t for lower-is-better, ratio < 1/t for higher.
 */
import { fmt, table, type Figure, type Results } from './figures.js';

export interface Row {
  name: string;
  unit: string;
  a: number | null;
  b: number | null;
  /** B / A, null when a figure is missing on one side or A is zero */
  ratio: number | null;
  status: 'same' | 'better' | 'worse' | 'regressed' | 'only-a' | 'only-b';
}

export interface Comparison {
  rows: Row[];
  regressions: string[];
}

/** Compare two results; `threshold` >= 1 marks a regression. */
export function compareResults(a: Results, b: Results, threshold = 1.1): Comparison {
  if (!(threshold >= 1)) throw new RangeError(`threshold must be >= 1, got ${threshold}`);
  const names = [...new Set([...Object.keys(a.figures), ...Object.keys(b.figures)])];
  const rows: Row[] = [];
  for (const name of names) {
    const fa: Figure | undefined = a.figures[name];
    const fb: Figure | undefined = b.figures[name];
    if (!fa || !fb) {
      const f = (fa ?? fb)!;
      rows.push({
        name,
        unit: f.unit,
        a: fa?.value ?? null,
        b: fb?.value ?? null,
        ratio: null,
        status: fa ? 'only-a' : 'only-b',
      });
      continue;
    }
    const ratio = fa.value === 0 ? null : fb.value / fa.value;
    let status: Row['status'] = 'same';
    if (ratio !== null && ratio !== 1) {
      const worse = fb.better === 'lower' ? ratio > 1 : ratio < 1;
      const factor = fb.better === 'lower' ? ratio : 1 / ratio;
      status = worse ? (factor > threshold ? 'regressed' : 'worse') : 'better';
    }
    rows.push({ name, unit: fb.unit, a: fa.value, b: fb.value, ratio, status });
  }
  return { rows, regressions: rows.filter((r) => r.status === 'regressed').map((r) => r.name) };
}

/** The comparison as a plain-text table. */
export function comparisonTable(c: Comparison): string {
  const v = (x: number | null): string => (x === null ? '-' : fmt(x));
  return table(
    ['figure', 'A', 'B', 'unit', 'B/A', 'status'],
    c.rows.map((r) => [
      r.name,
      v(r.a),
      v(r.b),
      r.unit,
      r.ratio === null ? '-' : r.ratio.toFixed(3),
      r.status,
    ]),
  );
}

/**
 * Benchmark figures: one flat map from a stable dotted name to a value, so that two runs (two
 * commits) can be compared figure by figure (bench/compare.ts).
 */

/** Which direction is an improvement. */
export type Better = 'lower' | 'higher';

export interface Figure {
  value: number;
  unit: string;
  better: Better;
  /** what the figure is, one line */
  label: string;
  /** an external reference figure in the same unit, for the table only (not compared) */
  anchor?: string;
}

export interface Results {
  /** format version of this file */
  version: 1;
  meta: {
    date: string;
    commit: string;
    node: string;
    cpu: string;
    nproc: number;
    platform: string;
    /** wall time of the whole run, seconds */
    durationS: number;
  };
  figures: Record<string, Figure>;
}

/** Percentile by nearest rank of an unsorted sample (p in 0..100). */
export function percentile(sample: readonly number[], p: number): number {
  if (sample.length === 0) return NaN;
  const s = [...sample].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * s.length);
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))];
}

export function median(sample: readonly number[]): number {
  return percentile(sample, 50);
}

export function geomean(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  return Math.exp(values.reduce((s, v) => s + Math.log(v), 0) / values.length);
}

/** A number with 3 significant digits (integers above 1000 in full). */
export function fmt(v: number): string {
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (a >= 1000) return Math.round(v).toString();
  if (a === 0) return '0';
  return v.toPrecision(3).replace(/\.?0+$/, (m) => (m.includes('.') ? '' : m));
}

/** A plain-text table, columns left-aligned, header underlined. */
export function table(header: string[], rows: string[][]): string {
  const w = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]): string =>
    r
      .map((c, i) => c.padEnd(w[i]))
      .join('  ')
      .trimEnd();
  return [line(header), line(w.map((n) => '-'.repeat(n))), ...rows.map(line)].join('\n');
}

/** The results as the table `make bench` prints. */
export function resultsTable(r: Results): string {
  const rows = Object.entries(r.figures).map(([k, f]) => [k, fmt(f.value), f.unit, f.anchor ?? '', f.label]);
  return table(['figure', 'value', 'unit', 'anchor', 'what'], rows);
}

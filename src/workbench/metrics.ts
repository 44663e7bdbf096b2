/**
 * Reading the daemon's Prometheus metrics (GET /metrics) for the Health view: a parser of the text
 * exposition format (the lines the daemon writes: `name{labels} value`), and the figures derived
 * from two scrapes: throughput, latency quantiles from histogram bucket differences, gauges.
 */

/** One scrape, reduced: counters and gauges summed over labels, histogram buckets by `le`. */
export interface Sample {
  /** ms since the epoch */
  at: number;
  invocations: number;
  /** cumulative bucket counts of berm_invocation_seconds by upper bound, seconds (Infinity last) */
  buckets: [number, number][];
  queueDepth: number;
  inFlight: number;
  wakesPending: number;
  deployments: number;
}

/** Parse the exposition text into a {@link Sample}. */
export function parseMetrics(text: string, at: number): Sample {
  const sums = new Map<string, number>();
  const buckets = new Map<number, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const [, name, labels, v] = m as unknown as [string, string, string | undefined, string];
    const value = Number(v);
    if (!Number.isFinite(value) && v !== '+Inf') continue;
    if (name === 'berm_invocation_seconds_bucket') {
      const le = /le="([^"]+)"/.exec(labels ?? '')?.[1];
      if (le === undefined) continue;
      const bound = le === '+Inf' ? Infinity : Number(le);
      buckets.set(bound, (buckets.get(bound) ?? 0) + value);
      continue;
    }
    sums.set(name, (sums.get(name) ?? 0) + value);
  }
  return {
    at,
    invocations: sums.get('berm_invocations_total') ?? 0,
    buckets: [...buckets].sort((a, b) => a[0] - b[0]),
    queueDepth: sums.get('berm_queue_depth') ?? 0,
    inFlight: sums.get('berm_in_flight') ?? 0,
    wakesPending: sums.get('berm_wakes_pending') ?? 0,
    deployments: sums.get('berm_deployments') ?? 0,
  };
}

/**
 * The `q` quantile (0..1) of the observations made between two scrapes, by linear interpolation
 * inside the bucket that holds it, seconds; null when nothing was observed.
 */
export function quantile(older: Sample, newer: Sample, q: number): number | null {
  const before = new Map(older.buckets);
  const diff = newer.buckets.map(([le, n]) => [le, n - (before.get(le) ?? 0)] as [number, number]);
  const total = diff.length > 0 ? diff[diff.length - 1]![1] : 0;
  if (total <= 0) return null;
  const rank = q * total;
  let prevLe = 0;
  let prevN = 0;
  for (const [le, n] of diff) {
    if (n >= rank) {
      if (le === Infinity) return prevLe;
      const inBucket = n - prevN;
      return inBucket <= 0 ? le : prevLe + ((le - prevLe) * (rank - prevN)) / inBucket;
    }
    prevLe = le;
    prevN = n;
  }
  return prevLe;
}

/**
 * Health: throughput, latency percentiles and queue depth over the last minutes, from the
 * daemon's own metrics (GET /metrics, scraped every 2 s while the view is open; the samples are
 * kept for 10 minutes across views).
 */
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api';
import { parseMetrics, quantile, type Sample } from '../metrics';
import { ErrorBox } from './ui';

const INTERVAL_MS = 2000;
const KEEP = 300;
const samples: Sample[] = [];

function Spark(props: { values: number[]; label: string; unit: string }) {
  const w = 300;
  const h = 60;
  const max = Math.max(1e-9, ...props.values);
  const pts = props.values
    .map((v, i) => `${(i / Math.max(1, props.values.length - 1)) * w},${h - (v / max) * (h - 4) - 2}`)
    .join(' ');
  return (
    <svg
      class="spark"
      viewBox={`0 0 ${w} ${h}`}
      role="img"
      aria-label={`${props.label}: last ${props.values.length} samples, peak ${max.toFixed(2)} ${props.unit}`}
      preserveAspectRatio="none"
    >
      <polyline
        points={pts}
        fill="none"
        stroke="currentColor"
        stroke-width="2"
        vector-effect="non-scaling-stroke"
      />
    </svg>
  );
}

function fmtMs(s: number | null): string {
  if (s === null) return '—';
  const ms = s * 1000;
  return ms < 1 ? `${(ms * 1000).toFixed(0)} µs` : ms < 100 ? `${ms.toFixed(1)} ms` : `${ms.toFixed(0)} ms`;
}

export function HealthView() {
  const [, redraw] = useState(0);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let stop = false;
    const scrape = async (): Promise<void> => {
      try {
        const text = await api<string>('GET', '/metrics');
        samples.push(parseMetrics(text, Date.now()));
        if (samples.length > KEEP) samples.splice(0, samples.length - KEEP);
        setError(null);
      } catch (e) {
        setError((e as Error).message);
      }
      if (!stop) redraw((n) => n + 1);
    };
    void scrape();
    const t = setInterval(() => void scrape(), INTERVAL_MS);
    return () => {
      stop = true;
      clearInterval(t);
    };
  }, []);
  const last = samples[samples.length - 1];
  const rates: number[] = [];
  for (let i = 1; i < samples.length; i++) {
    const dt = (samples[i]!.at - samples[i - 1]!.at) / 1000;
    rates.push(dt > 0 ? Math.max(0, samples[i]!.invocations - samples[i - 1]!.invocations) / dt : 0);
  }
  const windowStart = last ? (samples.find((s) => s.at >= last.at - 60_000) ?? samples[0]!) : undefined;
  const q = (p: number): number | null =>
    last && windowStart && windowStart !== last ? quantile(windowStart, last, p) : null;
  const p99s: number[] = [];
  for (let i = 1; i < samples.length; i++)
    p99s.push((quantile(samples[i - 1]!, samples[i]!, 0.99) ?? 0) * 1000);
  return (
    <section class="health">
      <div class="view-head">
        <h1>Health</h1>
        <span class="muted">from /metrics every {INTERVAL_MS / 1000} s</span>
      </div>
      <ErrorBox message={error} />
      <div class="stats">
        <div class="card stat">
          <h2>Throughput</h2>
          <p class="big" data-stat="throughput">
            {rates.length ? rates[rates.length - 1]!.toFixed(1) : '—'} <small>calls/s</small>
          </p>
          <Spark values={rates} label="Throughput" unit="calls/s" />
        </div>
        <div class="card stat">
          <h2>Latency, last minute</h2>
          <dl class="pct">
            <dt>p50</dt>
            <dd data-stat="p50">{fmtMs(q(0.5))}</dd>
            <dt>p90</dt>
            <dd>{fmtMs(q(0.9))}</dd>
            <dt>p99</dt>
            <dd data-stat="p99">{fmtMs(q(0.99))}</dd>
          </dl>
          <Spark values={p99s} label="p99 latency" unit="ms" />
        </div>
        <div class="card stat">
          <h2>Queue</h2>
          <p class="big" data-stat="queue">
            {last ? last.queueDepth : '—'} <small>waiting</small>
          </p>
          <p class="muted">
            {last
              ? `${last.inFlight} running · ${last.wakesPending} wakes pending · ${last.deployments} deployed`
              : ''}
          </p>
          <Spark values={samples.map((s) => s.queueDepth)} label="Queue depth" unit="calls" />
        </div>
      </div>
      <p class="muted">Total invocations since bermd started: {last ? last.invocations : '—'}</p>
    </section>
  );
}

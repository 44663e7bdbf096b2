/**
 * Prometheus metrics of the daemon (prom-client, a private registry): the runtime's gauges read at
 * scrape time, invocation outcomes and latency from the runtime's invocation events, HTTP
 * requests by route and status, and the process's default metrics.
 *
 * Names: berm_queue_depth, berm_in_flight, berm_wakes_pending, berm_deployments,
 * berm_wakes_dead{harness} (gauges); berm_spills_total, berm_translations_total,
 * berm_wakes_dead_total (counters mirrored from the runtime); berm_invocations_total{trigger,outcome}
 * (counter); berm_calls_cancelled_total{state} (queued, running: calls whose caller went away,
 * mirrored from the runtime); berm_invocation_seconds{trigger} (histogram);
 * berm_http_requests_total{route,status} (counter); berm_http_write_timeouts_total,
 * berm_http_timeouts_total{kind} (headers, body, idle) and berm_http_connections_shed_total{reason}
 * (evicted, over-capacity, per-address) (counters).
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Backend } from './backend.js';

/** The daemon's metric registry and the hooks that feed it. */
export class Metrics {
  readonly registry = new Registry();
  private readonly http: Counter<'route' | 'status'>;
  private readonly writeTimeouts: Counter;
  private readonly timeouts: Counter<'kind'>;
  private readonly shedConns: Counter<'reason'>;

  /**
   * @param backend the runtime whose stats and invocation events are exported
   * @param deployments returns the number of published harnesses
   */
  constructor(backend: Backend, deployments: () => number) {
    const r = this.registry;
    collectDefaultMetrics({ register: r });
    const gauge = (name: string, help: string, read: () => number): void => {
      new Gauge({
        name,
        help,
        registers: [r],
        collect() {
          this.set(read());
        },
      });
    };
    gauge('berm_queue_depth', 'invocations waiting for a worker', () => backend.stats().queueDepth);
    gauge('berm_in_flight', 'invocations running on workers', () => backend.stats().inFlight);
    gauge('berm_wakes_pending', 'armed wakes not yet fired', () => backend.stats().wakesPending);
    gauge('berm_deployments', 'published harnesses', deployments);
    const mirrored = (name: string, help: string, read: () => number): void => {
      let last = 0;
      new Counter({
        name,
        help,
        registers: [r],
        collect() {
          const v = read();
          if (v > last) this.inc(v - last);
          last = Math.max(last, v);
        },
      });
    };
    mirrored(
      'berm_spills_total',
      'due wakes deferred to the next drain (pool full or a per-harness limit)',
      () => backend.stats().spills,
    );
    mirrored(
      'berm_translations_total',
      'ELF to Wasm translations (cache misses)',
      () => backend.stats().translations.translated,
    );
    mirrored(
      'berm_wakes_dead_total',
      'wakes this daemon moved to the dead-letter set (their deliveries all ended through a host fault)',
      () => backend.stats().deadLettered ?? 0,
    );
    new Gauge({
      name: 'berm_wakes_dead',
      help: 'entries of the dead-letter set by harness (the whole set of a shared store)',
      labelNames: ['harness'] as const,
      registers: [r],
      collect() {
        this.reset();
        for (const [harness, n] of Object.entries(backend.deadCounts?.() ?? {})) this.set({ harness }, n);
      },
    });
    // calls whose caller went away: dropped from the queue, or interrupted while they ran
    const cancelledSeen = { queued: 0, running: 0 };
    new Counter({
      name: 'berm_calls_cancelled_total',
      help: 'calls cancelled because their HTTP client disconnected or their MCP session ended, by the state they were in: queued (dropped) or running (interrupted)',
      labelNames: ['state'] as const,
      registers: [r],
      collect() {
        const now = backend.stats().cancelled ?? { queued: 0, running: 0 };
        for (const state of ['queued', 'running'] as const) {
          this.inc({ state }, Math.max(0, now[state] - cancelledSeen[state]));
          cancelledSeen[state] = Math.max(cancelledSeen[state], now[state]);
        }
      },
    });
    const invocations = new Counter({
      name: 'berm_invocations_total',
      help: 'finished invocations by trigger and outcome',
      labelNames: ['trigger', 'outcome'] as const,
      registers: [r],
    });
    const latency = new Histogram({
      name: 'berm_invocation_seconds',
      help: 'invocation wall time from enqueue to outcome',
      labelNames: ['trigger'] as const,
      buckets: [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
      ],
      registers: [r],
    });
    backend.onInvocation((e) => {
      invocations.inc({ trigger: e.trigger, outcome: e.outcome });
      latency.observe({ trigger: e.trigger }, e.seconds);
    });
    this.http = new Counter({
      name: 'berm_http_requests_total',
      help: 'HTTP requests by route and status',
      labelNames: ['route', 'status'] as const,
      registers: [r],
    });
    this.writeTimeouts = new Counter({
      name: 'berm_http_write_timeouts_total',
      help: 'connections closed because their reply bytes waited unread longer than --write-timeout',
      registers: [r],
    });
    this.timeouts = new Counter({
      name: 'berm_http_timeouts_total',
      help: 'connections timed out by kind: headers (408), body (408), idle (kept-alive, closed)',
      labelNames: ['kind'] as const,
      registers: [r],
    });
    this.shedConns = new Counter({
      name: 'berm_http_connections_shed_total',
      help: 'connections closed or turned away at a connection cap: evicted (no headers yet), over-capacity, per-address',
      labelNames: ['reason'] as const,
      registers: [r],
    });
    for (const kind of ['headers', 'body', 'idle']) this.timeouts.inc({ kind }, 0);
    for (const reason of ['evicted', 'over-capacity', 'per-address']) this.shedConns.inc({ reason }, 0);
  }

  /**
   * Count one connection timed out: `headers` (its request's headers did not arrive within the
   * headers timeout: 408), `body` (its request body did not arrive within --body-timeout: 408) or
   * `idle` (a kept-alive connection without a request for the keep-alive timeout: closed).
   */
  timeout(kind: 'headers' | 'body' | 'idle'): void {
    this.timeouts.inc({ kind });
  }

  /** Count one connection closed or turned away at a connection cap (src/daemon/connections.ts). */
  shed(reason: string): void {
    this.shedConns.inc({ reason });
  }

  /** Count one connection closed by the write timeout. */
  writeTimeout(): void {
    this.writeTimeouts.inc();
  }

  /** Count one HTTP response. `route` is the route pattern (never the raw path: bounded labels). */
  request(route: string, status: number): void {
    this.http.inc({ route, status: String(status) });
  }

  /** The exposition text and its content type. */
  async render(): Promise<{ contentType: string; text: string }> {
    return { contentType: this.registry.contentType, text: await this.registry.metrics() };
  }
}

/**
 * The change feed, `GET /events`: a Server-Sent Events stream of what changes in the daemon, so
 * the workbench (and any other client) updates live without polling. Event types and their data
 * (JSON, snake_case like the rest of the API):
 *
 *   deploy          the inspect shape of GET /harnesses/{name} (a new or replaced image)
 *   undeploy        {"name"}
 *   wake.armed      the wake shape of GET /wakes
 *   wake.fired      {"id", "harness", "scheduled_at", "fired_at", "late_ms", "attempt"} (ms)
 *   wake.cancelled  {"id", "harness"}
 *   invocation      {"harness", "trigger": "call"|"wake"|"notify", "outcome", "ms"}
 *
 * Each event has an increasing `id:`. A stream opens with a `retry:` hint and a comment, and gets a
 * comment every {@link KEEPALIVE_MS} so proxies and the client see it alive. A subscriber that does
 * not read (more than {@link MAX_BUFFERED_BYTES} waiting) is dropped rather than buffered without
 * bound; at most {@link MAX_SUBSCRIBERS} streams are open at once (503 beyond). The last
 * {@link RECENT_FIRINGS} wake firings are kept for the workbench's Wakes view (recentFirings).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Backend } from './backend.js';
import { HttpError } from './http.js';

/** Open event streams at most. */
export const MAX_SUBSCRIBERS = 64;
/** Bytes waiting unread on one stream before it is dropped. */
export const MAX_BUFFERED_BYTES = 1 << 20;
/** Interval of the keep-alive comment, ms. */
export const KEEPALIVE_MS = 15_000;
/** Wake firings kept for {@link EventHub.recentFirings}. */
export const RECENT_FIRINGS = 100;

/** A wake firing as the feed reports it (ms since the epoch, lateness in ms). */
export interface WakeFired {
  id: string;
  harness: string;
  scheduled_at: number;
  fired_at: number;
  late_ms: number;
  attempt: number;
}

/** The fan-out of change events to SSE subscribers. */
export class EventHub {
  private readonly subscribers = new Set<ServerResponse>();
  private seq = 0;
  private readonly fired: WakeFired[] = [];
  private readonly keepalive: NodeJS.Timeout;

  constructor() {
    this.keepalive = setInterval(() => {
      for (const res of this.subscribers) this.write(res, ': keepalive\n\n');
    }, KEEPALIVE_MS);
    this.keepalive.unref();
  }

  /** Number of open streams. */
  get size(): number {
    return this.subscribers.size;
  }

  /**
   * Send one event to every subscriber.
   * @param type event name (see the module comment)
   * @param data JSON-serialisable payload
   */
  publish(type: string, data: Record<string, unknown>): void {
    if (type === 'wake.fired') {
      this.fired.unshift(data as unknown as WakeFired);
      if (this.fired.length > RECENT_FIRINGS) this.fired.length = RECENT_FIRINGS;
    }
    if (this.subscribers.size === 0) return;
    const text = `id: ${++this.seq}\nevent: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
    for (const res of this.subscribers) this.write(res, text);
  }

  /** The most recent wake firings, newest first (at most {@link RECENT_FIRINGS}). */
  recentFirings(): WakeFired[] {
    return [...this.fired];
  }

  /**
   * Answer `GET /events`: open the stream and keep it until the client leaves or {@link close}.
   * @throws HttpError 503 when {@link MAX_SUBSCRIBERS} streams are open
   */
  subscribe(req: IncomingMessage, res: ServerResponse): void {
    if (this.subscribers.size >= MAX_SUBSCRIBERS) {
      res.setHeader('retry-after', '5');
      throw new HttpError(503, `at most ${MAX_SUBSCRIBERS} event streams are served at once; retry later`);
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-accel-buffering': 'no',
    });
    res.write('retry: 2000\n: berm events\n\n');
    this.subscribers.add(res);
    const drop = (): void => {
      this.subscribers.delete(res);
    };
    req.on('close', drop);
    res.on('close', drop);
  }

  /** End every stream and stop the keep-alive. */
  close(): void {
    clearInterval(this.keepalive);
    for (const res of this.subscribers) res.end();
    this.subscribers.clear();
  }

  private write(res: ServerResponse, text: string): void {
    if (res.writableEnded || res.destroyed) {
      this.subscribers.delete(res);
      return;
    }
    if (res.writableLength > MAX_BUFFERED_BYTES) {
      this.subscribers.delete(res);
      res.destroy();
      return;
    }
    res.write(text);
  }
}

/**
 * Feed `hub` from the daemon's sources: deployments published and removed (locally or by another
 * daemon sharing the store), the runtime's wake events, and finished invocations.
 * @param describeDeployment the inspect shape of a published harness by name, or null when gone
 */
export function feedEvents(
  hub: EventHub,
  deployments: { on(e: 'changed', l: (name: string, kind: 'deployed' | 'removed') => void): unknown },
  describeDeployment: (name: string) => Record<string, unknown> | null,
  backend: Backend,
): void {
  deployments.on('changed', (name, kind) => {
    if (kind === 'removed') return hub.publish('undeploy', { name });
    const d = describeDeployment(name);
    if (d !== null) hub.publish('deploy', d);
  });
  backend.onInvocation((e) =>
    hub.publish('invocation', {
      harness: e.harness,
      trigger: e.trigger,
      outcome: e.outcome,
      ms: Math.round(e.seconds * 1e6) / 1e3,
    }),
  );
  backend.onWakeEvent?.((e) => {
    if (e.type === 'armed') hub.publish('wake.armed', e.wake);
    else if (e.type === 'cancelled') hub.publish('wake.cancelled', { id: e.id, harness: e.harness });
    else
      hub.publish('wake.fired', {
        id: e.id,
        harness: e.harness,
        scheduled_at: e.scheduledAt,
        fired_at: e.firedAt,
        late_ms: e.lateMs,
        attempt: e.attempt,
      });
  });
}

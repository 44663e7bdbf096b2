/**
 * Wiring the protocol door to the queue (the runtime's public surface), on the thread that owns
 * the queue:
 *
 * - the harness event bus (./events.ts) over the runtime's store of subscriptions (one store for
 *   the queue's state and the door's, shared by every daemon of a shared store), whose deliveries
 *   are the queue's notify triggers, so the chain depth and gas bound an event loop; the
 *   subscriptions file a berm before kept of the door's own is imported into the store once;
 * - the door's service for guests: a guest's protocol call runs on a worker thread, and the parts
 *   of it that need the queue's state (subscribe, unsubscribe, publish to harnesses, list wakes)
 *   come here as a synchronous service request ({@link PROTOCOL_SERVICE}) answered with JSON;
 * - optionally berm's protocol endpoint (./server.ts) for the agent-daemon side, arming wakes in
 *   the same due-set.
 *
 * The queue is seen through {@link QueueSurface}, the subset of src/runtime's BermRuntime used
 * here, so this module knows the queue's shape but not its code.
 */
import type { CapabilityReply } from '../capabilities/types.js';
import type { Authority } from '../contract/index.js';
import { textField } from '../wire/fields.js';
import {
  DEFAULT_RATE,
  RateLimiter,
  type RateLimit,
  type ServiceRequest,
  type SubscriptionView,
  type WakeView,
} from './door.js';
import type { SubscriptionStore } from '../store/store.js';
import { importSubscriptionFile } from '../store/subscriptions.js';
import { HarnessEventBus, SubscriptionError } from './events.js';
import { PROTOCOL_SERVICE } from './groups.js';
import { ProtocolServer, type ServerWakes } from './server.js';
// the queue's thread checks grants against its registry too: register the protocol groups here
import './index.js';

/** A pending wake as the queue lists it. */
export interface QueueWake {
  id: string;
  harness: string;
  entry: string;
  when: number;
  payload: string;
}

/**
 * Most wakes one list_wakes answers (earliest first): a harness may hold millions, of up to 64 KiB
 * of payload each, and the list is built on the queue's thread.
 */
const LIST_WAKES_LIMIT = 1000;

/**
 * Most payload bytes (UTF-8) one list_wakes answers: 4 MiB, bermd's GET /wakes budget (the
 * runtime's LIST_WAKES_MAX_BYTES; this layer sees the queue only through {@link QueueSurface}).
 */
const LIST_WAKES_MAX_BYTES = 4 * 1024 * 1024;

/**
 * The earliest pending wakes of `harness` (of all harnesses when undefined), at most
 * {@link LIST_WAKES_LIMIT} and at most {@link LIST_WAKES_MAX_BYTES} of payload, with whether some
 * were left out. The queue is asked for one wake more and one byte more than a page holds: the
 * wake past either bound shows that more are pending, and only it is read beyond the page.
 */
export function listPage(
  queue: Pick<QueueSurface, 'list'>,
  harness?: string,
): { wakes: WakeView[]; truncated: boolean } {
  const got = queue.list({
    ...(harness !== undefined ? { harness } : {}),
    limit: LIST_WAKES_LIMIT + 1,
    maxBytes: LIST_WAKES_MAX_BYTES + 1,
  });
  let bytes = 0;
  for (let i = 0; i < got.length; i++) {
    bytes += Buffer.byteLength(got[i]!.payload);
    if (i === LIST_WAKES_LIMIT || bytes > LIST_WAKES_MAX_BYTES) {
      return { wakes: got.slice(0, i).map(view), truncated: true };
    }
  }
  return { wakes: got.map(view), truncated: false };
}

/** What the door needs of the queue (BermRuntime satisfies it). */
export interface QueueSurface {
  /** the runtime's store: the door keeps its subscriptions there */
  readonly store: { readonly subscriptions: SubscriptionStore };
  /** arm a wake of `harness`'s on_wake; throws (ArmError, LimitError) when refused */
  arm(spec: {
    harness: string;
    at?: number;
    delayMs?: number;
    payload?: string;
    id?: string;
    armedBy?: string;
    /** armed by `harness`'s guest: it may replace only a wake it owns */
    guest?: boolean;
    authority?: Authority;
    /** the arming invocation's chain */
    chain?: never;
  }): QueueWake;
  /** cancel a pending wake (one `harness` owns when given) */
  cancel(id: string, harness?: string): boolean;
  /** pending wakes, earliest first (at most `limit`, ending at `maxBytes` of payload: DueStore.list) */
  list(options?: { harness?: string; limit?: number; maxBytes?: number }): QueueWake[];
  /** enqueue `harness`'s on_notify; `chain` is the publishing invocation's (the child runs deeper) */
  notify(
    harness: string,
    record: { id: string; source: string; payload: string },
    options: { chain?: never; authority?: Authority },
  ): Promise<{ status: string; error?: { message: string }; message?: string }>;
  /** register a service guests reach through CapabilityContext.service */
  registerService?(
    name: string,
    service: (harness: string, chain: unknown, request: unknown) => CapabilityReply,
  ): void;
}

/** Options of {@link attachProtocol}. */
export interface AttachOptions {
  /**
   * The SQLite file where a berm before this one kept the door's subscriptions
   * (`<state>/subscriptions.sqlite`): when it exists, its subscriptions are imported into the
   * runtime's store and it is renamed to `<file>.imported` (see importSubscriptionFile); the door
   * keeps none there. Absent: nothing to import.
   */
  database?: string;
  /** berm's protocol endpoint for the agent-daemon side (`unix:/path` or `127.0.0.1:port`) */
  endpoint?: string;
  /** log lines (refused deliveries, endpoint requests) */
  log?: (line: string) => void;
  /**
   * The door's per-harness rate limit, kept here for every worker thread at once (default
   * DEFAULT_RATE); guests' calls take their token through the service.
   */
  rate?: RateLimit;
  /** the endpoint's ProtocolServerOptions.notReady (503 while it says why) */
  notReady?: () => string | null;
}

/** The door attached to a queue. */
export interface AttachedProtocol {
  bus: HarnessEventBus;
  server?: ProtocolServer;
  /**
   * Answer one service request of the door's capability for `harness` running in `chain`
   * (register it with the queue under {@link PROTOCOL_SERVICE}). Never throws.
   */
  serve(harness: string, chain: unknown, request: unknown): CapabilityReply;
  close(): Promise<void>;
}

function view(w: QueueWake): WakeView {
  return { id: w.id, harness: w.harness, entry: w.entry, at_ms: w.when, payload: w.payload };
}

const json = (v: unknown): CapabilityReply => ({ fields: [textField(JSON.stringify(v))] });

/**
 * Attach the door to `queue`: import an old subscriptions file (`options.database`) into the
 * queue's store, route deliveries through `queue.notify`, and start the endpoint when asked.
 * @throws Error when the old subscriptions file cannot be read or imported (the message names it
 *   and the fix; nothing was imported or renamed) or the endpoint cannot listen
 */
export async function attachProtocol(queue: QueueSurface, options: AttachOptions): Promise<AttachedProtocol> {
  const log = options.log ?? (() => undefined);
  const subscriptions = queue.store.subscriptions;
  if (options.database !== undefined && options.database !== ':memory:') {
    const done = importSubscriptionFile(options.database, subscriptions);
    if (done !== null) {
      const moved = done.renumbered.map(([from, to]) => `${from} -> ${to}`).join(', ');
      log(
        `imported ${done.kept + done.renumbered.length} protocol subscription(s) from ${options.database} into the store` +
          (done.present > 0 ? ` (${done.present} already there)` : '') +
          (moved !== '' ? `; ids taken by others renumbered: ${moved}` : '') +
          `; the file is now ${done.renamedTo}`,
      );
    }
  }
  const bus = new HarnessEventBus({
    subscriptions,
    deliver: async (harness, record, ctx) => {
      const o = await queue.notify(harness, record, {
        ...(ctx.chain !== undefined ? { chain: ctx.chain as never } : {}),
        authority: ctx.authority,
      });
      if (o.status === 'refused') return { refused: o.error?.message ?? o.message ?? 'refused' };
      if (o.status === 'error') return { refused: o.message ?? 'error' };
      return {};
    },
    onRefused: (h, source, why) => log(`event ${source} -> harness ${h} refused: ${why}`),
  });
  const wakes: ServerWakes = {
    arm(w) {
      if (w.entry !== 'on_wake') {
        return { refused: `entry ${w.entry}: berm's endpoint arms wakes of on_wake only` };
      }
      try {
        return view(
          queue.arm({
            harness: w.harness,
            at: w.atMs,
            payload: w.payload,
            ...(w.id !== undefined ? { id: w.id } : {}),
            armedBy: 'protocol',
          }),
        );
      } catch (e) {
        return { refused: (e as Error).message };
      }
    },
    cancel: (id) => queue.cancel(id),
    list: (harness) => listPage(queue, harness),
  };
  let server: ProtocolServer | undefined;
  if (options.endpoint) {
    try {
      server = await ProtocolServer.listen({
        endpoint: options.endpoint,
        wakes,
        events: bus,
        log,
        ...(options.notReady ? { notReady: options.notReady } : {}),
      });
    } catch (e) {
      bus.close();
      throw e;
    }
  }
  const limiter = new RateLimiter(options.rate ?? DEFAULT_RATE);
  const serve = (harness: string, chain: unknown, request: unknown): CapabilityReply => {
    const r = request as ServiceRequest;
    try {
      switch (r.op) {
        case 'take':
          return json({ ok: limiter.take(harness), rate: limiter.rate });
        case 'subscribe':
          return json(HarnessEventBus.view(bus.subscribe(harness, r.source, r.once, r.authority)));
        case 'unsubscribe':
          return json(bus.unsubscribe(Number(r.id), harness));
        case 'list_subscriptions':
          return json(bus.list(harness).map(HarnessEventBus.view) satisfies SubscriptionView[]);
        case 'publish':
          return json(bus.publish(r.source, r.payload, { chain }));
        case 'list_wakes':
          return json(listPage(queue, harness).wakes);
        case 'arm':
          try {
            return json(
              view(
                queue.arm({
                  harness,
                  at: r.at,
                  payload: r.payload,
                  ...(r.id !== undefined ? { id: r.id } : {}),
                  armedBy: harness,
                  guest: true,
                  authority: r.authority,
                  chain: chain as never,
                }),
              ),
            );
          } catch (e) {
            return { refused: (e as Error).message };
          }
        case 'cancel':
          return json(queue.cancel(r.id, harness));
        default:
          return { refused: `${PROTOCOL_SERVICE}: unknown request` };
      }
    } catch (e) {
      return e instanceof SubscriptionError
        ? { refused: e.message }
        : { error: `${PROTOCOL_SERVICE}: ${(e as Error).message}` };
    }
  };
  queue.registerService?.(PROTOCOL_SERVICE, serve);
  return {
    bus,
    ...(server ? { server } : {}),
    serve,
    async close() {
      await server?.close();
      bus.close();
    },
  };
}

/**
 * WebSocket connections as a trigger of the queue: binds the ws capability's connections
 * (src/capabilities/ws/connections.ts) to a runtime. Each event of a connection enters the one
 * queue as an invocation of trigger `event` (the tool the dial named, the event's fields as raw
 * argument bytes), under the queue's limits like any call; a limit that refuses it for now
 * (queue depth, rate, concurrency) delays it, keeping the connection's order. The owner's
 * deployment recovers its records (a `close` of reason `restart` for each connection the previous
 * process held), its undeployment closes its connections; the records live in the runtime's
 * store, as keys of a namespace no harness can name (harness names have no colon), one per
 * process.
 */
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import {
  WsConnections,
  type Delivery,
  type WsLimits,
  type WsRecord,
} from '../capabilities/ws/connections.js';
import { WS_SERVICE, type WsRequest } from '../capabilities/ws/events.js';
import type { CapabilityReply } from '../capabilities/types.js';
import type { ChainSpec } from './worker-messages.js';
import type { KeyStore } from '../store/store.js';

/**
 * The store namespace of the connection records of the process whose state directory is `state`
 * on this host (not a harness name: those have no colon). Per process, because the connections
 * are: daemons sharing one store (PostgreSQL) each announce only the connections they held.
 */
export function recordsNamespace(state: string | undefined): string {
  return `berm:ws:${hostname()}:${state === undefined ? '-' : resolve(state)}`;
}

/** What the binding needs of the runtime (BermRuntime provides it). */
export interface ConnectionsRuntime {
  invoke(
    harness: string,
    tool: string,
    args: Uint8Array,
    opts: { trigger: 'event' },
  ): Promise<{ status: string; code?: string; error?: { limit: string } }>;
  registerService(
    name: string,
    service: (harness: string, chain: ChainSpec, request: unknown) => CapabilityReply,
  ): void;
  on(event: 'deploy', listener: (d: { name: string }) => void): unknown;
  on(event: 'undeploy', listener: (name: string) => void): unknown;
  readonly store: { readonly keys: KeyStore };
}

const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * Create the connections of `rt` with the caps `limits`, register the ws service and follow its
 * deployments; `state`: the runtime's state directory (names its records, see
 * {@link recordsNamespace}). @returns the connections (the runtime shuts them down when it closes).
 */
export function attachConnections(
  rt: ConnectionsRuntime,
  limits: WsLimits,
  log: (line: string) => void,
  state: string | undefined,
): WsConnections {
  const keys = rt.store.keys;
  const ns = recordsNamespace(state);
  const conns = new WsConnections(
    {
      deliver: async (harness, tool, args): Promise<Delivery> => {
        const o = await rt.invoke(harness, tool, args, { trigger: 'event' });
        if (o.status === 'refused') return o.error?.limit === 'closed' ? 'gone' : 'retry';
        if (o.status === 'error' && (o.code === 'unknown-harness' || o.code === 'unknown-tool'))
          return 'gone';
        return 'done';
      },
      load: (owner) => {
        const v = keys.get(ns, enc.encode(owner));
        return v === undefined ? [] : (JSON.parse(dec.decode(v)) as WsRecord[]);
      },
      save: (owner, records) => {
        if (records.length === 0) keys.delete(ns, enc.encode(owner));
        else keys.set(ns, enc.encode(owner), enc.encode(JSON.stringify(records)));
      },
      log,
    },
    limits,
  );
  rt.registerService(WS_SERVICE, (harness, _chain, request) => conns.request(harness, request as WsRequest));
  rt.on('deploy', (d) => conns.recover(d.name));
  rt.on('undeploy', (name) => conns.undeploy(name));
  return conns;
}

/**
 * The ws capability: WebSocket connections as a source of invocations.
 *   berm.ws.open  (url, harness, tool, header name, header value, ...) -> one field, the decimal id
 *   berm.ws.send  (id, payload)                                        -> no fields
 *   berm.ws.close (id)                                                 -> no fields
 * A harness dials a `ws:` or `wss:` URL and names the tool its events reach; from then on the
 * connection starts invocations of that tool through the queue: the dial's outcome, each frame,
 * the close (./events.ts frames them). The URL must pass the declared `hosts` (the rules of http:
 * ../common/hosts.ts); the target is the harness itself or one of its declared `callees` (the rule
 * of berm.call.after). This module checks the request's shape and the grant; the connections
 * themselves are process state held on the queue's thread (./connections.ts), reached through
 * the runtime's `ws` service (ctx.service). Without that service the calls answer an error.
 */
import { fieldText } from '../../wire/fields.js';
import { checkUrl, hostsGrant } from '../common/hosts.js';
import {
  arity,
  defineCapability,
  guarded,
  type Capability,
  type CapabilityContext,
  type CapabilityReply,
} from '../types.js';
import { WS_SERVICE, type WsRequest } from './events.js';

/** Most header pairs a dial may carry. */
export const WS_MAX_HEADERS = 64;

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Handshake headers a guest may not set: the client library writes them, they frame the upgrade. */
const FORBIDDEN_HEADERS: ReadonlySet<string> = new Set([
  'host',
  'connection',
  'upgrade',
  'content-length',
  'transfer-encoding',
  'keep-alive',
  'te',
  'trailer',
  'expect',
]);

function ask(name: string, ctx: CapabilityContext, req: WsRequest): CapabilityReply {
  if (!ctx.service) {
    return {
      error: `${name}: this runtime holds no connections (run the harness under berm worker or bermd)`,
    };
  }
  const reply = ctx.service(WS_SERVICE, req);
  if ('refused' in reply) return { refused: `${name}: ${reply.refused}` };
  if ('error' in reply) return { error: `${name}: ${reply.error}` };
  return reply;
}

function connectionId(name: string, field: Uint8Array): string | CapabilityReply {
  const id = fieldText(field, 'connection id');
  if (!/^[0-9]{1,15}$/.test(id)) {
    return {
      refused: `${name}: connection id must be decimal digits, got ${JSON.stringify(id.slice(0, 40))}`,
    };
  }
  return String(Number(id));
}

function open(fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply {
  const name = 'berm.ws.open';
  const bad = arity(
    name,
    fields,
    'url, harness, tool, header name, header value, ...',
    3,
    3 + 2 * WS_MAX_HEADERS,
  );
  if (bad) return bad;
  if (fields.length % 2 !== 1) return { refused: `${name}: header names and values must come in pairs` };
  const verdict = checkUrl(fieldText(fields[0]!, 'url'), ctx.grant.hosts, ['ws', 'wss']);
  if ('refused' in verdict) return { refused: `${name}: ${verdict.refused}` };
  const harness = fieldText(fields[1]!, 'harness');
  const tool = fieldText(fields[2]!, 'tool');
  if (harness === '' || tool === '') return { refused: `${name}: harness and tool must not be empty` };
  if (harness !== ctx.harness && !(ctx.grant.callees ?? []).includes(harness)) {
    return {
      refused: `${name}: ${ctx.harness} may not deliver events to ${JSON.stringify(harness)}; declare callees = ["${harness}"]`,
    };
  }
  const headers: [string, string][] = [];
  for (let i = 3; i < fields.length; i += 2) {
    const k = fieldText(fields[i]!, 'header name');
    const v = fieldText(fields[i + 1]!, 'header value');
    if (!TOKEN.test(k)) return { refused: `${name}: header name ${JSON.stringify(k)} is not an HTTP token` };
    if (/[\r\n\0]/.test(v)) return { refused: `${name}: header ${k} holds CR, LF or NUL` };
    const lower = k.toLowerCase();
    if (FORBIDDEN_HEADERS.has(lower) || lower.startsWith('sec-websocket-') || lower.startsWith('proxy-')) {
      return { refused: `${name}: header ${k} may not be set by a harness` };
    }
    headers.push([k, v]);
  }
  return ask(name, ctx, { op: 'open', url: verdict.url.href, harness, tool, headers });
}

function send(fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply {
  const name = 'berm.ws.send';
  const bad = arity(name, fields, 'id, payload', 2);
  if (bad) return bad;
  const id = connectionId(name, fields[0]!);
  if (typeof id !== 'string') return id;
  return ask(name, ctx, { op: 'send', id, payload: fields[1]! });
}

function close(fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply {
  const name = 'berm.ws.close';
  const bad = arity(name, fields, 'id', 1);
  if (bad) return bad;
  const id = connectionId(name, fields[0]!);
  if (typeof id !== 'string') return id;
  return ask(name, ctx, { op: 'close', id });
}

/** The ws capability: see the module comment and docs/capabilities.md. */
export const wsCapability: Capability = defineCapability({
  name: 'ws',
  calls: {
    'berm.ws.open': (f, c) => guarded('berm.ws.open', () => open(f, c)),
    'berm.ws.send': (f, c) => guarded('berm.ws.send', () => send(f, c)),
    'berm.ws.close': (f, c) => guarded('berm.ws.close', () => close(f, c)),
  },
  // the same key and rules as http's: without hosts the grant dials nothing
  grant: hostsGrant('stream.example.org'),
});

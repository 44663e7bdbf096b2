/**
 * The http capability:
 *   berm.http.fetch / crabtalk.http.fetch (method, url, body, header name, header value, ...)
 *     -> three fields: decimal status, headers as "name: value\n" lines, body
 * Only declared hosts are reached (./policy.ts); redirects are returned, not followed; request
 * and response bodies and the wall-clock time are capped.
 */
import { fieldText, textField, intField } from '../../wire/fields.js';
import { runSync } from '../../sync/bridge.js';
import {
  arity,
  boundedTimeout,
  callDeadline,
  defineCapability,
  guarded,
  limitsOf,
  type Capability,
  type CapabilityContext,
  type CapabilityReply,
} from '../types.js';
import type { FetchArgs, FetchResult } from './fetch-job.js';
import { checkUrl, hostsGrant } from '../common/hosts.js';

/** Limits of the http capability and their defaults (ms, bytes). */
export const HTTP_LIMITS = Object.freeze({
  /** http.fetch: wall-clock budget of one request, connect to last body byte */
  httpTimeoutMs: 30_000,
  /** http.fetch: largest request body */
  httpMaxRequestBody: 8 * 1024 * 1024,
  /** http.fetch: largest response body; more aborts the request */
  httpMaxResponseBody: 8 * 1024 * 1024,
});

const FETCH_JOB = new URL(`./fetch-job${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url);

/** Request headers a guest may not set: they control framing, routing or the connection. */
export const FORBIDDEN_REQUEST_HEADERS: ReadonlySet<string> = new Set([
  'host',
  'connection',
  'content-length',
  'transfer-encoding',
  'upgrade',
  'keep-alive',
  'te',
  'trailer',
  'expect',
  'proxy-authorization',
  'proxy-connection',
]);

/** Most header pairs a call may name. */
export const HTTP_MAX_HEADERS = 128;

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

function fetchCall(name: string, fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply {
  const bad = arity(
    name,
    fields,
    'method, url, body, header name, header value, ...',
    3,
    3 + 2 * HTTP_MAX_HEADERS,
  );
  if (bad) return bad;
  if (fields.length % 2 !== 1) return { refused: `${name}: header names and values must come in pairs` };
  const method = fieldText(fields[0]!, 'method').toUpperCase();
  if (!TOKEN.test(method))
    return { refused: `${name}: method ${JSON.stringify(method)} is not an HTTP token` };
  if (method === 'CONNECT') return { refused: `${name}: CONNECT is not allowed` };
  const verdict = checkUrl(fieldText(fields[1]!, 'url'), ctx.grant.hosts);
  if ('refused' in verdict) return { refused: `${name}: ${verdict.refused}` };
  const limits = limitsOf(ctx, HTTP_LIMITS);
  const body = fields[2]!;
  if (body.length > limits.httpMaxRequestBody) {
    return {
      refused: `${name}: request body is ${body.length} bytes; the limit is ${limits.httpMaxRequestBody}`,
    };
  }
  if (body.length > 0 && (method === 'GET' || method === 'HEAD')) {
    return { refused: `${name}: a ${method} request cannot carry a body` };
  }
  const headers: [string, string][] = [];
  for (let i = 3; i < fields.length; i += 2) {
    const k = fieldText(fields[i]!, 'header name');
    const v = fieldText(fields[i + 1]!, 'header value');
    if (!TOKEN.test(k)) return { refused: `${name}: header name ${JSON.stringify(k)} is not an HTTP token` };
    if (/[\r\n\0]/.test(v)) return { refused: `${name}: header ${k} holds CR, LF or NUL` };
    const lower = k.toLowerCase();
    if (FORBIDDEN_REQUEST_HEADERS.has(lower) || lower.startsWith('proxy-')) {
      return { refused: `${name}: header ${k} may not be set by a harness` };
    }
    headers.push([k, v]);
  }
  const args: FetchArgs = {
    method,
    url: verdict.url.href,
    body,
    headers,
    timeoutMs: boundedTimeout(ctx, limits.httpTimeoutMs),
    maxResponseBody: limits.httpMaxResponseBody,
  };
  const res = runSync<FetchResult>(FETCH_JOB, 'fetchOnce', args, args.timeoutMs, callDeadline(ctx));
  if (!res.ok) return { error: `${name}: ${verdict.url.host}: ${res.error}` };
  const r = res.value;
  return {
    fields: [intField(r.status), textField(r.headers.map(([k, v]) => `${k}: ${v}\n`).join('')), r.body],
  };
}

/** The http capability: see the module comment and docs/capabilities.md. */
export const httpCapability: Capability = defineCapability({
  name: 'http',
  calls: {
    'berm.http.fetch': (f, c) => guarded('berm.http.fetch', () => fetchCall('berm.http.fetch', f, c)),
    'crabtalk.http.fetch': (f, c) =>
      guarded('crabtalk.http.fetch', () => fetchCall('crabtalk.http.fetch', f, c)),
  },
  // Without hosts the grant reaches no host (a capability granted without its argument).
  grant: hostsGrant('api.example.org'),
  limits: HTTP_LIMITS,
});

/**
 * The harness resource:
 *
 *   GET    /harnesses                      [inspect shape...] (a bare array, sorted by name)
 *   GET    /harnesses/{name}               {name, digest, usage, tools, deps, granted, deployed_at}
 *   PUT    /harnesses/{name}               body = ELF bytes; 200 with the inspect shape
 *   DELETE /harnesses/{name}               204
 *   GET    /harnesses/{name}/code          translated code listings (src/daemon/code-routes.ts)
 *   POST   /harnesses/{name}/tools/{tool}  body = argument JSON; 200 {"done"} | {"failed"};
 *                                          Accept: text/event-stream streams berm.log lines
 *
 * Every path with a non-empty second segment names a harness: the name is checked before a route is
 * chosen, under the upstream rule (a PUT of a name that breaks it is refused 400; any other method
 * answers 404, since nothing by that name can be deployed).
 */
import type { IncomingMessage } from 'node:http';
import { MAX_AUTHORITY_CHARS } from '../../contract/index.js';
import type { Authority, InvokeOutcome, InvokeReply } from '../../contract/index.js';
import { ClientGone } from '../client-gone.js';
import type { CodeListings } from '../code-routes.js';
import { describe } from '../deployments.js';
import { HttpError, endSliced, readBody, routeHarnessName, sendJson, sendJsonBytes } from '../http.js';
import { encodeText, replyReserve, smallTextReply } from '../reply-size.js';
import type { RouteContext } from './context.js';
import { segment, type Resource, type RouteRequest } from './router.js';

const AUTHORITY_HEADERS = {
  agent: 'x-berm-agent',
  session: 'x-berm-session',
  sender: 'x-berm-sender',
} as const;

/**
 * The authority an HTTP request states (`X-Berm-Agent`, `X-Berm-Session`, `X-Berm-Sender`; each
 * at most 256 characters, longer values refused).
 * @throws HttpError 400 on a value over 256 characters
 */
export function authorityFromHeaders(req: IncomingMessage): Authority {
  const out: Authority = {};
  for (const [k, h] of Object.entries(AUTHORITY_HEADERS) as [keyof Authority, string][]) {
    const v = req.headers[h];
    const s = Array.isArray(v) ? v[0] : v;
    if (s === undefined || s === '') continue;
    if (s.length > MAX_AUTHORITY_CHARS)
      throw new HttpError(400, `${h} is longer than ${MAX_AUTHORITY_CHARS} characters`);
    out[k] = s;
  }
  return out;
}

/** The body of a finished invocation and its status (upstream shapes). */
export function outcomeReply(harness: string, tool: string, out: InvokeOutcome): [number, InvokeReply] {
  switch (out.status) {
    case 'ok':
      return [200, { done: out.result }];
    case 'failed':
      return [200, { failed: out.message }];
    case 'trapped':
      return [
        500,
        {
          error: `${harness}.${tool} trapped: ${out.trap}: ${out.message} at pc 0x${out.pc.toString(16)}${out.symbol ? ` (${out.symbol})` : ''}`,
          trap: out.trap,
          pc: out.pc,
          symbol: out.symbol,
        },
      ];
    case 'refused':
      return [
        429,
        { error: `${harness}.${tool} refused: ${out.message}`, ...(out.limit ? { limit: out.limit } : {}) },
      ];
    case 'error':
      // the shared store is away, or the call ran but its journal record could not be written:
      // nothing is acknowledged, the client retries (the Retry-After header is set by the caller)
      if (out.code === STORE_UNAVAILABLE)
        return [503, { error: `${harness}.${tool}: ${out.message}`, retry_after: STORE_RETRY_AFTER_S }];
      return [500, { error: `${harness}.${tool}: ${out.message}` }];
  }
}

/** The error code of an invocation the store could not record (answered 503 with Retry-After). */
export const STORE_UNAVAILABLE = 'store-unavailable';
/** Retry-After of that 503, seconds. */
export const STORE_RETRY_AFTER_S = 1;

const CLOSE = Buffer.from('}');
/** Decodes a whole body (no stream state is kept between calls), refusing malformed UTF-8. */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The harness resource of the route table.
 * @param code the code listings of `GET /harnesses/{name}/code`
 */
export function harnessRoutes(ctx: RouteContext, code: CodeListings): Resource {
  const d = ctx.deployments;
  // the name segment was checked by the guard; decoding it again cannot fail
  const name = (r: RouteRequest): string => segment(r.parts[1]!);

  const put = async (r: RouteRequest): Promise<void> => {
    const harness = name(r);
    if (ctx.closing()) throw new HttpError(503, 'bermd is shutting down');
    const bytes = await readBody(r.req, ctx.body(ctx.maxImageBytes));
    if (bytes.length === 0) throw new HttpError(400, 'empty body: PUT the harness ELF bytes');
    let deployed;
    try {
      deployed = await d.deploy(harness, new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length));
    } catch (e) {
      // a pinned sha256 that differs is the operator's to resolve (the 403 tells the client to
      // ask them): the operator sees it here, not only whoever deployed
      if (e instanceof HttpError && e.status === 403)
        ctx.log(`refused the deploy of ${harness}: ${e.message}${e.logDetail ? ` (${e.logDetail})` : ''}`);
      throw e;
    }
    const { deployment, changed } = deployed;
    if (changed) {
      const caps = deployment.granted.capabilities.join(', ') || 'none';
      ctx.log(`deployed ${harness} sha256 ${deployment.digest} capabilities: ${caps}`);
    }
    sendJson(r.res, 200, describe(deployment));
  };

  const invoke = async (r: RouteRequest): Promise<void> => {
    const harness = name(r);
    const tool = segment(r.parts[3]!);
    const { req, res } = r;
    if (ctx.closing()) throw new HttpError(503, 'bermd is shutting down');
    const sse = (req.headers.accept ?? '').includes('text/event-stream');
    // the reply may be as large as the result limit allows (and, streamed, its log lines too): that
    // much of the byte budget is held from now until the reply is handed to the socket, whose
    // buffer the budget's sweep counts from then on; none left: 503 before any work
    ctx.budget.holdCall(res, replyReserve(sse));
    const body = await readBody(req, ctx.body());
    let text: string;
    try {
      text = UTF8.decode(body);
    } catch {
      throw new HttpError(400, 'arguments are not valid UTF-8');
    }
    const args = d.checkArgs(harness, tool, text);
    const authority = authorityFromHeaders(req);
    // a client that disconnects before its reply cancels the call: dropped if queued, interrupted
    // if running (a reply handed to the socket in full is finished, not cancelled)
    const signal = new ClientGone(res);
    if (!sse) {
      const out = await ctx.backend.invoke(harness, tool, args, { authority, signal });
      if (out.chain !== undefined) res.setHeader('x-berm-chain', out.chain);
      const small = smallTextReply(out);
      if (small !== null) {
        sendJsonBytes(res, 200, Buffer.from(small));
        return;
      }
      // a result or failure message (it may be megabytes): encoded once, slice by slice
      const encoded = await encodeText(out);
      if (encoded !== null) {
        sendJsonBytes(res, 200, [Buffer.from(`{"${encoded.key}":`), ...encoded.json, CLOSE]);
        return;
      }
      const [status, reply] = outcomeReply(harness, tool, out);
      if (status === 503) res.setHeader('retry-after', String(STORE_RETRY_AFTER_S));
      sendJson(res, status, reply);
      return;
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-accel-buffering': 'no',
    });
    res.flushHeaders();
    const out = await ctx.backend.invoke(harness, tool, args, {
      authority,
      signal,
      onLog: (line) => {
        if (!res.writableEnded) res.write(sseEvent('log', line));
      },
    });
    const chain = out.chain !== undefined ? { chain: out.chain } : {};
    // the result event's data is one line: JSON escapes every line break in the text
    const encoded = await encodeText(out);
    if (encoded !== null) {
      const tail = out.chain !== undefined ? `,"chain":${JSON.stringify(out.chain)}}\n\n` : '}\n\n';
      const head = `event: result\ndata: {"status":200,"${encoded.key}":`;
      endSliced(res, [Buffer.from(head), ...encoded.json, Buffer.from(tail)]);
      return;
    }
    const [status, reply] = outcomeReply(harness, tool, out);
    endSliced(res, Buffer.from(sseEvent('result', JSON.stringify({ status, ...reply, ...chain }))));
  };

  return {
    guard: (parts, method) => {
      if (parts.length > 1 && parts[1] !== '') routeHarnessName(segment(parts[1]!), method);
    },
    routes: [
      {
        path: '/harnesses',
        trailingSlash: true,
        methods: { GET: ({ res }) => sendJson(res, 200, d.list().map(describe)) },
      },
      {
        path: '/harnesses/{name}',
        methods: {
          GET: (r) => sendJson(r.res, 200, describe(d.require(name(r)))),
          PUT: put,
          DELETE: async (r) => {
            const harness = name(r);
            await d.undeploy(harness);
            ctx.log(`undeployed ${harness}`);
            r.res.writeHead(204).end();
          },
        },
      },
      {
        path: '/harnesses/{name}/code',
        methods: {
          '*': ({ req, res, method, parts }) => {
            const url = req.url ?? '';
            const at = url.indexOf('?');
            return code.serve(segment(parts[1]!), method, at < 0 ? '' : url.slice(at + 1), res);
          },
        },
      },
      { path: '/harnesses/{name}/tools/{tool}', methods: { POST: invoke } },
    ],
  };
}

/** One server-sent event: `event: <event>` and each line of `data` as a `data:` line. */
function sseEvent(event: string, data: string): string {
  return `event: ${event}\n${data
    .split(/\r\n|\r|\n/)
    .map((l) => `data: ${l}`)
    .join('\n')}\n\n`;
}

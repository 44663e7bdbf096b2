/**
 * berm.http.fetch's request, run in the bridge worker (src/sync/bridge.ts) because undici is
 * asynchronous. Redirects are never followed (undici's request does not follow them without a
 * redirect interceptor, and none is installed): a 3xx comes back to the guest as is.
 */
import { Agent, request } from 'undici';

/** Arguments of {@link fetchOnce}; the URL already passed the policy. */
export interface FetchArgs {
  method: string;
  url: string;
  body: Uint8Array;
  headers: [string, string][];
  timeoutMs: number;
  maxResponseBody: number;
}

/** Status, response headers as [name, value] pairs in arrival order, and body. */
export interface FetchResult {
  status: number;
  headers: [string, string][];
  body: Uint8Array;
}

/**
 * Connect timeout of the shared Agent, ms: the default budget of a whole fetch (HTTP_LIMITS). A
 * call with less time left is cut by its own signal; the Agent's setting must not come from any
 * one call, since every later call of every harness on this thread shares the Agent.
 */
export const CONNECT_TIMEOUT_MS = 30_000;

let agent: Agent | undefined;

/**
 * One HTTP request through a private undici Agent (no proxy from the environment, no shared
 * pool with the embedding program). The body is read up to `maxResponseBody` bytes; one more byte
 * aborts the request with an error.
 * @throws Error when the request fails, times out (signal) or the body is too large.
 */
export async function fetchOnce(args: FetchArgs, signal: AbortSignal): Promise<FetchResult> {
  // Built once per thread: not from this call's budget (a first call with 2 s left once gave
  // every later fetch a 2 s connect timeout); the call's own budget is `signal`.
  agent ??= new Agent({ connect: { timeout: CONNECT_TIMEOUT_MS }, headersTimeout: 0, bodyTimeout: 0 });
  const res = await request(args.url, {
    dispatcher: agent,
    method: args.method as 'GET',
    headers: args.headers.flat(),
    body:
      args.body.length > 0
        ? Buffer.from(args.body.buffer, args.body.byteOffset, args.body.length)
        : undefined,
    signal,
  });
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    const b = chunk as Buffer;
    size += b.length;
    if (size > args.maxResponseBody) {
      res.body.destroy();
      throw new Error(`response body exceeds ${args.maxResponseBody} bytes`);
    }
    chunks.push(b);
  }
  const headers: [string, string][] = [];
  for (const [k, v] of Object.entries(res.headers)) {
    if (v === undefined) continue;
    for (const one of Array.isArray(v) ? v : [v]) headers.push([k, one]);
  }
  return { status: res.statusCode, headers, body: new Uint8Array(Buffer.concat(chunks)) };
}

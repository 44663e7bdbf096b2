/**
 * Small HTTP helpers of the daemon on top of node:http: a typed refusal ({@link HttpError}), JSON
 * replies in the upstream shape (every refusal is `{"error": "..."}`), and a body reader that
 * enforces a size limit (413) and a deadline for the whole body (408), so a client that sends its
 * body slowly cannot hold a connection and a buffer forever.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BufferBudget } from './budget.js';

/** A refusal with its HTTP status; the message becomes the `{"error": ...}` body. */
export class HttpError extends Error {
  override name = 'HttpError';
  /**
   * @param status HTTP status code (4xx or 5xx)
   * @param message what is wrong and, where one exists, the fix
   * @param extra further fields of the JSON body (e.g. a trap's pc and symbol)
   * @param logDetail for the daemon's log only, never the reply (e.g. an operator's file path)
   */
  constructor(
    readonly status: number,
    message: string,
    readonly extra: Record<string, unknown> = {},
    readonly logDetail?: string,
  ) {
    super(message);
  }
}

/** Replies longer than this go out in slices of this size, each after the last was taken, bytes. */
export const REPLY_SLICE_BYTES = 64 * 1024;

/**
 * Send `body` as JSON with `status`. Safe to call once per response; a response whose headers were
 * already sent (an SSE stream) is ended instead. The body goes out through {@link endSliced}.
 */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  sendJsonBytes(res, status, Buffer.from(JSON.stringify(body)));
}

/**
 * Send a JSON text already encoded as UTF-8, in `chunks` (as {@link sendJson}, for a body encoded
 * elsewhere: a large tool result, encoded slice by slice).
 */
export function sendJsonBytes(res: ServerResponse, status: number, chunks: Buffer | Buffer[]): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const list = Array.isArray(chunks) ? chunks : [chunks];
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': list.reduce((n, c) => n + c.length, 0),
    'cache-control': 'no-store',
  });
  endSliced(res, list);
}

/**
 * End `res` with `bytes` (one buffer or chunks in order): at once when they fit one
 * {@link REPLY_SLICE_BYTES} slice, else slice by slice, each written once the socket drained the
 * last (backpressure), so a slow reader shows progress to the write timeout and a reader that
 * stops pins at most one slice in the socket.
 */
export function endSliced(res: ServerResponse, bytes: Buffer | Buffer[]): void {
  const list = Array.isArray(bytes) ? bytes : [bytes];
  const total = list.reduce((n, c) => n + c.length, 0);
  if (total <= REPLY_SLICE_BYTES) {
    res.end(list.length === 1 ? list[0] : Buffer.concat(list, total));
    return;
  }
  let i = 0;
  let off = 0;
  const pump = (): void => {
    while (i < list.length) {
      const chunk = list[i]!;
      const end = Math.min(off + REPLY_SLICE_BYTES, chunk.length);
      const more = res.write(chunk.subarray(off, end));
      off = end;
      if (off >= chunk.length) {
        i++;
        off = 0;
      }
      if (!more && i < list.length) {
        res.once('drain', pump);
        return;
      }
    }
    res.end();
  };
  pump();
}

/** Send an HttpError (or any error as 500) in the `{"error": ...}` shape. */
export function sendError(res: ServerResponse, e: unknown): void {
  if (e instanceof HttpError) {
    sendJson(res, e.status, { error: e.message, ...e.extra });
    return;
  }
  sendJson(res, 500, { error: `internal error: ${e instanceof Error ? e.message : String(e)}` });
}

/** Limits of {@link readBody}. */
export interface BodyLimits {
  /** largest body accepted, bytes; a larger one is refused with 413 */
  maxBytes: number;
  /** the whole body must arrive within this many ms of the request's start; else 408 */
  timeoutMs: number;
  /**
   * the daemon's byte budget (./budget.ts): the body's bytes are held in it until the request is
   * done, and a body that would take it over is refused 503 before it is read
   */
  budget?: BufferBudget;
}

/**
 * Read a request body completely.
 * @returns the body bytes (empty for none)
 * @throws HttpError 413 when Content-Length or the bytes received exceed `maxBytes` (the rest is
 *   not read: the connection is closed after the reply), 408 when the body has not arrived within
 *   `timeoutMs`, 400 when the client aborts, 503 when the body would take the byte budget over
 *   its maximum (not read either).
 */
export function readBody(req: IncomingMessage, limits: BodyLimits): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > limits.maxBytes) {
      req.resume();
      reject(tooLarge(limits.maxBytes, Number(declared)));
      return;
    }
    const budget = limits.budget;
    // a declared length is held whole before a byte is read; a chunked body chunk by chunk
    const counted = declared !== undefined;
    if (budget !== undefined && counted && !budget.holdBody(req, Number(declared))) {
      reject(budget.spent());
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const finish = (err: HttpError | null): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onAbort);
      req.off('aborted', onAbort);
      if (err) {
        // stop reading; the reply carries Connection: close so the socket does not linger
        req.pause();
        reject(err);
      } else resolve(Buffer.concat(chunks, size));
    };
    const onData = (c: Buffer): void => {
      size += c.length;
      if (size > limits.maxBytes) finish(tooLarge(limits.maxBytes, size));
      else if (budget !== undefined && !counted && !budget.holdBody(req, c.length)) finish(budget.spent());
      else chunks.push(c);
    };
    const onEnd = (): void => finish(null);
    const onAbort = (): void => finish(new HttpError(400, 'the client aborted the request body'));
    const timer = setTimeout(
      () =>
        finish(
          new HttpError(
            408,
            `request body timed out: ${size} bytes arrived in ${limits.timeoutMs} ms; send the whole body promptly`,
          ),
        ),
      limits.timeoutMs,
    );
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onAbort);
    req.on('aborted', onAbort);
  });
}

function tooLarge(max: number, got: number): HttpError {
  return new HttpError(413, `request body of ${got} bytes (or more) is over the limit of ${max} bytes`);
}

/** Harness and tool names: `[a-z0-9_-]+` for harnesses (upstream), never a dot, slash or `..`. */
export const HARNESS_NAME = /^[a-z0-9_-]{1,64}$/;

/**
 * Check a harness name from a URL path segment (already percent-decoded).
 * @throws HttpError 400 naming the rule.
 */
export function checkHarnessName(name: string): string {
  if (!HARNESS_NAME.test(name)) {
    throw new HttpError(
      400,
      `invalid harness name ${JSON.stringify(name)}: names are 1 to 64 of a-z, 0-9, '_' and '-' (no dots or slashes)`,
    );
  }
  return name;
}

/**
 * The harness name of a `/harnesses/{name}...` path (percent-decoded) for `method`, under the
 * upstream rule: a PUT of a name that breaks {@link HARNESS_NAME} is refused 400 naming the rule;
 * every other method answers 404, since nothing by that name can be deployed.
 * @throws HttpError 400 (PUT) or 404 (any other method) for a name that breaks the rule
 */
export function routeHarnessName(name: string, method: string): string {
  if (method === 'PUT' || HARNESS_NAME.test(name)) return checkHarnessName(name);
  throw new HttpError(
    404,
    `no harness named ${JSON.stringify(name)} is deployed (names are 1 to 64 of a-z, 0-9, '_' and '-')`,
  );
}

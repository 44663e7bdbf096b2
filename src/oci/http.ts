/**
 * One HTTP exchange with a registry or token endpoint over undici: the whole body read into memory
 * up to a bound, connection failures turned into {@link OciError} `unreachable`. Redirects are not
 * followed here (the registry client decides which ones to follow and what headers survive).
 */
import { createRequire } from 'node:module';
import type { Agent, Dispatcher } from 'undici';
import { OciError } from './errors.js';

type Undici = typeof import('undici');
let undiciModule: Undici | null = null;
/** undici, loaded on the first request (CLI commands that talk to no server never load it). */
function undici(): Undici {
  return (undiciModule ??= createRequire(import.meta.url)('undici') as Undici);
}

/** A response with its body read. */
export interface HttpResponse {
  status: number;
  /** header names lowercase, as undici gives them */
  headers: Record<string, string | string[] | undefined>;
  body: Uint8Array;
}

/** Options of {@link httpExchange}. */
export interface ExchangeOptions {
  method: 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  headers?: Record<string, string>;
  body?: Uint8Array;
  /** refuse a body longer than this many bytes (default 4 MiB) */
  maxBytes?: number;
}

/** A dispatcher with bounded waits: 30 s to connect, 120 s for headers and between body chunks. */
export function newAgent(): Agent {
  return new (undici().Agent)({ connectTimeout: 30_000, headersTimeout: 120_000, bodyTimeout: 120_000 });
}

/** The first value of a header, or undefined. */
export function header(res: Pick<HttpResponse, 'headers'>, name: string): string | undefined {
  const v = res.headers[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
}

/** Every value of a header (a header may be sent more than once, e.g. WWW-Authenticate). */
export function headerValues(res: Pick<HttpResponse, 'headers'>, name: string): string[] {
  const v = res.headers[name.toLowerCase()];
  return v === undefined ? [] : Array.isArray(v) ? v : [v];
}

/**
 * Send one request and read the whole answer.
 * @throws OciError('unreachable') when no answer arrives (refused, DNS, TLS, timeout), naming the
 *   origin and the system's reason; OciError('too-large') when the body exceeds `maxBytes`.
 */
export async function httpExchange(
  dispatcher: Dispatcher,
  url: string,
  opts: ExchangeOptions,
): Promise<HttpResponse> {
  const maxBytes = opts.maxBytes ?? 4 * 1024 * 1024;
  let res: Dispatcher.ResponseData;
  try {
    res = await undici().request(url, {
      dispatcher,
      method: opts.method,
      headers: opts.headers,
      body:
        opts.body === undefined
          ? undefined
          : Buffer.from(opts.body.buffer, opts.body.byteOffset, opts.body.byteLength),
    });
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    const why = err.code ? `${err.code}${err.message ? ` (${err.message})` : ''}` : err.message;
    throw new OciError('unreachable', `cannot reach ${new URL(url).origin}: ${why}`);
  }
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of res.body) {
      total += (chunk as Buffer).length;
      if (total > maxBytes) {
        res.body.destroy();
        throw new OciError(
          'too-large',
          `${opts.method} ${url}: the answer is larger than ${maxBytes} bytes (refused)`,
        );
      }
      chunks.push(chunk as Buffer);
    }
  } catch (e) {
    if (e instanceof OciError) throw e;
    throw new OciError('unreachable', `${opts.method} ${url}: the answer broke off: ${(e as Error).message}`);
  }
  const body = Buffer.concat(chunks);
  return {
    status: res.statusCode,
    headers: res.headers as Record<string, string | string[] | undefined>,
    body: new Uint8Array(body.buffer, body.byteOffset, body.byteLength),
  };
}

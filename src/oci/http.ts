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
  /**
   * the whole exchange, request body out and answer in, must end within this many ms (default
   * {@link EXCHANGE_BASE_MS}); past it the request is aborted
   */
  deadlineMs?: number;
}

/**
 * Time allowed for one exchange before counting bytes, ms (2 minutes). undici's own timeouts are
 * per wait (connect, headers, between two body chunks): a registry that sends one byte every
 * minute never trips them and held `berm pull` for as long as it liked.
 */
export const EXCHANGE_BASE_MS = 120_000;

/** Slowest transfer rate allowed for a body of known size, bytes per second (64 KiB/s). */
export const MIN_TRANSFER_RATE = 64 * 1024;

/**
 * The deadline of an exchange that moves `bytes` of known size: {@link EXCHANGE_BASE_MS} (or
 * `baseMs`) plus the time `bytes` take at {@link MIN_TRANSFER_RATE}.
 */
export function exchangeDeadline(bytes: number, baseMs = EXCHANGE_BASE_MS): number {
  return baseMs + Math.ceil((bytes / MIN_TRANSFER_RATE) * 1000);
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
 * Send one request and read the whole answer, all within `deadlineMs`.
 * @throws OciError('unreachable') when no answer arrives (refused, DNS, TLS, timeout) or the
 *   exchange outlasts its deadline, naming the origin and the reason; OciError('too-large') when
 *   the body exceeds `maxBytes`.
 */
export async function httpExchange(
  dispatcher: Dispatcher,
  url: string,
  opts: ExchangeOptions,
): Promise<HttpResponse> {
  const maxBytes = opts.maxBytes ?? 4 * 1024 * 1024;
  const deadlineMs = opts.deadlineMs ?? EXCHANGE_BASE_MS;
  const signal = AbortSignal.timeout(deadlineMs);
  const late = (): OciError =>
    new OciError(
      'unreachable',
      `${opts.method} ${url}: no complete answer within ${deadlineMs} ms (the registry is too slow; refused)`,
    );
  let res: Dispatcher.ResponseData;
  try {
    res = await undici().request(url, {
      dispatcher,
      signal,
      method: opts.method,
      headers: opts.headers,
      body:
        opts.body === undefined
          ? undefined
          : Buffer.from(opts.body.buffer, opts.body.byteOffset, opts.body.byteLength),
    });
  } catch (e) {
    if (signal.aborted) throw late();
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
    if (signal.aborted) throw late();
    throw new OciError('unreachable', `${opts.method} ${url}: the answer broke off: ${(e as Error).message}`);
  }
  const body = Buffer.concat(chunks);
  return {
    status: res.statusCode,
    headers: res.headers as Record<string, string | string[] | undefined>,
    body: new Uint8Array(body.buffer, body.byteOffset, body.byteLength),
  };
}

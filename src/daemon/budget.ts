/**
 * The daemon's budget of bytes held for clients: request bodies being read or in use, and reply
 * bytes written but not yet taken by their clients. A client that uploads slowly, or asks for a
 * large result and never reads it, pins memory that the write and body timeouts free only after
 * seconds; many at once could take the machine. Over the budget, work that would start is
 * answered 503 with `Retry-After` (`/health` and `/metrics` still answer), and an upload that
 * would take it over is refused before its bytes are read.
 *
 * Held bytes are counted from three sources, none of them walked per request: bodies (a counter
 * raised when a body is accepted, lowered when its request is done), tool calls (each holds the
 * largest reply it may have, from before it is queued until its reply is handed to the socket: so
 * calls whose results could not be held are refused before they run, instead of running and
 * parking their results), and the bytes waiting in the sockets' write buffers (summed by the
 * write-timeout sweep, which walks the connections anyway, a few times a second).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpError } from './http.js';
import { freemem, totalmem } from 'node:os';

/** Seconds a client told 503 by the budget should wait before retrying. */
export const BUDGET_RETRY_AFTER_S = 1;

/**
 * The default budget: an eighth of the machine's memory, between 128 MiB and 1 GiB. Room for a
 * few dozen large results parked by slow readers and the largest image uploads, far from what
 * would push the machine into swap; bytes.
 */
export function defaultBufferBudget(total = totalmem()): number {
  return Math.min(1 << 30, Math.max(128 << 20, Math.floor(total / 8)));
}

/** Where the default budget came from, for the boot log. */
export function describeDefaultBudget(): string {
  const gib = (n: number): string => `${(n / 2 ** 30).toFixed(1)} GiB`;
  return `default: an eighth of ${gib(totalmem())} memory (${gib(freemem())} free), within 128 MiB..1 GiB`;
}

/** The byte budget (see the module comment). */
export class BufferBudget {
  /** bytes of request bodies accepted and not yet released */
  private bodies = 0;
  /** bytes held for the replies of tool calls in progress */
  private replies = 0;
  /** bytes waiting in sockets' write buffers at the last sweep */
  private buffered = 0;
  private readonly held = new WeakMap<IncomingMessage, number>();

  /** @param max bytes the daemon may hold for clients (≥ 1) */
  constructor(readonly max: number) {}

  /** Bytes held now (the socket buffers as of the last sweep). */
  get used(): number {
    return this.bodies + this.replies + this.buffered;
  }

  /** The 503 of a body or a request refused because the budget is spent. */
  spent(): HttpError {
    return new HttpError(
      503,
      `bermd holds ${this.used} bytes of request bodies and unread replies, its budget is ${this.max} (--max-buffered-bytes); retry shortly`,
      { retry_after: BUDGET_RETRY_AFTER_S },
    );
  }

  /** Whether the budget is spent: new work is answered 503. */
  get exhausted(): boolean {
    return this.used >= this.max;
  }

  /**
   * Hold `n` more bytes of `req`'s body.
   * @returns false (nothing held) when they would take the budget over its maximum
   */
  holdBody(req: IncomingMessage, n: number): boolean {
    if (this.used + n > this.max) return false;
    this.bodies += n;
    this.held.set(req, (this.held.get(req) ?? 0) + n);
    return true;
  }

  /** `req` is done: release the body bytes it held (none: nothing happens). */
  release(req: IncomingMessage): void {
    const n = this.held.get(req);
    if (n === undefined) return;
    this.held.delete(req);
    this.bodies -= n;
  }

  /**
   * Hold `n` bytes for the reply of a call about to start, until `res` has handed its last byte to
   * the socket (`finish`) or closed.
   * @throws HttpError 503 (with `retry_after`) when they would take the budget over its maximum:
   *   the call does not start
   */
  holdCall(res: ServerResponse, n: number): void {
    if (this.used + n > this.max) throw this.spent();
    this.replies += n;
    let done = false;
    const release = (): void => {
      if (done) return;
      done = true;
      this.replies -= n;
    };
    res.once('finish', release);
    res.once('close', release);
  }

  /** The bytes waiting in every socket's write buffer, as the sweep found them. */
  setBuffered(n: number): void {
    this.buffered = n;
  }
}

/**
 * The cancellation of one HTTP call: a client that disconnects before its reply cancels the call
 * it made (dropped if queued, interrupted if running). Every call needs one and almost none is
 * ever cancelled, so this is a plain object with one listener slot, not an AbortController: it
 * allocates no EventTarget and keeps no listener list, and does nothing until the socket closes.
 */

import type { ServerResponse } from 'node:http';
import type { CancelSignal } from '../runtime/index.js';

/** Why a call whose HTTP client went away was cancelled (the journal record's detail). */
const CLIENT_GONE = 'the HTTP client disconnected before the reply';

/**
 * The {@link CancelSignal} of the call answered on `res`: aborted when `res` closes before its
 * reply was handed to the socket in full (a reply written in full is a finished call, not a
 * cancelled one). One listener at a time, as the queue registers it.
 */
export class ClientGone implements CancelSignal {
  aborted = false;
  reason: unknown = undefined;
  private listener: (() => void) | null = null;

  /** Watch `res`: its 'close' before the reply is finished aborts this signal. */
  constructor(res: ServerResponse) {
    res.once('close', () => {
      if (!res.writableFinished) this.abort(CLIENT_GONE);
    });
  }

  /** Abort with `why`, calling the listener once; a second abort does nothing. */
  abort(why: string): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = why;
    const l = this.listener;
    this.listener = null;
    l?.();
  }

  /** Call `listener` on abort (it replaces an earlier one: the queue registers one per call). */
  addEventListener(_type: 'abort', listener: () => void): void {
    this.listener = listener;
  }

  /** Forget `listener` if it is the one registered. */
  removeEventListener(_type: 'abort', listener: () => void): void {
    if (this.listener === listener) this.listener = null;
  }
}

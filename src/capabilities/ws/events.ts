/**
 * What crosses between the ws capability (on a queue worker, ./index.ts) and the connections it
 * names (on the queue's thread, ./connections.ts), and how an event reaches the guest.
 *
 * An invocation a connection starts carries, as its argument bytes, three wire fields
 * (src/wire/fields.ts: u32 little-endian length + bytes each): the event name (`open`, `message`
 * or `close`), the connection id as decimal text, and the body: empty for an `open` that
 * succeeded, the error text for one that failed; the frame's bytes for a `message`; the reason
 * for a `close` (`restart` for a connection the process lost by stopping).
 */
import { encodeFields, textField } from '../../wire/fields.js';

/** Name of the service the ws capability asks on the queue's thread. */
export const WS_SERVICE = 'ws';

/** The three events of a connection, the first field of its invocations. */
export type WsEvent = 'open' | 'message' | 'close';

/** The reason a `close` carries for a connection that was open when the process stopped. */
export const RESTART_REASON = 'restart';

/** A request of the ws capability to its service (structured-cloneable). */
export type WsRequest =
  | { op: 'open'; url: string; harness: string; tool: string; headers: [string, string][] }
  | { op: 'send'; id: string; payload: Uint8Array }
  | { op: 'close'; id: string };

/**
 * The argument bytes of one event's invocation: fields (event, decimal id, body).
 * @param body the frame's bytes, or the text of an error or reason
 */
export function eventArgs(event: WsEvent, id: number, body: Uint8Array | string): Uint8Array {
  return encodeFields([
    textField(event),
    textField(String(id)),
    typeof body === 'string' ? textField(body) : body,
  ]);
}

/**
 * The result size limit counted on the reply: a tool's result (or failure message) is bounded by
 * the call limits in raw bytes (4 MiB), but its JSON encoding can be six times larger (a control
 * byte becomes `\u0001`), so 4 MiB of control bytes made a 25 MB reply. The daemon applies the
 * same limit to the encoded text, as it will stand between the quotes of the reply; over it, the
 * call is answered as a failed tool call naming both sizes, as for a raw result over the limit.
 * The check costs nothing for a result under a sixth of the limit (no encoding can grow it past).
 */
import type { InvokeOutcome } from '../contract/index.js';
import { DEFAULT_CALL_LIMITS } from '../harness/harness.js';

/** Most bytes a result or failure message may take JSON-encoded (quotes excluded): the call limit. */
export const MAX_ENCODED_RESULT_BYTES = DEFAULT_CALL_LIMITS.maxResultBytes;

/** JSON escapes grow one UTF-16 unit to at most six bytes (`\u001f`, a lone surrogate). */
const MAX_GROWTH = 6;

/** Bytes of `s` as the contents of a JSON string (UTF-8, escapes as JSON.stringify writes them). */
export function encodedLength(s: string): number {
  return Buffer.byteLength(JSON.stringify(s)) - 2;
}

/**
 * `out` with a result or failure message whose JSON encoding is over `max` bytes replaced by a
 * failure naming the sizes; any other outcome as it is.
 * @param max bytes ({@link MAX_ENCODED_RESULT_BYTES} by default)
 */
export function boundEncodedResult(out: InvokeOutcome, max = MAX_ENCODED_RESULT_BYTES): InvokeOutcome {
  const text = out.status === 'ok' ? out.result : out.status === 'failed' ? out.message : null;
  if (text === null || text.length * MAX_GROWTH <= max) return out;
  const n = encodedLength(text);
  if (n <= max) return out;
  const what = out.status === 'ok' ? 'result' : 'failure message';
  const message =
    `berm refused the tool's ${what} of ${Buffer.byteLength(text)} bytes: it is ${n} bytes ` +
    `JSON-encoded, over the limit of ${max} bytes`;
  return { status: 'failed', message, ...(out.chain !== undefined ? { chain: out.chain } : {}) };
}

/**
 * Bytes of the byte budget a tool call holds until its reply is handed to the socket: the largest
 * reply it can have (the encoded result limit and its envelope; streamed, the log lines too: at
 * most 1,000 of 4 KiB).
 */
export function replyReserve(streamed: boolean): number {
  const logs = DEFAULT_CALL_LIMITS.maxLogLines * DEFAULT_CALL_LIMITS.maxLogLineBytes;
  return MAX_ENCODED_RESULT_BYTES + 64 * 1024 + (streamed ? logs : 0);
}

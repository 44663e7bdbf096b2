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
  const text = outcomeText(out);
  if (text === null || text.length * MAX_GROWTH <= max) return out;
  const n = encodedLength(text);
  return n <= max ? out : overLimit(out, text, n, max);
}

/**
 * UTF-16 units of a text JSON-encoded at a time on the serving thread; a longer text is encoded a
 * slice per turn of the event loop ({@link encodeSliced}).
 */
export const ENCODE_SLICE_CHARS = 16 * 1024;

/** Encodings waiting for their next slice's turn, first come first served. */
const sliceWaiters: (() => void)[] = [];

/** One waiting encoding takes its slice in this turn; the next waits for the next turn. */
function nextSlice(): void {
  sliceWaiters.shift()!();
  if (sliceWaiters.length > 0) setImmediate(nextSlice);
}

/**
 * Resolves in a later turn of the event loop, when every encoding that asked before has had a
 * slice: one slice is encoded per turn, whatever the number of large replies in progress.
 */
function sliceTurn(): Promise<void> {
  return new Promise((resolve) => {
    sliceWaiters.push(resolve);
    if (sliceWaiters.length === 1) setImmediate(nextSlice);
  });
}

/**
 * `text` JSON-encoded as the contents of a JSON string (UTF-8, escapes as `JSON.stringify` writes
 * them, quotes excluded), a slice of {@link ENCODE_SLICE_CHARS} at a time, one slice per turn of
 * the event loop over all the replies being encoded. The serving thread accepts one connection per
 * turn (libuv accepts once per poll of the listening socket): encoding a 4 MiB result in one go
 * held a turn for 50-300 ms on a loaded machine, so a burst of clients of large results made a
 * /health that connected after them wait seconds to be accepted. A slice never ends between the
 * two halves of a surrogate pair (each half alone would be escaped as a lone surrogate), so the
 * chunks are exactly the bytes of `JSON.stringify(text)` without its quotes.
 * @param max bytes: once the encoding is over it, the rest is only measured, not kept
 * @returns the chunks (null when the encoding is over `max`) and the encoding's length, bytes
 */
export async function encodeSliced(
  text: string,
  max: number,
): Promise<{ chunks: Buffer[] | null; n: number }> {
  const chunks: Buffer[] = [];
  let n = 0;
  for (let at = 0; at < text.length;) {
    await sliceTurn();
    let end = Math.min(at + ENCODE_SLICE_CHARS, text.length);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end++;
    const json = JSON.stringify(text.slice(at, end));
    at = end;
    if (n > max) {
      n += Buffer.byteLength(json) - 2;
      continue;
    }
    const bytes = Buffer.from(json);
    n += bytes.length - 2;
    chunks.push(bytes.subarray(1, bytes.length - 1));
  }
  return { chunks: n > max ? null : chunks, n };
}

/**
 * The reply body `{"done": text}` or `{"failed": text}` of an outcome whose text fits one slice
 * and that no escape can take over `max` (a sixth of it): the common short result, encoded at
 * once, without the turns and chunks of {@link encodeText}. Null for every other outcome (no
 * text, or a text {@link encodeText} must encode slice by slice).
 * @param max bytes ({@link MAX_ENCODED_RESULT_BYTES} by default)
 */
export function smallTextReply(out: InvokeOutcome, max = MAX_ENCODED_RESULT_BYTES): string | null {
  const text = outcomeText(out);
  if (text === null || text.length > ENCODE_SLICE_CHARS || text.length * MAX_GROWTH > max) return null;
  return (out.status === 'ok' ? '{"done":' : '{"failed":') + JSON.stringify(text) + '}';
}

/**
 * The text of an outcome that has one (a result, a failure message) as a JSON string, quotes
 * included, the bytes `JSON.stringify` gives, in chunks: encoded once, slice by slice
 * ({@link encodeSliced}); a text over `max` bytes encoded gives the failure naming the sizes. A text
 * that no escape can take over `max` (a sixth of it) and that fits one slice is one chunk.
 * @param max bytes ({@link MAX_ENCODED_RESULT_BYTES} by default)
 * @returns the outcome the chunks encode (`out`, or the failure that replaces it) with the reply's
 *   key, `done` or `failed`; null for an outcome without a text (a trap, a refusal, an error)
 */
export async function encodeText(
  out: InvokeOutcome,
  max = MAX_ENCODED_RESULT_BYTES,
): Promise<{ out: InvokeOutcome; key: 'done' | 'failed'; json: Buffer[] } | null> {
  const text = outcomeText(out);
  if (text === null) return null;
  const key = out.status === 'ok' ? 'done' : 'failed';
  if (text.length <= ENCODE_SLICE_CHARS && text.length * MAX_GROWTH <= max)
    return { out, key, json: [Buffer.from(JSON.stringify(text))] };
  const { chunks, n } = await encodeSliced(text, max);
  if (chunks === null) {
    // the failure that replaces it: a sentence, sent whatever the limit
    const failure = overLimit(out, text, n, max);
    return { out: failure, key: 'failed', json: [Buffer.from(JSON.stringify(failure.message))] };
  }
  return { out, key, json: [QUOTE, ...chunks, QUOTE] };
}

const QUOTE = Buffer.from('"');

/** The result of an `ok` outcome, the message of a `failed` one, else null. */
function outcomeText(out: InvokeOutcome): string | null {
  return out.status === 'ok' ? out.result : out.status === 'failed' ? out.message : null;
}

/** The failed outcome that replaces `out`, whose `text` is `n` bytes JSON-encoded, over `max`. */
function overLimit(
  out: InvokeOutcome,
  text: string,
  n: number,
  max: number,
): Extract<InvokeOutcome, { status: 'failed' }> {
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

// The sliced JSON encoding of large results (src/daemon/reply-size.ts): its chunks are the bytes of
// JSON.stringify (V8's, the reference) whatever falls on a slice boundary, and a text over the
// limit is measured to the end without being kept.
import t from 'tap';
import { ENCODE_SLICE_CHARS, encodeSliced, encodeText, smallTextReply } from '../src/daemon/reply-size.js';

const S = ENCODE_SLICE_CHARS;
const reference = (s: string): Buffer => Buffer.from(JSON.stringify(s).slice(1, -1));

t.test('the chunks are JSON.stringify, slice boundaries anywhere', async (t) => {
  const cases: [string, string][] = [
    ['3 slices and a bit of x', 'x'.repeat(3 * S + 5)],
    ['a surrogate pair across the first boundary', 'a'.repeat(S - 1) + '😀' + 'b'.repeat(S)],
    ['a lone high surrogate ending the text', 'a'.repeat(S - 1) + '\ud83d'],
    ['a lone high surrogate before a boundary', 'a'.repeat(S - 1) + '\ud83d' + 'x' + 'c'.repeat(S)],
    ['a lone low surrogate after a boundary', 'a'.repeat(S) + '\ude00' + 'd'.repeat(10)],
    ['control bytes, quotes, backslashes, line breaks', '\u0001"\\\n\r\t\u2028'.repeat(S / 2)],
    ['two-byte and three-byte UTF-8', 'é€'.repeat(S)],
    ['emoji throughout', '😀'.repeat(S + 1)],
  ];
  for (const [what, s] of cases) {
    const { chunks, n } = await encodeSliced(s, Infinity);
    const want = reference(s);
    t.ok(chunks !== null && Buffer.concat(chunks).equals(want), what);
    t.equal(n, want.length, `${what}: length`);
  }
});

t.test('over the limit: measured to the end, nothing kept', async (t) => {
  const s = '\u0001'.repeat(2 * S + 3);
  const { chunks, n } = await encodeSliced(s, 1000);
  t.equal(chunks, null);
  t.equal(n, 6 * s.length);
});

t.test('encodeText: the reply of a result, of a failure, and of a result over the limit', async (t) => {
  const big = 'y'.repeat(2 * S + 1);
  const ok = await encodeText({ status: 'ok', result: big, chain: 'c1' });
  t.equal(ok?.key, 'done');
  t.equal(Buffer.concat(ok!.json).toString(), JSON.stringify(big));
  t.equal(ok?.out.status, 'ok');
  const failed = await encodeText({ status: 'failed', message: 'no "good"' });
  t.equal(failed?.key, 'failed');
  t.equal(Buffer.concat(failed!.json).toString(), JSON.stringify('no "good"'));
  const over = await encodeText({ status: 'ok', result: '\u0001'.repeat(S + 1), chain: 'c2' }, 100);
  t.equal(over?.key, 'failed');
  t.same(over?.out, {
    status: 'failed',
    message: `berm refused the tool's result of ${S + 1} bytes: it is ${6 * (S + 1)} bytes JSON-encoded, over the limit of 100 bytes`,
    chain: 'c2',
  });
  t.equal(await encodeText({ status: 'refused', message: 'busy' }), null);
});

t.test('smallTextReply: a short result or failure is the JSON.stringify body at once', async (t) => {
  const texts = ['', 'ok', 'no "good"\n', '\u0001\u2028', 'ü'.repeat(100), 'z'.repeat(S)];
  for (const text of texts) {
    t.equal(smallTextReply({ status: 'ok', result: text }), JSON.stringify({ done: text }));
    t.equal(smallTextReply({ status: 'failed', message: text }), JSON.stringify({ failed: text }));
  }
  // a text over one slice, or one that escapes could take over the limit: the sliced path's
  t.equal(smallTextReply({ status: 'ok', result: 'z'.repeat(S + 1) }), null);
  t.equal(smallTextReply({ status: 'ok', result: 'z'.repeat(20) }, 100), null);
  t.equal(smallTextReply({ status: 'refused', message: 'busy' }), null);
});

import t from 'tap';
import {
  STAGED_ERROR,
  STAGED_REFUSED,
  WireError,
  decodeFields,
  encodeFields,
  fieldInt,
  fieldText,
  intField,
  parseStagedLength,
  stageFields,
  stagedLength,
  textField,
} from '../src/wire/fields.js';

const b = (...xs: number[]) => new Uint8Array(xs);

t.test('encode / decode round trip', async (t) => {
  const fields = [textField('hello'), new Uint8Array(0), b(0, 255, 7)];
  const enc = encodeFields(fields);
  t.same([...enc.subarray(0, 4)], [5, 0, 0, 0], 'little-endian u32 length');
  t.equal(enc.length, 4 + 5 + 4 + 0 + 4 + 3);
  t.same(decodeFields(enc), fields);
  t.same(decodeFields(new Uint8Array(0)), []);
  t.same(encodeFields([]).length, 0);
  // decoded fields are copies: later guest writes cannot change them
  const d = decodeFields(enc);
  enc[4] = 0x58;
  t.equal(fieldText(d[0]!), 'hello');
  // subarray views with a byte offset decode correctly
  const padded = new Uint8Array(enc.length + 3);
  padded.set(encodeFields([textField('x')]), 3);
  t.same(
    decodeFields(padded.subarray(3, 3 + 5)).map((f) => fieldText(f)),
    ['x'],
  );
});

t.test('decode rejects malformed framing', async (t) => {
  t.throws(() => decodeFields(b(1, 0)), { name: 'WireError', message: /truncated length prefix of field 0/ });
  t.throws(() => decodeFields(b(5, 0, 0, 0, 1, 2)), { message: /declares 5 bytes but only 2 follow/ });
  t.throws(() => decodeFields(b(0xff, 0xff, 0xff, 0xff)), { message: /declares 4294967295 bytes/ });
  t.throws(() => decodeFields(encodeFields([b(1), b(2), b(3)]), { maxFields: 2 }), {
    message: /more than 2 fields/,
  });
  t.throws(() => decodeFields(encodeFields([b(1, 2, 3)]), { maxFieldBytes: 2 }), { message: /limit is 2/ });
  t.throws(() => decodeFields(new Uint8Array(4 * 5000)), { message: /more than 4096 fields/ });
  t.ok(new WireError('x') instanceof Error);
});

t.test('text and integers', async (t) => {
  t.equal(fieldText(textField('héllo ✓')), 'héllo ✓');
  t.throws(() => fieldText(b(0xff), 'path'), { message: /path is not valid UTF-8/ });
  t.equal(fieldText(intField(42)), '42');
  t.equal(fieldText(intField(-7n)), '-7');
  t.equal(fieldText(intField(2n ** 64n - 1n)), '18446744073709551615');
  t.throws(() => intField(1.5));
  t.equal(fieldInt(textField('0')), 0n);
  t.equal(fieldInt(textField('-12')), -12n);
  t.equal(fieldInt(textField('18446744073709551615')), 2n ** 64n - 1n);
  for (const bad of ['', ' 1', '1 ', '+1', '0x10', '1e3', '1.0', '--1', '123456789012345678901']) {
    t.throws(() => fieldInt(textField(bad), 'offset'), { message: /offset must be decimal digits/ }, bad);
  }
  t.throws(() => fieldInt(textField('5'), 'n', { max: 4n }), { message: /n 5 is above 4/ });
  t.throws(() => fieldInt(textField('-1'), 'n', { min: 0n }), { message: /n -1 is below 0/ });
});

t.test('staged lengths', async (t) => {
  t.equal(STAGED_ERROR, 1n << 63n);
  t.equal(STAGED_REFUSED, 1n << 62n);
  t.equal(stagedLength(10), 10n);
  t.equal(stagedLength(10, { error: true }), STAGED_ERROR | 10n);
  t.equal(stagedLength(3n, { refused: true }), STAGED_ERROR | STAGED_REFUSED | 3n);
  t.throws(() => stagedLength(-1));
  t.throws(() => stagedLength(1n << 62n));
  t.same(parseStagedLength(STAGED_ERROR | 9n), { length: 9n, error: true, refused: false });
  t.same(parseStagedLength(-1n), { length: (1n << 62n) - 1n, error: true, refused: true });
  // one field is staged raw; any other count is framed; zero fields stage nothing
  t.same([...stageFields([b(1, 2)])], [1, 2]);
  t.same([...stageFields([b(1), b(2)])], [1, 0, 0, 0, 1, 1, 0, 0, 0, 2]);
  t.equal(stageFields([]).length, 0);
  t.equal(stageFields([new Uint8Array(0)]).length, 0, 'the documented ambiguity');
});

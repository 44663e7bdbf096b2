// LEB128 as the WebAssembly binary format writes integers (core spec 5.2.2). Expected bytes: the
// worked examples of the LEB128 article (DWARF 4 spec, 7.6: 624485 -> e5 8e 26, -123456 ->
// c0 bb 78) and the boundaries where a sign bit moves into the next byte.
import t from 'tap';
import { readUleb32, sleb, uleb } from '../src/util/leb.js';

const enc = (f: (out: number[], v: number) => void, v: number): number[] => {
  const out: number[] = [];
  f(out, v);
  return out;
};

t.test('unsigned', async (t) => {
  t.same(enc(uleb, 0), [0x00]);
  t.same(enc(uleb, 127), [0x7f]);
  t.same(enc(uleb, 128), [0x80, 0x01]);
  t.same(enc(uleb, 624485), [0xe5, 0x8e, 0x26]);
  t.same(readUleb32(Uint8Array.from([0xe5, 0x8e, 0x26]), 0), [624485, 3]);
});

t.test('signed, safe integers beyond 32 bits included', async (t) => {
  t.same(enc(sleb, 0), [0x00]);
  t.same(enc(sleb, -1), [0x7f]);
  t.same(enc(sleb, -2), [0x7e]);
  t.same(enc(sleb, 63), [0x3f]);
  t.same(enc(sleb, 64), [0xc0, 0x00]);
  t.same(enc(sleb, -64), [0x40]);
  t.same(enc(sleb, -65), [0xbf, 0x7f]);
  t.same(enc(sleb, -123456), [0xc0, 0xbb, 0x78]);
  t.same(enc(sleb, 2 ** 32), [0x80, 0x80, 0x80, 0x80, 0x10]);
  t.same(enc(sleb, -(2 ** 32)), [0x80, 0x80, 0x80, 0x80, 0x70]);
  t.same(enc(sleb, 2 ** 53 - 1), [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f]);
});

// LEB128 as the WebAssembly binary format writes integers (core spec 5.2.2). Expected bytes: the
// worked example of the LEB128 article (DWARF 4 spec, 7.6: 624485 -> e5 8e 26) and the boundary
// where a value moves into the next byte.
import t from 'tap';
import { readUleb32, sleb64, uleb } from '../src/util/leb.js';

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

t.test('signed, 64 bits', async (t) => {
  const sl = (v: bigint): number[] => {
    const out: number[] = [];
    sleb64(out, v);
    return out;
  };
  // DWARF 4 spec, 7.6: -123456 -> c0 bb 78; the sign bit (0x40) decides where a value stops
  t.same(sl(-123456n), [0xc0, 0xbb, 0x78]);
  t.same(sl(0n), [0x00]);
  t.same(sl(-1n), [0x7f]);
  t.same(sl(63n), [0x3f]);
  t.same(sl(64n), [0xc0, 0x00]);
  t.same(sl(-64n), [0x40]);
  t.same(sl(-65n), [0xbf, 0x7f]);
  t.same(sl(-(2n ** 63n)), [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f]);
  t.same(sl(2n ** 63n - 1n), [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00]);
  t.same(sl(2n ** 64n - 1n), [0x7f], "read as 64-bit two's complement: all ones is -1");
});

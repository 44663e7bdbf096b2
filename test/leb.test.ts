// LEB128 as the WebAssembly binary format writes integers (core spec 5.2.2). Expected bytes: the
// worked example of the LEB128 article (DWARF 4 spec, 7.6: 624485 -> e5 8e 26) and the boundary
// where a value moves into the next byte.
import t from 'tap';
import { readUleb32, uleb } from '../src/util/leb.js';

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

// src/engine/zero.ts: zeroing [start, end) of a guest memory, through memory.fill for a shared one
// and the typed array's fill for an unshared one. Every byte is compared against the range the
// call names (the rest keeps its pattern); on a shared memory a range past the end traps (a
// RuntimeError from V8, core spec 4.4.7: memory.fill traps when start + length exceeds the size).
import t from 'tap';
import { memoryZeroer } from '../src/engine/zero.js';

for (const shared of [true, false]) {
  t.test(`${shared ? 'shared' : 'unshared'} memory`, async (t) => {
    const memory = new WebAssembly.Memory({ initial: 2, maximum: 2, shared });
    const u8 = new Uint8Array(memory.buffer);
    const pattern = (i: number) => (i * 7 + 1) & 0xff || 1;
    for (let i = 0; i < u8.length; i++) u8[i] = pattern(i);
    const zero = memoryZeroer(memory);
    const ranges: [number, number][] = [
      [100, 5000],
      [0, 1],
      [131071, 131072],
      [70000, 70000],
      [9000, 8000],
    ];
    for (const [s, e] of ranges) zero(s, e);
    const zeroed = (i: number) => ranges.some(([s, e]) => i >= s && i < e);
    let wrong = 0;
    for (let i = 0; i < u8.length; i++) if (u8[i] !== (zeroed(i) ? 0 : pattern(i))) wrong++;
    t.equal(wrong, 0, 'exactly the named ranges are zero, every other byte keeps its value');
    if (shared) t.throws(() => zero(131000, 131073), WebAssembly.RuntimeError, 'past the end: a trap');
  });
}

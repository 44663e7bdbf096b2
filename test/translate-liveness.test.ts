// Guest-register liveness (src/translate/liveness.ts) on hand-encoded RV64I functions: which call
// arguments a function reads (psABI: a0..a7 carry arguments, a0/a1 results), also through
// recursion, and which loaded registers are dead (an epilogue's restore of a callee-saved register).
// Also sp's offset from its entry value (src/translate/frame.ts).
import t from 'tap';
import { analyseFunction, type ImageFacts } from '../src/translate/cfg.js';
import { Liveness, argumentUses } from '../src/translate/liveness.js';
import { spOffsets, stepSp } from '../src/translate/frame.js';
import { decode } from '../src/riscv/decode.js';

/** The bytes of 32-bit instruction words, little-endian. */
function code(words: number[]): Uint8Array {
  const out = new Uint8Array(words.length * 4);
  const v = new DataView(out.buffer);
  words.forEach((w, i) => v.setUint32(i * 4, w >>> 0, true));
  return out;
}

const functions = new Map<number, number[]>([
  // f: addi a0, a0, -1 ; ret
  [0x1000, [0xfff50513, 0x00008067]],
  // g: beqz a0, +8 ; jal ra, g (recursion: passes a0..a7 through) ; ret
  [0x2000, [0x00050463, 0xffdff0ef, 0x00008067]],
  // h: ld s0, 0(sp) ; ld a0, 8(sp) ; ret
  [0x3000, [0x00013403, 0x00813503, 0x00008067]],
]);
const facts: ImageFacts = {
  functionEntries: new Set(functions.keys()),
  relocationTargets: new Set(),
  decodeAt: (address) => {
    for (const [start, words] of functions) {
      const k = (address - start) / 4;
      if (Number.isInteger(k) && k >= 0 && k < words.length) return decode(words[k]);
    }
    return null;
  },
};
const cfgs = [...functions].map(([start, words]) => analyseFunction(code(words), start, facts));
const bit = (r: number) => 1 << r;
const SP = bit(2);
const A0 = bit(10);
const A1 = bit(11);

t.test('the arguments each function reads', async (t) => {
  const uses = argumentUses(cfgs);
  // f reads a0; a1 is read by its return (the result pair), sp always (the stack check)
  t.equal(uses.get(0x1000), SP | A0 | A1, 'f: sp, a0, a1');
  // g forwards a2..a7 only to itself: the least fixpoint does not keep them
  t.equal(uses.get(0x2000), SP | A0 | A1, 'g: sp, a0, a1 despite the recursive call');
  t.equal(uses.get(0x3000), SP | A1, 'h: a0 is written before any read');
});

t.test('a restored callee-saved register is dead, a loaded result is not', async (t) => {
  const h = cfgs[2];
  const live = new Liveness(h);
  const after = live.after(h.blocks.get(0x3000)!);
  t.equal(after[0] & bit(8), 0, 's0 is dead after `ld s0, 0(sp)` (ret reads only a0/a1)');
  t.not(after[1] & A0, 0, 'a0 is live after `ld a0, 8(sp)`');
});

t.test("sp's offset from its entry value, block by block", async (t) => {
  // k: addi sp, sp, -32 ; beqz a0, +8 ; addi sp, sp, -16 ; sd s0, 0(sp) ; addi sp, sp, 32 ; ret
  const words = [0xfe010113, 0x00050463, 0xff010113, 0x00813023, 0x02010113, 0x00008067];
  const cfg = analyseFunction(code(words), 0x4000, {
    functionEntries: new Set([0x4000]),
    relocationTargets: new Set(),
    decodeAt: (a) => {
      const k = (a - 0x4000) / 4;
      return k >= 0 && k < words.length ? decode(words[k]) : null;
    },
  });
  const at = spOffsets(cfg);
  t.equal(at.get(0x4000), 0, 'the entry: 0');
  // after the branch: the fall-through block sees -32; the block at +12 is reached with -32
  // (taken) and -48 (fall-through), so its offset is unknown
  t.equal(at.get(0x4008), -32, 'after addi sp, sp, -32');
  t.equal(at.get(0x400c), null, 'paths disagree: unknown');
  t.equal(stepSp(-32, decode(words[2])), -48, 'addi sp, sp, -16 adds -16');
  t.equal(stepSp(-32, decode(0x00013103)), null, 'ld sp, 0(sp): unknown');
  t.equal(stepSp(-32, decode(0x00813023)), -32, 'sd s0, 0(sp) leaves sp');
});

/**
 * Random-program differential fuzzing: straight-line and branchy sequences over
 * 26 registers, loads and stores into a per-program scratch buffer (base s0), lr/sc pairs and AMOs,
 * and a mix of compressed and full encodings. A program is a list of items so it can be minimised.
 */
import type { TestCase } from './lib.js';
import { Rng } from './rng.js';
import { SPECIAL, lit } from './gen-unit.js';
import { AMOS, BRANCHES, I_OPS, LOADS, R_ALL as R, SHIFT_IMM, SHIFT_IMM_W, STORES } from './isa.js';

/** x5-x7, x9-x30: every register but zero, ra, sp, gp, tp, s0 (scratch base) and t6 (dump base). */
export const POOL = [
  't0',
  't1',
  't2',
  's1',
  'a0',
  'a1',
  'a2',
  'a3',
  'a4',
  'a5',
  'a6',
  'a7',
  's2',
  's3',
  's4',
  's5',
  's6',
  's7',
  's8',
  's9',
  's10',
  's11',
  't3',
  't4',
  't5',
];
/** compressed-register-set members the program may write (x9-x15) */
const CREG = ['s1', 'a0', 'a1', 'a2', 'a3', 'a4', 'a5'];
const SCRATCH = 64;

/** One instruction or a short unit (lr/sc pair); `target` is an item index a forward branch skips to. */
export interface Item {
  lines: string[];
  target?: number;
}

export interface FuzzProgram {
  seed: number;
  init: bigint[];
  scratch: number[];
  items: Item[];
}

function value(rng: Rng): bigint {
  const k = rng.int(4);
  if (k === 0) return rng.pick(SPECIAL);
  if (k === 1) return BigInt(rng.range(-64, 64));
  if (k === 2) return BigInt.asIntN(32, rng.u64());
  return BigInt.asIntN(64, rng.u64());
}

/** Wrap a full-width instruction so the assembler cannot compress it. */
const full = (l: string) => ['  .option push', '  .option norvc', l, '  .option pop'];

function item(rng: Rng, idx: number, n: number): Item {
  const r = () => rng.pick(POOL);
  const c = () => rng.pick(CREG);
  const cs = () => rng.pick(['s0', ...CREG]);
  const enc = (l: string): string[] => (rng.chance(0.5) ? full(l) : [l]);
  const k = rng.int(100);
  if (k < 25) return { lines: enc(`  ${rng.pick(R)} ${r()}, ${r()}, ${r()}`) };
  if (k < 37) {
    const op = rng.pick([...I_OPS, ...SHIFT_IMM, ...SHIFT_IMM_W]);
    const imm =
      op.endsWith('w') && op !== 'addiw'
        ? rng.int(32)
        : op.startsWith('s') && op !== 'slti' && op !== 'sltiu'
          ? rng.int(64)
          : rng.pick([0, 1, -1, 2047, -2048, rng.range(-2048, 2047)]);
    return { lines: enc(`  ${op} ${r()}, ${r()}, ${imm}`) };
  }
  if (k < 40)
    return {
      lines: enc(
        `  ${rng.pick(['lui', 'auipc'])} ${r()}, ${rng.pick([0, 1, 0x80000, 0xfffff, rng.int(0x100000)])}`,
      ),
    };
  if (k < 48) {
    const [op, w] = rng.pick(LOADS);
    return { lines: enc(`  ${op} ${r()}, ${rng.int(SCRATCH / w) * w}(s0)`) };
  }
  if (k < 55) {
    const [op, w] = rng.pick(STORES);
    return { lines: enc(`  ${op} ${r()}, ${rng.int(SCRATCH / w) * w}(s0)`) };
  }
  if (k < 60) {
    const d = rng.chance(0.5);
    const off = rng.int(SCRATCH / 8) * 8 + (d ? 0 : rng.pick([0, 4]));
    const ord = rng.pick(['', '', '.aq', '.rl', '.aqrl']);
    return {
      lines: [`  addi t6, s0, ${off}`, `  ${rng.pick(AMOS)}${d ? '.d' : '.w'}${ord} ${r()}, ${r()}, (t6)`],
    };
  }
  if (k < 62) {
    const d = rng.chance(0.5) ? '.d' : '.w';
    const off = rng.int(SCRATCH / 8) * 8;
    const a = r();
    return {
      lines: [
        `  addi t6, s0, ${off}`,
        `  lr${d} ${a}, (t6)`,
        `  addi ${r()}, ${a}, ${rng.range(-5, 5)}`,
        `  sc${d} ${r()}, ${r()}, (t6)`,
      ],
    };
  }
  if (k < 70 && idx + 1 < n) {
    const target = rng.range(idx + 1, Math.min(n, idx + 6));
    if (rng.chance(0.3)) return { lines: [`  ${rng.pick(['c.beqz', 'c.bnez'])} ${cs()}, %L`], target };
    if (rng.chance(0.1)) return { lines: ['  c.j %L'], target };
    return { lines: enc(`  ${rng.pick(BRANCHES)} ${r()}, ${r()}, %L`), target };
  }
  // compressed forms
  const nz = () => rng.pick([1, -1, 31, -32, rng.range(1, 31)]);
  switch (rng.int(14)) {
    case 0:
      return { lines: [`  c.addi ${r()}, ${nz()}`] };
    case 1:
      return { lines: [`  c.addiw ${r()}, ${rng.range(-32, 31)}`] };
    case 2:
      return { lines: [`  c.li ${r()}, ${rng.range(-32, 31)}`] };
    case 3:
      return { lines: [`  c.lui ${r()}, ${rng.pick([1, 31, 0xfffe0, 0xfffff])}`] };
    case 4:
      return { lines: [`  c.slli ${r()}, ${rng.range(1, 63)}`] };
    case 5:
      return { lines: [`  ${rng.pick(['c.srli', 'c.srai'])} ${c()}, ${rng.range(1, 63)}`] };
    case 6:
      return { lines: [`  c.andi ${c()}, ${rng.range(-32, 31)}`] };
    case 7:
      return {
        lines: [`  ${rng.pick(['c.sub', 'c.xor', 'c.or', 'c.and', 'c.subw', 'c.addw'])} ${c()}, ${cs()}`],
      };
    case 8:
      return { lines: [`  ${rng.pick(['c.mv', 'c.add'])} ${r()}, ${r()}`] };
    case 9:
      return { lines: [`  c.lw ${c()}, ${rng.int(SCRATCH / 4) * 4}(s0)`] };
    case 10:
      return { lines: [`  c.ld ${c()}, ${rng.int(SCRATCH / 8) * 8}(s0)`] };
    case 11:
      return { lines: [`  c.sw ${cs()}, ${rng.int(SCRATCH / 4) * 4}(s0)`] };
    case 12:
      return { lines: [`  c.sd ${cs()}, ${rng.int(SCRATCH / 8) * 8}(s0)`] };
    default:
      return { lines: ['  c.nop'] };
  }
}

export function generate(seed: number, n?: number): FuzzProgram {
  const rng = new Rng(seed);
  const len = n ?? rng.range(10, 60);
  const items: Item[] = [];
  for (let i = 0; i < len; i++) items.push(item(rng, i, len));
  return {
    seed,
    init: POOL.map(() => value(rng)),
    scratch: Array.from({ length: SCRATCH }, () => rng.int(256)),
    items,
  };
}

/** Render a program (optionally only the items whose indices are in `keep`) as a test. */
export function toTest(p: FuzzProgram, keep?: number[]): TestCase {
  const idx = keep ?? p.items.map((_, i) => i);
  const body: string[] = ['  la s0, %D', ...POOL.map((r, i) => `  li ${r}, ${lit(p.init[i])}`)];
  const labels = new Map<number, string>();
  idx.forEach((i) => {
    const t = p.items[i].target;
    if (t !== undefined) labels.set(i, `.Lf%T_${i}`);
  });
  const pending: [number, string][] = [];
  for (const i of idx) {
    for (const [k, [tgt, lab]] of [...pending.entries()].reverse()) {
      if (tgt <= i) {
        body.push(`${lab}:`);
        pending.splice(k, 1);
      }
    }
    const it = p.items[i];
    const lab = labels.get(i);
    body.push(...it.lines.map((l) => (lab ? l.replace('%L', lab) : l)));
    if (lab && it.target !== undefined) pending.push([it.target, lab]);
  }
  for (const [, lab] of pending) body.push(`${lab}:`);
  return { name: `fuzz seed ${p.seed} (${idx.length} items)`, body, outs: [...POOL], data: p.scratch };
}

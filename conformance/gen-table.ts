/**
 * Encodings drawn from every entry of the ISA table (src/riscv/isa.ts): for each entry, its match
 * pattern with random operand fields, kept when the entry is the one the table gives for the word
 * (the first matching entry, not reserved). scripts/update-golden.sh assembles them as raw data
 * and records llvm-objdump's listing as test/golden/isa-table.txt, so the test can hold each
 * entry's mnemonic and berm's disassembly against LLVM's. Deterministic (fixed seed).
 *
 * Run directly (`node --import ./scripts/ts/register.mjs conformance/gen-table.ts`) it prints the
 * assembly file.
 */
import process from 'node:process';
import { pathToFileURL } from 'node:url';
import { COMPRESSED, INSTRUCTIONS } from '../src/riscv/isa.js';
import { Rng } from './rng.js';

/** Samples per table entry. */
export const SAMPLES_PER_ENTRY = 6;

/** Guest address of the first sample in the assembled file (the linker's -Ttext). */
export const TABLE_TEXT_ADDRESS = 0x11000;

/** One encoding: the entry it was drawn from, the word and its size in bytes. */
export interface TableSample {
  entry: string;
  word: number;
  size: 2 | 4;
}

const first32 = (w: number) => INSTRUCTIONS.find((e) => (w & e.mask) >>> 0 === e.match);
const first16 = (h: number) => COMPRESSED.find((e) => (h & e.mask) === e.match);

/**
 * Operand bits LLVM 14 would print as something else: fence's reserved rd/rs1 and fm fields and
 * fence.i's rd/rs1/imm are kept zero (berm accepts them as the spec asks, LLVM prints <unknown>).
 */
const KEEP_ZERO: Record<string, number> = { fence: 0xf00f8f80, 'fence.i': 0xffff8f80 };

/** Every sample, 32-bit entries first (table order), then compressed ones. */
export function tableSamples(seed = 13): TableSample[] {
  const rng = new Rng(seed);
  const out: TableSample[] = [];
  for (const e of INSTRUCTIONS) {
    let n = 0;
    for (let tries = 0; n < SAMPLES_PER_ENTRY && tries < 1000; tries++) {
      const free = ~e.mask & ~(KEEP_ZERO[e.name] ?? 0);
      const w = (e.match | (Number(rng.u64() & 0xffffffffn) & free)) >>> 0;
      if (first32(w) !== e) continue;
      out.push({ entry: e.name, word: w, size: 4 });
      n++;
    }
  }
  for (const e of COMPRESSED) {
    let n = 0;
    for (let tries = 0; n < SAMPLES_PER_ENTRY && tries < 1000; tries++) {
      const h = e.match | (rng.int(0x10000) & ~e.mask);
      if (first16(h) !== e || reserved(e.reservedIfZero, h, e.layout)) continue;
      out.push({ entry: e.name, word: h, size: 2 });
      n++;
    }
  }
  return out;
}

/**
 * Whether the field an entry reserves when zero is zero in `h`, read straight from the encoding:
 * rd/rs1 at bits 11:7, the immediate as any of the immediate bits (12 and 6:2, or 12:5 for
 * c.addi4spn).
 */
function reserved(field: string | undefined, h: number, layout: string): boolean {
  if (field === undefined) return false;
  if (field === 'rd' || field === 'rs1') return ((h >>> 7) & 31) === 0;
  const immBits = layout === 'ciw-addi4spn' ? 0x1fe0 : 0x107c;
  return (h & immBits) === 0;
}

/** The assembly file: every sample as `.half`/`.word` data in `.text`. */
export function tableAssembly(samples: TableSample[]): string {
  const lines = ['  .text', '  .globl _start', '_start:'];
  for (const s of samples) lines.push(`  ${s.size === 2 ? '.half' : '.word'} 0x${s.word.toString(16)}`);
  // one data relocation, so that the linked file has a relocation section (berm's reader requires one)
  lines.push('  .data', '  .dword _start');
  return lines.join('\n') + '\n';
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  process.stdout.write(tableAssembly(tableSamples()));
}

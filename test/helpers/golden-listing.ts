/**
 * Parses llvm-objdump listings (test/golden/) and compares them with berm's disassembler.
 */
import { readElf } from '../../src/elf/reader.js';
import type { ElfImage } from '../../src/elf/types.js';
import { decode } from '../../src/riscv/decode.js';
import { disassemble } from '../../src/riscv/disasm.js';

export interface GoldenLine {
  address: number;
  text: string;
  /** true when llvm-objdump skipped a run of zero bytes ("...") just before this line */
  afterGap: boolean;
}

/** The instruction lines and symbol headers of an `llvm-objdump -d` listing. */
export function parseListing(text: string): {
  lines: GoldenLine[];
  headers: { address: number; name: string }[];
} {
  const lines: GoldenLine[] = [];
  const headers: { address: number; name: string }[] = [];
  let gap = true;
  for (const raw of text.split('\n')) {
    const h = /^([0-9a-f]{16}) <(.*)>:$/.exec(raw);
    if (h) {
      headers.push({ address: parseInt(h[1], 16), name: h[2] });
      continue;
    }
    if (/^\s*\.\.\.$/.test(raw) || raw.startsWith('Disassembly of section')) {
      gap = true;
      continue;
    }
    const m = /^ *([0-9a-f]+):[ ]*\t(.*)$/.exec(raw);
    if (!m) continue;
    // llvm-objdump ends operand-less instructions with a tab: compare without trailing whitespace
    lines.push({ address: parseInt(m[1], 16), text: m[2].replace(/\s+$/, ''), afterGap: gap });
    gap = false;
  }
  return { lines, headers };
}

function fetch(image: ElfImage, address: number): number | null {
  for (const s of image.segments) {
    const o = address - s.vaddr;
    if (o >= 0 && o + 2 <= s.filesz) {
      const d = s.data;
      const lo = d[o] | (d[o + 1] << 8);
      if ((lo & 3) !== 3 || o + 4 > s.filesz) return lo;
      return (lo | (d[o + 2] << 16) | (d[o + 3] << 24)) >>> 0;
    }
  }
  return null;
}

/**
 * Disassemble every address listed in `listing` from the ELF's bytes and return the differences
 * (empty when berm prints exactly what llvm-objdump printed, trailing whitespace aside).
 */
export function compareListing(elf: Uint8Array, listing: string): { checked: number; diffs: string[] } {
  const image = readElf(elf);
  const { lines } = parseListing(listing);
  // llvm-objdump 14 names a target by the symbols of the section(s) with the highest start address
  // at or below it (no size check), taking the last symbol at or before the target in (address,
  // name) order; section and file symbols are not candidates.
  const secAddrs = [...new Set(image.sections.map((s) => s.addr))].sort((a, b) => a - b);
  const candidates = image.symbols
    .filter((s) => s.type !== 3 && s.type !== 4 && s.shndx !== 0 && s.shndx < 0xff00 && s.name !== '')
    .sort((a, b) => a.value - b.value || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const symbolize = (target: number): string | null => {
    let secAddr = -1;
    for (const a of secAddrs) if (a <= target) secAddr = a;
    if (secAddr < 0) return null;
    const inSec = new Set<number>();
    image.sections.forEach((s, i) => {
      if (s.addr === secAddr) inSec.add(i);
    });
    let best: { value: number; name: string } | null = null;
    for (const c of candidates) if (inSec.has(c.shndx) && c.value <= target) best = c;
    if (!best) return null;
    return target === best.value ? best.name : `${best.name}+0x${(target - best.value).toString(16)}`;
  };
  const diffs: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const g = lines[i];
    const bits = fetch(image, g.address);
    if (bits === null) {
      diffs.push(`${g.address.toString(16)}: no bytes in the image`);
      continue;
    }
    const instr = decode(bits);
    const ours = disassemble(instr, g.address, symbolize);
    const hexBits = bits.toString(16).padStart(instr.size * 2, '0');
    if (ours !== g.text)
      diffs.push(`${g.address.toString(16)} [${hexBits}]: llvm "${g.text}" berm "${ours}"`);
    const next = lines[i + 1];
    if (next && !next.afterGap && next.address !== g.address + instr.size) {
      diffs.push(
        `${g.address.toString(16)}: berm size ${instr.size}, llvm's next line at ${next.address.toString(16)}`,
      );
    }
  }
  return { checked: lines.length, diffs };
}

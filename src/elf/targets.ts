/**
 * Indirect-branch targets named by relocations. berm only lets an indirect jump or call reach an
 * address that some relocation materialises as a value (a code pointer that could flow into a
 * register), never an address that only direct control transfers name.
 */
import type { ElfImage, Relocation } from './types.js';

const PF_X = 1;
const SHF_ALLOC = 2;
const SHF_EXECINSTR = 4;
const X_GP = 3;

/** What {@link relocationTargets} found. */
export interface RelocationTargets {
  /**
   * addresses that relocations name as values and that lie in an executable segment's file bytes and
   * in an SHF_EXECINSTR section
   */
  codeAddresses: Set<number>;
}

/**
 * Collect the code addresses that relocations materialise as data or register values, i.e. the
 * candidates for indirect calls and jumps (RISC-V ELF psABI, "Relocations"; S = symbol value,
 * A = addend):
 * - R_RISCV_64 and R_RISCV_32 data words: S + A (function-pointer tables, clang jump tables,
 *   medlow jump tables).
 * - R_RISCV_HI20, R_RISCV_RVC_LUI (GNU ld's relaxation of a HI20 lui to c.lui) and
 *   R_RISCV_PCREL_HI20 address materialisations: S + A. A PCREL_HI20 that addresses data is
 *   dropped by the executable-segment filter.
 * - R_RISCV_ADD32 / R_RISCV_SUB32 (and ADD64 / SUB64) pairs at one offset, gcc's table-relative
 *   jump tables: the entry is S_add + A_add - (S_sub + A_sub); the target is S_add + A_add.
 * - R_RISCV_32_PCREL words: S + A.
 * - R_RISCV_GPREL_I / R_RISCV_GPREL_S, produced by GNU ld's relaxation of lui/auipc pairs to
 *   gp-relative accesses. Measured with binutils 2.40 --emit-relocs: ld rewrites the addend to
 *   A - GP when it switches the base register to gp (rs1 = x3), so the address is S + A + GP; with
 *   an x0 base the addend is unchanged and the address is S + A (always below 2 KiB).
 *
 * Left out: direct control transfers (BRANCH, JAL, CALL, CALL_PLT, RVC_BRANCH, RVC_JUMP), the
 * low-part relocations (LO12_*, PCREL_LO12_*: their HI20 partner already names the address),
 * NONE, RELAX, ALIGN, TLS and SET/SUB-only relocations, relocations applied to non-allocated
 * sections (debug info names code ranges, not pointers) and to `.eh_frame*` (unwind ranges).
 *
 * @param image a result of readElf
 * @returns the set of addresses; it includes addresses that are not function entries (for example
 *   jump-table cases) and callers decide what to do with those.
 */
export function relocationTargets(image: ElfImage): RelocationTargets {
  // GNU ld puts .rodata in the executable segment: require an SHF_EXECINSTR section as well, so
  // that jump tables and constants addressed with auipc are not taken for code.
  const exec = image.segments.filter((s) => (s.flags & PF_X) !== 0);
  const code = image.sections.filter(
    (s) => (s.flags & (SHF_ALLOC | SHF_EXECINSTR)) === (SHF_ALLOC | SHF_EXECINSTR),
  );
  // the code sections as sorted disjoint ranges, searched by halving: a crafted file may declare
  // 65,535 of them, and a scan per relocation (up to --max-relocations) would take hours
  const inCode = rangeSet(code.map((s) => [s.addr, s.addr + s.size]));
  const inExec = (a: number): boolean =>
    exec.some((s) => a >= s.vaddr && a < s.vaddr + s.filesz) && inCode(a);
  const skip = new Set<string>();
  for (const s of image.sections) {
    if ((s.flags & SHF_ALLOC) === 0 || s.name.startsWith('.eh_frame')) skip.add(s.name);
  }
  const codeAddresses = new Set<number>();
  const add = (a: number): void => {
    if (Number.isSafeInteger(a) && inExec(a)) codeAddresses.add(a);
  };
  // offsets carrying a SUB32/SUB64, to recognise ADD/SUB pairs
  const subs = new Set<string>();
  for (const r of image.relocations) {
    if (r.type === 39 || r.type === 40) subs.add(`${r.section}:${r.offset}:${r.type === 39 ? 32 : 64}`);
  }
  for (const r of image.relocations) {
    if (skip.has(r.section)) continue;
    const sa = r.symbolValue + r.addend;
    switch (r.type) {
      case 1: // R_RISCV_32
      case 2: // R_RISCV_64
      case 23: // R_RISCV_PCREL_HI20
      case 26: // R_RISCV_HI20
      case 46: // R_RISCV_RVC_LUI
      case 57: // R_RISCV_32_PCREL
        add(sa);
        break;
      case 35: // R_RISCV_ADD32
      case 36: // R_RISCV_ADD64
        if (subs.has(`${r.section}:${r.offset}:${r.type === 35 ? 32 : 64}`)) add(sa);
        break;
      case 47: // R_RISCV_GPREL_I
      case 48: // R_RISCV_GPREL_S
        add(gpBaseIsGp(image, r) && image.globalPointer !== null ? sa + image.globalPointer : sa);
        break;
    }
  }
  return { codeAddresses };
}

/**
 * Membership in a union of half-open ranges [start, end), in O(log n) after an O(n log n) merge.
 * @param ranges [start, end) pairs, in any order, overlapping or empty
 * @returns a test of whether an address lies in any of them
 */
export function rangeSet(ranges: [number, number][]): (a: number) => boolean {
  const sorted = ranges.filter(([lo, hi]) => lo < hi).sort((x, y) => x[0] - y[0]);
  const starts: number[] = [];
  const ends: number[] = [];
  for (const [lo, hi] of sorted) {
    if (ends.length > 0 && lo <= ends[ends.length - 1]!)
      ends[ends.length - 1] = Math.max(ends[ends.length - 1]!, hi);
    else {
      starts.push(lo);
      ends.push(hi);
    }
  }
  return (a) => {
    // the last range starting at or before a
    let lo = 0;
    let hi = starts.length - 1;
    let at = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (starts[mid]! <= a) {
        at = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return at >= 0 && a < ends[at]!;
  };
}

/** Reads rs1 of the relocated instruction: gp (x3) or x0 decides how ld rewrote the addend. */
function gpBaseIsGp(image: ElfImage, r: Relocation): boolean {
  for (const s of image.segments) {
    const o = r.offset - s.vaddr;
    if (o >= 0 && o + 4 <= s.filesz) {
      const w = s.data[o] | (s.data[o + 1] << 8) | (s.data[o + 2] << 16);
      return ((w >>> 15) & 31) === X_GP;
    }
  }
  return true;
}

/**
 * Finding guest code in a parsed image: the function containing an address, the file bytes of a
 * range, and the `symbol+0xoffset` names disassemblers print for branch targets.
 */
import type { ElfImage, GuestFunction } from './types.js';

/** The function of `fns` (sorted by start, disjoint) containing `address`, or null. */
export function functionAt(fns: readonly GuestFunction[], address: number): GuestFunction | null {
  let lo = 0;
  let hi = fns.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const f = fns[mid];
    if (address < f.start) hi = mid - 1;
    else if (address >= f.start + f.size) lo = mid + 1;
    else return f;
  }
  return null;
}

/** The file bytes of guest range [start, start + size), or null when no segment holds them all. */
export function codeBytes(image: ElfImage, start: number, size: number): Uint8Array | null {
  for (const s of image.segments) {
    if (start >= s.vaddr && start + size <= s.vaddr + s.filesz) {
      return s.data.subarray(start - s.vaddr, start - s.vaddr + size);
    }
  }
  return null;
}

/**
 * A namer of code addresses as llvm-objdump annotates branch targets: `name` at a function's
 * start, `name+0x1c` inside it, null outside every function.
 */
export function codeSymbolizer(image: ElfImage): (address: number) => string | null {
  const fns = image.functions;
  return (a: number): string | null => {
    const f = functionAt(fns, a);
    if (!f) return null;
    return a === f.start ? f.name : `${f.name}+0x${(a - f.start).toString(16)}`;
  };
}

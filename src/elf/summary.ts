/**
 * The part of a parsed image that running a compiled module needs (entry, PT_LOAD segments as
 * file offsets, guest functions, the manifest's place, `__global_pointer$`, the image bounds), as
 * JSON text to keep beside a cached module: a warm start restores it instead of parsing the ELF
 * again (symbol and relocation tables are most of that cost). Sections, symbols and relocations
 * are not kept: the restored image parses the ELF for them on first use.
 */
import { readElf } from './reader.js';
import type { ElfImage, ElfSymbol, GuestFunction, Relocation, Section, Segment } from './types.js';

/** Format version of the summary text; a summary of another version is not restored. */
const SUMMARY_VERSION = 1;

interface SummaryJson {
  v: number;
  /** ELF file size in bytes: a summary is only restored over the file it was made from */
  size: number;
  entry: number;
  flags: number;
  /** [vaddr, memsz, filesz, flags, file offset] */
  segments: [number, number, number, number, number][];
  functions: GuestFunction[];
  /** [file offset, length] of the manifest bytes */
  manifest: [number, number] | null;
  globalPointer: number | null;
  imageStart: number;
  imageEnd: number;
}

/** File offset of `view` inside `bytes`, or -1 when it is not a view into them. */
function offsetIn(bytes: Uint8Array, view: Uint8Array): number {
  if (view.buffer !== bytes.buffer) return -1;
  const off = view.byteOffset - bytes.byteOffset;
  return off >= 0 && off + view.length <= bytes.length ? off : -1;
}

/**
 * The summary of `image`, parsed from `bytes` by {@link readElf}.
 * @returns JSON text, or null when the image's data are not views into `bytes` (nothing to refer to).
 */
export function summarizeImage(image: ElfImage, bytes: Uint8Array): string | null {
  const segments: SummaryJson['segments'] = [];
  for (const s of image.segments) {
    const off = offsetIn(bytes, s.data);
    if (off < 0 || s.data.length !== s.filesz) return null;
    segments.push([s.vaddr, s.memsz, s.filesz, s.flags, off]);
  }
  let manifest: SummaryJson['manifest'] = null;
  if (image.manifest !== null) {
    const off = offsetIn(bytes, image.manifest);
    if (off < 0) return null;
    manifest = [off, image.manifest.length];
  }
  const out: SummaryJson = {
    v: SUMMARY_VERSION,
    size: bytes.length,
    entry: image.entry,
    flags: image.flags,
    segments,
    functions: image.functions,
    manifest,
    globalPointer: image.globalPointer,
    imageStart: image.imageStart,
    imageEnd: image.imageEnd,
  };
  return JSON.stringify(out);
}

const isNum = (x: unknown): x is number => typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;

/**
 * The image of `bytes` from a summary {@link summarizeImage} made of the same bytes (the caller
 * keys summaries by the ELF's digest). `sections`, `symbols` and `relocations` parse `bytes` with
 * {@link readElf} when first read.
 * @returns the image, or null when the text is not a summary of this version for a file of this
 *   size (the caller then parses the ELF).
 */
export function restoreImage(text: string, bytes: Uint8Array): ElfImage | null {
  let j: SummaryJson;
  try {
    j = JSON.parse(text) as SummaryJson;
  } catch {
    return null;
  }
  if (
    typeof j !== 'object' ||
    j === null ||
    j.v !== SUMMARY_VERSION ||
    j.size !== bytes.length ||
    !Array.isArray(j.segments) ||
    !Array.isArray(j.functions) ||
    !isNum(j.entry) ||
    !isNum(j.imageStart) ||
    !isNum(j.imageEnd)
  ) {
    return null;
  }
  const segments: Segment[] = [];
  for (const s of j.segments) {
    if (!Array.isArray(s) || s.length !== 5 || !s.every(isNum)) return null;
    const [vaddr, memsz, filesz, flags, off] = s;
    if (off + filesz > bytes.length) return null;
    segments.push({ vaddr, memsz, filesz, flags, data: bytes.subarray(off, off + filesz) });
  }
  let manifest: Uint8Array | null = null;
  if (j.manifest !== null) {
    const [off, len] = j.manifest;
    if (!isNum(off) || !isNum(len) || off + len > bytes.length) return null;
    manifest = bytes.subarray(off, off + len);
  }
  let full: ElfImage | null = null;
  const parsed = (): ElfImage => (full ??= readElf(bytes));
  return {
    entry: j.entry,
    flags: j.flags,
    segments,
    functions: j.functions,
    manifest,
    globalPointer: j.globalPointer,
    imageStart: j.imageStart,
    imageEnd: j.imageEnd,
    get sections(): Section[] {
      return parsed().sections;
    },
    get symbols(): ElfSymbol[] {
      return parsed().symbols;
    },
    get relocations(): Relocation[] {
      return parsed().relocations;
    },
  };
}

/**
 * ELF reader for berm harnesses: statically linked RV64 executables (ELF64 gABI; RISC-V ELF psABI,
 * "ELF Object Files") linked with `--emit-relocs`. Parses and validates in one pass over bounded
 * tables; every problem is reported as an {@link ElfError} naming the fix.
 */
import type { ElfImage, ElfSymbol, GuestFunction, Relocation, Section, Segment } from './types.js';

/**
 * The only exception readElf throws. `code` is a stable machine-readable reason:
 * 'truncated', 'not-elf', 'not-64-bit', 'not-little-endian', 'not-riscv', 'not-executable',
 * 'float-abi', 'rve', 'bad-header', 'bad-segment', 'overlapping-segments', 'address-range',
 * 'too-large', 'bad-entry', 'bad-section', 'no-symtab', 'bad-symbol', 'no-relocations',
 * 'bad-relocation'.
 */
export class ElfError extends Error {
  readonly code: string;
  /**
   * @param code one of the codes listed in the module comment
   * @param message what is wrong and how to fix it; for 'truncated' (the file ends before a
   *   table or segment it declares) the fix is the same everywhere and is appended here
   */
  constructor(code: string, message: string) {
    super(code === 'truncated' ? `${message}; ${TRUNCATED_FIX}` : message);
    this.name = 'ElfError';
    this.code = code;
  }
}

/** The fix of every 'truncated' error: the bytes on disk are not the whole harness. */
export const TRUNCATED_FIX =
  'the file is incomplete or damaged (an interrupted copy or download?): rebuild the harness or copy it again';

const EM_RISCV = 243;
const ET_EXEC = 2;
const PT_LOAD = 1;
const PF_X = 1;
const SHT_SYMTAB = 2;
const SHT_STRTAB = 3;
const SHT_RELA = 4;
const SHT_NOBITS = 8;
const SHF_ALLOC = 2;
const STT_FUNC = 2;
const STT_SECTION = 3;
const EF_RISCV_FLOAT_ABI = 0x6;
const EF_RISCV_RVE = 0x8;
const FOUR_GIB = 2 ** 32;
const MAX_MEMSZ = 2 ** 30;
/**
 * Most PT_LOAD segments: a linker emits a handful (text, rodata, data; GNU ld's -z separate-code
 * four). Everything that maps a guest address to its segment (here per function symbol, in the
 * translator per function and per relocation) walks the list, so 65,534 empty ones beside 131,072
 * function symbols held the reader ~150 s on the serving thread.
 */
export const MAX_LOAD_SEGMENTS = 64;

/** psABI relocation type names by number (RISC-V ELF psABI, "Relocations" table). */
const RELOC_NAMES: Record<number, string> = {
  0: 'R_RISCV_NONE',
  1: 'R_RISCV_32',
  2: 'R_RISCV_64',
  3: 'R_RISCV_RELATIVE',
  4: 'R_RISCV_COPY',
  5: 'R_RISCV_JUMP_SLOT',
  6: 'R_RISCV_TLS_DTPMOD32',
  7: 'R_RISCV_TLS_DTPMOD64',
  8: 'R_RISCV_TLS_DTPREL32',
  9: 'R_RISCV_TLS_DTPREL64',
  10: 'R_RISCV_TLS_TPREL32',
  11: 'R_RISCV_TLS_TPREL64',
  12: 'R_RISCV_TLSDESC',
  16: 'R_RISCV_BRANCH',
  17: 'R_RISCV_JAL',
  18: 'R_RISCV_CALL',
  19: 'R_RISCV_CALL_PLT',
  20: 'R_RISCV_GOT_HI20',
  21: 'R_RISCV_TLS_GOT_HI20',
  22: 'R_RISCV_TLS_GD_HI20',
  23: 'R_RISCV_PCREL_HI20',
  24: 'R_RISCV_PCREL_LO12_I',
  25: 'R_RISCV_PCREL_LO12_S',
  26: 'R_RISCV_HI20',
  27: 'R_RISCV_LO12_I',
  28: 'R_RISCV_LO12_S',
  29: 'R_RISCV_TPREL_HI20',
  30: 'R_RISCV_TPREL_LO12_I',
  31: 'R_RISCV_TPREL_LO12_S',
  32: 'R_RISCV_TPREL_ADD',
  33: 'R_RISCV_ADD8',
  34: 'R_RISCV_ADD16',
  35: 'R_RISCV_ADD32',
  36: 'R_RISCV_ADD64',
  37: 'R_RISCV_SUB8',
  38: 'R_RISCV_SUB16',
  39: 'R_RISCV_SUB32',
  40: 'R_RISCV_SUB64',
  41: 'R_RISCV_GNU_VTINHERIT',
  42: 'R_RISCV_GNU_VTENTRY',
  43: 'R_RISCV_ALIGN',
  44: 'R_RISCV_RVC_BRANCH',
  45: 'R_RISCV_RVC_JUMP',
  46: 'R_RISCV_RVC_LUI',
  47: 'R_RISCV_GPREL_I',
  48: 'R_RISCV_GPREL_S',
  49: 'R_RISCV_TPREL_I',
  50: 'R_RISCV_TPREL_S',
  51: 'R_RISCV_RELAX',
  52: 'R_RISCV_SUB6',
  53: 'R_RISCV_SET6',
  54: 'R_RISCV_SET8',
  55: 'R_RISCV_SET16',
  56: 'R_RISCV_SET32',
  57: 'R_RISCV_32_PCREL',
  58: 'R_RISCV_IRELATIVE',
  59: 'R_RISCV_PLT32',
  60: 'R_RISCV_SET_ULEB128',
  61: 'R_RISCV_SUB_ULEB128',
};

/**
 * The psABI name of a relocation type number, e.g. 23 -> 'R_RISCV_PCREL_HI20'; unknown numbers
 * give 'R_RISCV_<n>'.
 */
export function relocationTypeName(type: number): string {
  return RELOC_NAMES[type] ?? `R_RISCV_${type}`;
}

const latin1 = new TextDecoder('latin1');
const utf8 = new TextDecoder('utf-8');

class Reader {
  readonly view: DataView;
  constructor(readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  u8(off: number): number {
    return this.view.getUint8(off);
  }
  u16(off: number): number {
    return this.view.getUint16(off, true);
  }
  u32(off: number): number {
    return this.view.getUint32(off, true);
  }
  /** unsigned 64-bit as a number; values past 2^53 lose precision but are always rejected as too big */
  u64(off: number): number {
    return this.view.getUint32(off + 4, true) * FOUR_GIB + this.view.getUint32(off, true);
  }
  i64(off: number): number {
    return this.view.getInt32(off + 4, true) * FOUR_GIB + this.view.getUint32(off, true);
  }
}

/** Does [off, off + len) lie inside a file of `size` bytes? */
function within(off: number, len: number, size: number): boolean {
  return off >= 0 && len >= 0 && off <= size && len <= size - off;
}

/** The table sizes an ELF declares (see {@link elfTableSizes}). */
export interface ElfTableSizes {
  /** entries of every SHT_SYMTAB section (24 bytes each): an upper bound of the guest functions */
  symbols: number;
  /** entries of every SHT_RELA section (24 bytes each) */
  relocations: number;
}

/**
 * Count the symbols and relocations an ELF declares, reading only its ELF header and section
 * headers (constant memory, no table parsed), so a caller can refuse an image too large to read
 * and translate before {@link readElf} builds its tables: the reader keeps every symbol and
 * relocation as an object (a 21 MB ELF of 500,000 functions took ~480 MiB to read).
 *
 * @param bytes the whole ELF file
 * @returns the counts, or null when the headers are not those of an ELF64 file whose section
 *   header table and symbol and relocation tables lie inside it (readElf then names the
 *   problem); the tables of a crafted file may overlap, so the counts are upper bounds of what
 *   readElf will parse (each at most the file's size / 24)
 */
export function elfTableSizes(bytes: Uint8Array): ElfTableSizes | null {
  const size = bytes.length;
  if (size < 64 || bytes[0] !== 0x7f || bytes[1] !== 0x45 || bytes[2] !== 0x4c || bytes[3] !== 0x46)
    return null;
  if (bytes[4] !== 2 || bytes[5] !== 1) return null;
  const r = new Reader(bytes);
  const shoff = r.u64(40);
  const shnum = r.u16(60);
  if (shnum > 0 && (r.u16(58) !== 64 || !within(shoff, shnum * 64, size))) return null;
  let symbols = 0;
  let relocations = 0;
  for (let i = 0; i < shnum; i++) {
    const s = shoff + i * 64;
    const type = r.u32(s + 4);
    if (type !== SHT_SYMTAB && type !== SHT_RELA) continue;
    const bytes = r.u64(s + 32);
    // a table past the end of the file is readElf's to name ('truncated')
    if (!within(r.u64(s + 24), bytes, size)) return null;
    if (type === SHT_SYMTAB) symbols += Math.floor(bytes / 24);
    else relocations += Math.floor(bytes / 24);
  }
  return { symbols, relocations };
}

/**
 * Parse and validate a berm harness.
 *
 * @param bytes the whole ELF file; segment `data` in the result are views into it (not copies)
 * @returns the image: PT_LOAD segments, sections, symbols, guest functions (STT_FUNC symbols with a
 *   non-zero size inside executable segments, aliases merged), every SHT_RELA relocation with its
 *   symbol resolved, the `.berm.abi` manifest and `__global_pointer$`
 * @throws ElfError when the file is not an ELF64 little-endian RISC-V ET_EXEC, uses a float ABI or
 *   RVE, lacks `.symtab` or relocation sections, has overlapping or out-of-range segments, more than
 *   {@link MAX_LOAD_SEGMENTS} of them, more than 1 GiB of memory, an entry point outside executable code, or any table running past the file.
 *   Never throws anything else, for any input.
 */
export function readElf(bytes: Uint8Array): ElfImage {
  try {
    return parse(new Reader(bytes));
  } catch (e) {
    if (e instanceof ElfError) throw e;
    // A DataView RangeError would mean a bounds check was missed; keep the contract regardless,
    // with the original error as the cause (tests refuse any such wrapped error).
    const wrapped = new ElfError('truncated', `malformed ELF: ${e instanceof Error ? e.message : String(e)}`);
    wrapped.cause = e;
    throw wrapped;
  }
}

function parse(r: Reader): ElfImage {
  const size = r.bytes.length;
  if (size < 4 || r.u8(0) !== 0x7f || r.u8(1) !== 0x45 || r.u8(2) !== 0x4c || r.u8(3) !== 0x46) {
    throw new ElfError('not-elf', 'not an ELF file (bad magic): build the harness with the berm guest SDK');
  }
  if (size < 64) throw new ElfError('truncated', 'ELF header truncated: the file is incomplete');
  if (r.u8(4) !== 2) {
    throw new ElfError('not-64-bit', 'not a 64-bit ELF: build for RV64 (-march=rv64imac -mabi=lp64)');
  }
  if (r.u8(5) !== 1) {
    throw new ElfError('not-little-endian', 'not a little-endian ELF: RISC-V harnesses are little-endian');
  }
  if (r.u16(18) !== EM_RISCV) {
    throw new ElfError('not-riscv', `not a RISC-V ELF (e_machine ${r.u16(18)}): build with --target=riscv64`);
  }
  if (r.u16(16) !== ET_EXEC) {
    throw new ElfError(
      'not-executable',
      `not an executable (e_type ${r.u16(16)}): link a static executable (no -shared, no -pie, not just -c)`,
    );
  }
  const flags = r.u32(48);
  if ((flags & EF_RISCV_FLOAT_ABI) !== 0) {
    throw new ElfError('float-abi', 'the ELF uses a hardware floating-point ABI: build with -mabi=lp64');
  }
  if ((flags & EF_RISCV_RVE) !== 0) {
    throw new ElfError('rve', 'the ELF targets RVE (16 registers): build with -march=rv64imac -mabi=lp64');
  }
  const entry = r.u64(24);
  const phoff = r.u64(32);
  const shoff = r.u64(40);
  const phentsize = r.u16(54);
  const phnum = r.u16(56);
  const shentsize = r.u16(58);
  const shnum = r.u16(60);
  const shstrndx = r.u16(62);

  // Program headers
  if (phnum === 0xffff)
    throw new ElfError('bad-header', 'extended program header numbering is not supported');
  if (phnum > 0 && phentsize !== 56)
    throw new ElfError('bad-header', `e_phentsize ${phentsize}, expected 56`);
  if (!within(phoff, phnum * 56, size)) {
    throw new ElfError('truncated', 'the program header table runs past the end of the file');
  }
  const segments: Segment[] = [];
  let totalMem = 0;
  for (let i = 0; i < phnum; i++) {
    const p = phoff + i * 56;
    if (r.u32(p) !== PT_LOAD) continue;
    if (segments.length === MAX_LOAD_SEGMENTS) {
      throw new ElfError(
        'bad-segment',
        `the ELF has more than ${MAX_LOAD_SEGMENTS} PT_LOAD segments: link the harness with the berm guest SDK's linker script`,
      );
    }
    const pflags = r.u32(p + 4);
    const offset = r.u64(p + 8);
    const vaddr = r.u64(p + 16);
    const filesz = r.u64(p + 32);
    const memsz = r.u64(p + 40);
    if (filesz > memsz) {
      throw new ElfError('bad-segment', `PT_LOAD at 0x${vaddr.toString(16)} has filesz > memsz`);
    }
    if (vaddr >= FOUR_GIB || memsz > FOUR_GIB - vaddr) {
      throw new ElfError(
        'address-range',
        `PT_LOAD at 0x${vaddr.toString(16)} reaches past 4 GiB: link the harness below 0x100000000`,
      );
    }
    if (!within(offset, filesz, size)) {
      throw new ElfError('truncated', `PT_LOAD at 0x${vaddr.toString(16)} runs past the end of the file`);
    }
    totalMem += memsz;
    if (totalMem > MAX_MEMSZ) {
      throw new ElfError('too-large', 'the loadable segments need more than 1 GiB of memory');
    }
    segments.push({ vaddr, memsz, filesz, flags: pflags, data: r.bytes.subarray(offset, offset + filesz) });
  }
  if (segments.length === 0) throw new ElfError('bad-segment', 'the ELF has no PT_LOAD segment');
  const sorted = [...segments].sort((a, b) => a.vaddr - b.vaddr);
  // each non-empty segment against the one reaching furthest before it (not only its neighbour:
  // an empty segment between two overlapping ones hid the overlap)
  let reach: Segment | null = null;
  for (const s of sorted) {
    if (s.memsz === 0) continue;
    if (reach && reach.vaddr + reach.memsz > s.vaddr) {
      throw new ElfError(
        'overlapping-segments',
        `PT_LOAD segments at 0x${reach.vaddr.toString(16)} and 0x${s.vaddr.toString(16)} overlap: ` +
          'fix the linker script',
      );
    }
    if (!reach || s.vaddr + s.memsz > reach.vaddr + reach.memsz) reach = s;
  }
  const imageStart = sorted[0].vaddr;
  let imageEnd = 0;
  for (const s of sorted) imageEnd = Math.max(imageEnd, s.vaddr + s.memsz);
  const inExec = (addr: number): boolean =>
    segments.some((s) => (s.flags & PF_X) !== 0 && addr >= s.vaddr && addr < s.vaddr + s.filesz);
  if (!inExec(entry)) {
    throw new ElfError(
      'bad-entry',
      `entry point 0x${entry.toString(16)} is outside the executable segments: check ENTRY in the linker script`,
    );
  }

  // Section headers
  if (shnum === 0) {
    throw new ElfError('no-symtab', 'the ELF has no section headers (stripped?): do not strip the harness');
  }
  if (shentsize !== 64) throw new ElfError('bad-header', `e_shentsize ${shentsize}, expected 64`);
  if (!within(shoff, shnum * 64, size)) {
    throw new ElfError('truncated', 'the section header table runs past the end of the file');
  }
  if (shstrndx >= shnum) throw new ElfError('bad-header', `e_shstrndx ${shstrndx} out of range`);
  const raw: Section[] = [];
  for (let i = 0; i < shnum; i++) {
    const s = shoff + i * 64;
    const sec: Section = {
      name: '',
      type: r.u32(s + 4),
      flags: r.u64(s + 8),
      addr: r.u64(s + 16),
      offset: r.u64(s + 24),
      size: r.u64(s + 32),
      link: r.u32(s + 40),
      info: r.u32(s + 44),
    };
    if (i !== 0 && sec.type !== SHT_NOBITS && sec.type !== 0 && !within(sec.offset, sec.size, size)) {
      throw new ElfError('truncated', `section ${i} runs past the end of the file`);
    }
    if ((sec.flags & SHF_ALLOC) !== 0 && (sec.addr >= FOUR_GIB || sec.size > FOUR_GIB - sec.addr)) {
      throw new ElfError(
        'address-range',
        `section ${i} reaches past 4 GiB: link the harness below 0x100000000`,
      );
    }
    raw.push(sec);
  }
  const shstr = raw[shstrndx];
  if (shstr.type !== SHT_STRTAB) throw new ElfError('bad-section', 'e_shstrndx does not name a string table');
  for (let i = 0; i < shnum; i++) raw[i].name = str(r, shstr, r.u32(shoff + i * 64), latin1);

  // Symbols
  const symtabIndex = raw.findIndex((s) => s.type === SHT_SYMTAB);
  if (symtabIndex < 0) throw new ElfError('no-symtab', 'the ELF has no .symtab: do not strip the harness');
  // Tables may overlap in a crafted file (65,000 relocation sections over one 64 KiB region), so
  // the entries parsed are bounded by the file's real size: every byte of the file is parsed as
  // a symbol or relocation at most once in a well-formed ELF, and never more than twice here.
  let tableBytes = 0;
  const charge = (bytes: number, what: string) => {
    tableBytes += bytes;
    if (tableBytes > 2 * size) {
      throw new ElfError(
        'bad-section',
        `${what}: the symbol and relocation tables overlap (together they are larger than the file); rebuild the harness with a standard linker`,
      );
    }
  };
  const symtabs = new Map<number, SymbolTable>();
  const readSymtab = (index: number): SymbolTable => {
    let syms = symtabs.get(index);
    if (syms) return syms;
    const st = raw[index];
    charge(st.size, `symbol table ${st.name}`);
    if (st.link >= shnum || raw[st.link].type !== SHT_STRTAB) {
      throw new ElfError('bad-section', `symbol table ${st.name} has no string table`);
    }
    syms = new SymbolTable(r, st, raw[st.link]);
    symtabs.set(index, syms);
    return syms;
  };
  const mainTable = readSymtab(symtabIndex);
  // Symbols past 4 GiB (absolute linker constants) cannot be guest addresses; they are left out.
  const kept = (value: number, size: number) => value < FOUR_GIB && size <= FOUR_GIB - value;

  // Relocations
  const relocations: Relocation[] = [];
  let relaSections = 0;
  for (const sec of raw) {
    if (sec.type !== SHT_RELA) continue;
    relaSections++;
    if (sec.link >= shnum || raw[sec.link].type !== SHT_SYMTAB) {
      throw new ElfError('bad-relocation', `relocation section ${sec.name} has no symbol table`);
    }
    const syms = readSymtab(sec.link);
    charge(sec.size, `relocation section ${sec.name}`);
    const target = sec.info < shnum ? raw[sec.info].name : '';
    const n = Math.floor(sec.size / 24);
    // (the fields, and the symbol's value and type, read through the DataView and the bytes here,
    // not through Reader's or SymbolTable's methods: a harness has thousands of relocations, and
    // this loop runs before V8 has optimised anything)
    const view = r.view;
    const bytes = r.bytes;
    const symCount = syms.count;
    const symAt = syms.at;
    for (let i = 0, o = sec.offset; i < n; i++, o += 24) {
      const symIndex = view.getUint32(o + 12, true);
      if (symIndex >= symCount && symIndex !== 0) {
        throw new ElfError(
          'bad-relocation',
          `relocation ${i} of ${sec.name} names symbol ${symIndex}, out of range`,
        );
      }
      // entry symIndex of the symbol table (st_info at +4, st_value at +8)
      const so = symAt + symIndex * 24;
      relocations.push(
        new Rela(
          view.getUint32(o + 4, true) * FOUR_GIB + view.getUint32(o, true),
          view.getUint32(o + 8, true),
          symIndex === 0 ? 0 : view.getUint32(so + 12, true) * FOUR_GIB + view.getUint32(so + 8, true),
          symIndex === 0 || (bytes[so + 4] & 15) === STT_SECTION ? null : syms,
          symIndex,
          view.getInt32(o + 20, true) * FOUR_GIB + view.getUint32(o + 16, true),
          target,
        ),
      );
    }
  }
  if (relaSections === 0) {
    throw new ElfError(
      'no-relocations',
      'the ELF has no relocation sections: link with -Wl,--emit-relocs so indirect targets are known',
    );
  }

  // Only function symbols become objects here; the full list is made when first read (`symbols`).
  // (one pass over the entries' st_info bytes: an -O0 harness has thousands of local labels, and a
  // method call or two per entry was most of this loop's cost before the code is optimised)
  const funcSymbols: ElfSymbol[] = [];
  const symBytes = r.bytes;
  const count = mainTable.count;
  for (let i = 1, o = mainTable.at + 24 + 4; i < count; i++, o += 24) {
    if ((symBytes[o] & 15) === STT_FUNC && mainTable.size(i) !== 0) funcSymbols.push(mainTable.symbol(i));
  }
  let gp: number | null = null;
  for (const i of mainTable.entriesNamed(GP_NAME)) {
    const v = mainTable.value(i);
    if (kept(v, mainTable.size(i))) {
      gp = v;
      break;
    }
  }
  const functions = collectFunctions(funcSymbols, inExec, segments);

  const abi = raw.find((s) => s.name === '.berm.abi');
  let manifest: Uint8Array | null = null;
  if (abi) {
    let end = abi.type === SHT_NOBITS ? abi.offset : abi.offset + abi.size;
    while (end > abi.offset && r.bytes[end - 1] === 0) end--;
    manifest = r.bytes.subarray(abi.offset, end);
  }
  let symbols: ElfSymbol[] | null = null;
  return {
    entry,
    flags,
    segments,
    sections: raw,
    get symbols(): ElfSymbol[] {
      if (symbols === null) {
        symbols = [];
        for (let i = 1; i < mainTable.count; i++) {
          if (kept(mainTable.value(i), mainTable.size(i))) symbols.push(mainTable.symbol(i));
        }
      }
      return symbols;
    },
    functions,
    relocations,
    manifest,
    globalPointer: gp,
    imageStart,
    imageEnd,
  };
}

const GP_NAME = '__global_pointer$';

/**
 * A symbol table read in place: entries become objects only when asked for. A harness has
 * thousands of local labels that nothing on the way to a first call needs, and building an object
 * (and a name) for each was most of the time spent parsing an ELF.
 */
class SymbolTable {
  /** number of entries */
  readonly count: number;
  /** file offset of entry 0 */
  readonly at: number;
  constructor(
    private readonly r: Reader,
    table: Section,
    /** the string table its names are in */
    readonly strtab: Section,
  ) {
    this.count = Math.floor(table.size / 24);
    this.at = table.offset;
  }
  value(i: number): number {
    return this.r.u64(this.at + i * 24 + 8);
  }
  size(i: number): number {
    return this.r.u64(this.at + i * 24 + 16);
  }
  name(i: number): string {
    return str(this.r, this.strtab, this.r.u32(this.at + i * 24), utf8);
  }
  /** Whether entry i's name is `ascii`, compared in the string table (as {@link str} reads it). */
  nameIs(i: number, ascii: string): boolean {
    const index = this.r.u32(this.at + i * 24);
    const t = this.strtab;
    const n = ascii.length;
    if (index === 0 || index >= t.size) return n === 0;
    if (index + n > t.size) return false;
    const b = this.r.bytes;
    const from = t.offset + index;
    for (let k = 0; k < n; k++) if (b[from + k] !== ascii.charCodeAt(k)) return false;
    // a name runs to its NUL or to the end of the table
    return index + n === t.size || b[from + n] === 0;
  }
  /**
   * The entries (ascending, from 1) whose name is `ascii` (1 to 255 ASCII characters), as
   * {@link nameIs} compares. The name is found in the string table and its index in the entries'
   * st_name fields with Buffer.indexOf (native code): a harness has thousands of symbols, and a
   * loop over them in JavaScript runs before V8 has optimised anything. A string table naming it
   * more than a few times (only a crafted file) is searched entry by entry instead.
   */
  entriesNamed(ascii: string): number[] {
    const t = this.strtab;
    const b = this.r.bytes;
    const byEntry = (): number[] => {
      const out: number[] = [];
      for (let i = 1; i < this.count; i++) if (this.nameIs(i, ascii)) out.push(i);
      return out;
    };
    // (section 0's bounds are not checked when the headers are read)
    if (!within(t.offset, t.size, b.length) || !within(this.at, this.count * 24, b.length)) return byEntry();
    const strtab = Buffer.from(b.buffer, b.byteOffset + t.offset, t.size);
    const indexes: number[] = [];
    for (let k = strtab.indexOf(ascii, 1, 'latin1'); k > 0; k = strtab.indexOf(ascii, k + 1, 'latin1')) {
      if (k + ascii.length === t.size || strtab[k + ascii.length] === 0) indexes.push(k);
      if (indexes.length > 4) return byEntry();
    }
    const table = Buffer.from(b.buffer, b.byteOffset + this.at, this.count * 24);
    const out: number[] = [];
    const field = Buffer.alloc(4);
    for (const index of indexes) {
      field.writeUInt32LE(index);
      // st_name is the first field of a 24-byte entry; entry 0 is the null symbol. After a match,
      // the search goes on from the next entry, so it is at most one step per entry.
      for (let h = table.indexOf(field, 24); h >= 0; h = table.indexOf(field, h - (h % 24) + 24)) {
        if (h % 24 === 0) out.push(h / 24);
      }
    }
    return out.sort((x, y) => x - y);
  }
  symbol(i: number): ElfSymbol {
    const o = this.at + i * 24;
    const info = this.r.u8(o + 4);
    return {
      name: this.name(i),
      value: this.value(i),
      size: this.size(i),
      type: info & 15,
      bind: info >>> 4,
      shndx: this.r.u16(o + 6),
    };
  }
}

/** A relocation whose symbol name is read from the symbol table when first asked for. */
class Rela implements Relocation {
  #table: SymbolTable | null;
  #sym: number;
  #name: string | undefined;
  constructor(
    readonly offset: number,
    readonly type: number,
    readonly symbolValue: number,
    /** the table of a named symbol (null: none, or a section symbol) */
    table: SymbolTable | null,
    sym: number,
    readonly addend: number,
    readonly section: string,
  ) {
    this.#table = table;
    this.#sym = sym;
  }
  get typeName(): string {
    return relocationTypeName(this.type);
  }
  get symbolName(): string {
    return (this.#name ??= this.#table === null ? '' : this.#table.name(this.#sym));
  }
}

/** A NUL-terminated string at `index` in a string table section, bounded by the section. */
function str(r: Reader, strtab: Section, index: number, dec: { decode(b: Uint8Array): string }): string {
  if (index === 0 || index >= strtab.size) return '';
  const start = strtab.offset + index;
  const end = strtab.offset + strtab.size;
  const b = r.bytes;
  let i = start;
  let high = 0;
  while (i < end && b[i] !== 0) high |= b[i++];
  // Symbol names are short and nearly always ASCII: building them directly is ~10x faster than a
  // TextDecoder call each, and an -O0 picolibc harness has thousands of them.
  if (high < 0x80 && i - start <= 256)
    return String.fromCharCode.apply(null, b.subarray(start, i) as unknown as number[]);
  return dec.decode(b.subarray(start, i));
}

function collectFunctions(
  syms: ElfSymbol[],
  inExec: (addr: number) => boolean,
  segments: Segment[],
): GuestFunction[] {
  const byStart = new Map<number, { syms: ElfSymbol[]; size: number }>();
  for (const s of syms) {
    if (s.type !== STT_FUNC || s.size === 0 || s.name.startsWith('.L')) continue;
    if (s.value >= FOUR_GIB || !inExec(s.value)) continue;
    // A function must lie within the file bytes of one executable segment.
    const seg = segments.find(
      (g) => (g.flags & PF_X) !== 0 && s.value >= g.vaddr && s.value < g.vaddr + g.filesz,
    );
    if (!seg || s.size > seg.vaddr + seg.filesz - s.value) {
      throw new ElfError('bad-symbol', `function ${s.name} extends past its executable segment`);
    }
    const g = byStart.get(s.value);
    if (g) {
      g.syms.push(s);
      g.size = Math.max(g.size, s.size);
    } else byStart.set(s.value, { syms: [s], size: s.size });
  }
  const out: GuestFunction[] = [];
  for (const [start, g] of byStart) {
    const primary = g.syms.find((s) => s.bind === 1 || s.bind === 2) ?? g.syms[0];
    const names = new Set([primary.name]);
    for (const s of g.syms) names.add(s.name);
    out.push({ name: primary.name, names: [...names], start, size: g.size, global: primary.bind !== 0 });
  }
  out.sort((a, b) => a.start - b.start);
  // Shared-tail millicode (libgcc's __riscv_save_N / __riscv_restore_N) gives nested entry points
  // whose st_size runs through the following entries: cut each at the next start so functions stay
  // disjoint, and keep the symbol's own size for the translator (execution falls into the next one).
  for (let i = 0; i + 1 < out.length; i++) {
    const f = out[i];
    const next = out[i + 1].start;
    if (f.start + f.size > next) {
      f.symbolSize = f.size;
      f.size = next - f.start;
    }
  }
  return out;
}

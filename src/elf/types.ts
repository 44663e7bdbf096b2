/**
 * Shapes produced by the ELF reader (src/elf/reader.ts). Addresses are plain numbers: berm refuses
 * images that reach past 4 GiB, so every address and size here is an exact integer below 2^32.
 */

/** One PT_LOAD program header with its file bytes (ELF64 gABI, "Program Header"). */
export interface Segment {
  /** p_vaddr */
  vaddr: number;
  /** p_memsz, bytes; the tail past filesz is zero-filled (.bss) */
  memsz: number;
  /** p_filesz, bytes */
  filesz: number;
  /** p_flags: PF_X = 1, PF_W = 2, PF_R = 4 */
  flags: number;
  /** the filesz bytes of the segment, a view into the ELF file */
  data: Uint8Array;
}

/** One section header (ELF64 gABI, "Sections"). */
export interface Section {
  name: string;
  /** sh_type (SHT_PROGBITS = 1, SHT_SYMTAB = 2, SHT_RELA = 4, SHT_NOBITS = 8, ...) */
  type: number;
  /** sh_flags (SHF_WRITE = 1, SHF_ALLOC = 2, SHF_EXECINSTR = 4) */
  flags: number;
  addr: number;
  offset: number;
  size: number;
  /** sh_link, sh_info as in the gABI */
  link: number;
  info: number;
}

/** One .symtab entry (ELF64 gABI, "Symbol Table"). */
export interface ElfSymbol {
  name: string;
  value: number;
  size: number;
  /** STT_NOTYPE = 0, STT_OBJECT = 1, STT_FUNC = 2, STT_SECTION = 3, STT_FILE = 4 */
  type: number;
  /** STB_LOCAL = 0, STB_GLOBAL = 1, STB_WEAK = 2 */
  bind: number;
  shndx: number;
}

/** A guest function: an STT_FUNC symbol with a non-zero size inside an executable segment. */
export interface GuestFunction {
  /** the symbol name; when several symbols share an address, the first global one, else the first */
  name: string;
  /** every symbol name at this address (aliases), name first */
  names: string[];
  start: number;
  /** bytes */
  size: number;
  /** true when some symbol at this address is STB_GLOBAL or STB_WEAK */
  global: boolean;
  /**
   * Set only when the symbol's st_size ran into the next function (shared-tail millicode such as
   * libgcc's `__riscv_save_12` .. `__riscv_save_0`, nested entry points into one code sequence):
   * `size` is then cut at the next function's start and this keeps the st_size. Execution that
   * reaches `start + size` continues in the next function, as the symbol sizes say.
   */
  symbolSize?: number;
}

/**
 * One relocation kept by `--emit-relocs` (RISC-V ELF psABI, "Relocations"). r_offset is the final
 * virtual address of the relocated bytes.
 */
export interface Relocation {
  /** r_offset: virtual address of the relocated field */
  offset: number;
  /** ELF64_R_TYPE: R_RISCV_64 = 2, R_RISCV_32 = 1, BRANCH = 16, JAL = 17, CALL = 18, ... */
  type: number;
  /** the psABI name, e.g. 'R_RISCV_PCREL_HI20' */
  typeName: string;
  /** value of the referenced symbol (0 when r_sym is 0) */
  symbolValue: number;
  /** name of the referenced symbol ('' for none or a section symbol) */
  symbolName: string;
  /** r_addend, signed */
  addend: number;
  /** name of the section the relocations apply to, e.g. '.text', '.rodata' */
  section: string;
}

/** A parsed, validated RISC-V executable. */
export interface ElfImage {
  /** e_entry */
  entry: number;
  /** e_flags (EF_RISCV_RVC = 1; float ABI bits are refused by the reader) */
  flags: number;
  segments: Segment[];
  sections: Section[];
  symbols: ElfSymbol[];
  /** guest functions sorted by start, non-overlapping */
  functions: GuestFunction[];
  relocations: Relocation[];
  /** the raw bytes of the `.berm.abi` section with trailing NULs removed, or null when absent */
  manifest: Uint8Array | null;
  /** value of `__global_pointer$`, or null */
  globalPointer: number | null;
  /** lowest PT_LOAD vaddr and the end (exclusive) of the highest one */
  imageStart: number;
  imageEnd: number;
}

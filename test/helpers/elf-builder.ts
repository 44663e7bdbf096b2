/**
 * A tiny ELF64 RISC-V executable builder for reader tests: one R+X PT_LOAD holding .text, a
 * .symtab/.strtab, .rela.text, optionally .berm.abi. Offsets of every table are returned so tests
 * can corrupt single fields.
 */

export interface BuiltElf {
  bytes: Uint8Array;
  view: DataView;
  /** file offsets */
  phoff: number;
  shoff: number;
  textOff: number;
  /** guest address of .text */
  textAddr: number;
  /** section indexes */
  index: Record<string, number>;
}

export interface ElfOptions {
  relocations?: boolean;
  symtab?: boolean;
  manifest?: string | null;
  /**
   * Append a global function `long` of this many `addi a0, a0, 1` and a `ret`: one basic block
   * whose every instruction depends on the one before (a chain as long as the function).
   */
  chain?: number;
}

const BASE = 0x10000;

export function buildElf(opts: ElfOptions = {}): BuiltElf {
  const withRelocs = opts.relocations ?? true;
  const withSymtab = opts.symtab ?? true;
  const manifest = opts.manifest === undefined ? 'abi-v1' : opts.manifest;

  // code: addi a0,a0,1; jalr x0,0(ra); c.addi a0,1 ; c.jr ra; addi a0,a0,2; ret
  const fixed = [
    0x13, 0x05, 0x15, 0x00, 0x67, 0x80, 0x00, 0x00, 0x05, 0x05, 0x82, 0x80, 0x13, 0x05, 0x25, 0x00, 0x67,
    0x80, 0x00, 0x00,
  ];
  const chain = opts.chain ?? 0;
  const text = new Uint8Array(fixed.length + (chain > 0 ? 4 * chain + 4 : 0));
  text.set(fixed);
  for (let i = 0; i < chain; i++) text.set([0x13, 0x05, 0x15, 0x00], fixed.length + 4 * i);
  if (chain > 0) text.set([0x67, 0x80, 0x00, 0x00], fixed.length + 4 * chain);
  const textOff = 0x100;
  const textAddr = BASE + textOff;

  const strtab = (list: string[]): { bytes: Uint8Array; idx: Map<string, number> } => {
    const idx = new Map<string, number>();
    let s = '\0';
    for (const n of list) {
      idx.set(n, s.length);
      s += n + '\0';
    }
    return { bytes: new TextEncoder().encode(s), idx };
  };
  // symbols: [name, value, size, type, bind, shndx]
  const syms: [string, number, number, number, number, number][] = [
    ['f', textAddr, 8, 2, 1, 1],
    ['f_alias', textAddr, 8, 2, 2, 1],
    ['.Lhidden', textAddr + 8, 4, 2, 0, 1],
    ['h', textAddr + 12, 8, 2, 0, 1],
    ['__global_pointer$', BASE + 0x800, 0, 0, 1, 0xfff1],
  ];
  if (chain > 0) syms.push(['long', textAddr + fixed.length, 4 * chain + 4, 2, 1, 1]);
  const symStr = strtab(syms.map((s) => s[0]));
  const symtab = new Uint8Array(24 * (syms.length + 1));
  const sv = new DataView(symtab.buffer);
  syms.forEach(([name, value, size, type, bind, shndx], i) => {
    const o = 24 * (i + 1);
    sv.setUint32(o, symStr.idx.get(name) as number, true);
    sv.setUint8(o + 4, (bind << 4) | type);
    sv.setUint16(o + 6, shndx, true);
    sv.setUint32(o + 8, value, true);
    sv.setUint32(o + 16, size, true);
  });
  // relocations on .text: a CALL to h at textAddr, and an R_RISCV_64-like HI20 naming f_alias+12
  const rela = new Uint8Array(48);
  const rv = new DataView(rela.buffer);
  rv.setUint32(0, textAddr, true);
  rv.setUint32(8, 18, true); // R_RISCV_CALL
  rv.setUint32(12, 4, true); // symbol 4 = h
  rv.setUint32(24, textAddr + 8, true);
  rv.setUint32(32, 26, true); // R_RISCV_HI20
  rv.setUint32(36, 1, true); // symbol 1 = f
  rv.setInt32(40, 12, true); // addend
  rv.setInt32(44, 0, true);

  const names = ['.text', '.symtab', '.strtab', '.rela.text', '.berm.abi', '.shstrtab'];
  const shStr = strtab(names);
  const abi = manifest === null ? null : new TextEncoder().encode(manifest + '\0\0\0');

  // layout after .text
  const parts: { name: string; data: Uint8Array; off: number }[] = [];
  let off = textOff + text.length;
  const place = (name: string, data: Uint8Array): void => {
    off = (off + 7) & ~7;
    parts.push({ name, data, off });
    off += data.length;
  };
  if (withSymtab) {
    place('.symtab', symtab);
    place('.strtab', symStr.bytes);
  }
  if (withRelocs) place('.rela.text', rela);
  if (abi) place('.berm.abi', abi);
  place('.shstrtab', shStr.bytes);
  const shoff = (off + 7) & ~7;
  const sections = ['', '.text', ...parts.map((p) => p.name)];
  const shnum = sections.length;
  const bytes = new Uint8Array(shoff + 64 * shnum);
  const view = new DataView(bytes.buffer);
  const index: Record<string, number> = {};
  sections.forEach((n, i) => (index[n] = i));

  // ELF header
  bytes.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1], 0);
  view.setUint16(16, 2, true); // ET_EXEC
  view.setUint16(18, 243, true); // EM_RISCV
  view.setUint32(20, 1, true);
  view.setUint32(24, textAddr, true); // e_entry
  view.setUint32(32, 64, true); // e_phoff
  view.setUint32(40, shoff, true);
  view.setUint32(48, 1, true); // EF_RISCV_RVC
  view.setUint16(52, 64, true);
  view.setUint16(54, 56, true);
  view.setUint16(56, 1, true);
  view.setUint16(58, 64, true);
  view.setUint16(60, shnum, true);
  view.setUint16(62, index['.shstrtab'], true);
  // PT_LOAD R+X covering the file up to the end of .text
  view.setUint32(64, 1, true);
  view.setUint32(68, 5, true);
  view.setUint32(64 + 16, BASE, true);
  view.setUint32(64 + 24, BASE, true);
  view.setUint32(64 + 32, textOff + text.length, true);
  view.setUint32(64 + 40, textOff + text.length, true);
  view.setUint32(64 + 48, 0x1000, true);

  bytes.set(text, textOff);
  for (const p of parts) bytes.set(p.data, p.off);
  const sh = (
    i: number,
    name: string,
    type: number,
    flags: number,
    addr: number,
    o: number,
    size: number,
  ) => {
    const b = shoff + 64 * i;
    view.setUint32(b, shStr.idx.get(name) ?? 0, true);
    view.setUint32(b + 4, type, true);
    view.setUint32(b + 8, flags, true);
    view.setUint32(b + 16, addr, true);
    view.setUint32(b + 24, o, true);
    view.setUint32(b + 32, size, true);
    return b;
  };
  sh(1, '.text', 1, 6, textAddr, textOff, text.length);
  for (const p of parts) {
    const i = index[p.name];
    const type = p.name === '.symtab' ? 2 : p.name === '.rela.text' ? 4 : p.name.endsWith('strtab') ? 3 : 1;
    const b = sh(i, p.name, type, 0, 0, p.off, p.data.length);
    if (p.name === '.symtab') {
      view.setUint32(b + 40, index['.strtab'], true);
      view.setUint32(b + 44, 1, true);
      view.setUint32(b + 56, 24, true);
    }
    if (p.name === '.rela.text') {
      view.setUint32(b + 40, withSymtab ? index['.symtab'] : 0, true);
      view.setUint32(b + 44, 1, true);
      view.setUint32(b + 56, 24, true);
    }
  }
  return { bytes, view, phoff: 64, shoff, textOff, textAddr, index };
}

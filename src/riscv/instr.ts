import type { CName, Op } from './isa.js';

/**
 * The decoded form of one RV64IMAC instruction (RISC-V unprivileged spec: RV32I/RV64I base, M, A,
 * C, Zicsr, Zifencei). Compressed instructions are expanded to the base instruction they stand for
 * (spec chapter "C" Standard Extension, Table 16.x expansions); `compressed` keeps their own name.
 * Read-only: the decoder hands out one shared object per compressed encoding.
 */
export interface Instr {
  /**
   * Mnemonic of the (expanded) base instruction in lower case as the spec writes it: 'lui', 'addi',
   * 'lr.w', 'amoadd.d', 'csrrs', 'fence.i', ... ; 'illegal' for reserved and illegal encodings
   * (they trap only when executed). The mnemonics are those of the ISA table (isa.ts).
   */
  readonly op: Op | 'illegal';
  /**
   * `op` as a number: its index in the ISA table (INSTRUCTIONS, isa.ts), or ILLEGAL_CODE
   * (decode.ts, the table's length) for 'illegal'. Tables indexed by it replace a lookup by
   * mnemonic where every instruction of an image passes (the translator's passes).
   */
  readonly code: number;
  readonly rd: number;
  readonly rs1: number;
  readonly rs2: number;
  /**
   * Sign-extended immediate as used by the operation: the byte offset for branches, jal, jalr, loads
   * and stores; the shift amount for shifts; for lui and auipc the 20-bit field already shifted left
   * by 12 and sign-extended (so `lui a0, 0xffff8` has imm = -32768); the CSR number for Zicsr
   * (with the 5-bit uimm of csrr*i in rs1).
   */
  readonly imm: number;
  /** 2 or 4 bytes */
  readonly size: 2 | 4;
  /** the raw encoding: 16 bits when size is 2, else 32 bits (as an unsigned number) */
  readonly bits: number;
  /** for size 2: the compressed mnemonic, e.g. 'c.addi', 'c.jr'; otherwise undefined */
  readonly compressed?: CName;
  /** A extension ordering bits */
  readonly aq?: boolean;
  readonly rl?: boolean;
}

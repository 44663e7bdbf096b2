// Writes an RV64IMAC assembly file (stdout) covering every instruction and compressed form with
// varied registers and immediates, plus raw words: a strided sweep of the 16-bit encoding space and
// random 32-bit words under every major opcode. scripts/update-golden.sh assembles it with clang,
// links it with ld.lld and records llvm-objdump's listing as test/golden/all-encodings.txt.
// Deterministic: the same output on every run (fixed-seed PRNG). The instruction groups come from
// the ISA table (conformance/isa.ts); test/riscv-isa.test.ts checks the listing names every entry.
import process from 'node:process';
import { REG_NAMES } from '../src/riscv/disasm.js';
import { opsOfKind } from '../src/riscv/isa.js';
import { AMOS, BRANCHES, I_OPS, R_ALL, SHIFT_IMM, SHIFT_IMM_W, STORES } from './isa.js';

const LOAD_OPS = opsOfKind('load');

let seed = 0x9e3779b9;
function rnd() {
  // xorshift32
  seed ^= seed << 13;
  seed >>>= 0;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  seed >>>= 0;
  return seed;
}
const pick = <T>(a: readonly T[]): T => a[rnd() % a.length];
const int = (lo: number, hi: number): number => lo + (rnd() % (hi - lo + 1));

const REGS = REG_NAMES;
const CREGS = REGS.slice(8, 16);
const NZ = REGS.slice(1);
const reg = () => pick(REGS);
const creg = () => pick(CREGS);

// Immediates: edges first, then random values in range.
function imms(lo: number, hi: number, n: number, step = 1): number[] {
  const out = [lo, hi, 0, step, -step].filter((v) => v >= lo && v <= hi && v % step === 0);
  while (out.length < n) out.push(Math.round(int(lo, hi) / step) * step);
  return [...new Set(out)];
}

const lines: string[] = [];
let label = 0;
const emit = (s: string): void => {
  lines.push(`.L${label++}:`);
  lines.push(`  ${s}`);
};
// Targets are labels within a distance (in instructions) that keeps each branch in range.
let maxRef = 0;
const near = (dist: number): string => {
  const n = Math.max(0, label + int(-dist, dist));
  maxRef = Math.max(maxRef, n);
  return `.L${n}`;
};
const rvc = (s: string): void => {
  lines.push('  .option rvc');
  emit(s);
  lines.push('  .option norvc');
};

lines.push('  .text', '  .option norvc', '  .globl _start', '_start:');

// RV64I
for (const v of [0, 1, 0x7ffff, 0x80000, 0xfffff, ...imms(0, 0xfffff, 6)]) {
  emit(`lui ${reg()}, ${v}`);
  emit(`auipc ${reg()}, ${v}`);
}
for (let i = 0; i < 12; i++) emit(`jal ${reg()}, ${near(400)}`);
for (const v of imms(-2048, 2047, 10)) emit(`jalr ${reg()}, ${v}(${reg()})`);
for (const op of BRANCHES) for (let i = 0; i < 6; i++) emit(`${op} ${reg()}, ${reg()}, ${near(300)}`);
for (const op of LOAD_OPS) for (const v of imms(-2048, 2047, 5)) emit(`${op} ${reg()}, ${v}(${reg()})`);
for (const [op] of STORES) for (const v of imms(-2048, 2047, 5)) emit(`${op} ${reg()}, ${v}(${reg()})`);
for (const op of I_OPS) for (const v of imms(-2048, 2047, 6)) emit(`${op} ${reg()}, ${reg()}, ${v}`);
for (const op of SHIFT_IMM) for (const v of imms(0, 63, 6)) emit(`${op} ${reg()}, ${reg()}, ${v}`);
for (const op of SHIFT_IMM_W) for (const v of imms(0, 31, 5)) emit(`${op} ${reg()}, ${reg()}, ${v}`);
for (const op of R_ALL) for (let i = 0; i < 3; i++) emit(`${op} ${reg()}, ${reg()}, ${reg()}`);
const sets = ['i', 'o', 'r', 'w', 'rw', 'iorw', 'io', 'ow', 'ir', 'iw', 'or'];
for (let i = 0; i < 8; i++) emit(`fence ${pick(sets)}, ${pick(sets)}`);
emit('fence');
emit('fence.tso');
emit('fence.i');
emit('ecall');
emit('ebreak');
const csrs = [
  0x001, 0x002, 0x003, 0xc00, 0xc01, 0xc02, 0x300, 0x305, 0x341, 0x7c0, 0xfff, 0x123, 0x800, 0xb00,
];
for (const op of opsOfKind('csr'))
  for (let i = 0; i < 4; i++) emit(`${op} ${reg()}, ${pick(csrs)}, ${reg()}`);
for (const op of opsOfKind('csr-imm'))
  for (let i = 0; i < 4; i++) emit(`${op} ${reg()}, ${pick(csrs)}, ${int(0, 31)}`);

// A
for (const w of ['w', 'd'])
  for (const o of ['', '.aq', '.rl', '.aqrl']) {
    emit(`lr.${w}${o} ${reg()}, (${reg()})`);
    emit(`sc.${w}${o} ${reg()}, ${reg()}, (${reg()})`);
    for (const a of AMOS) emit(`${a}.${w}${o} ${reg()}, ${reg()}, (${reg()})`);
  }

// C
for (const v of imms(4, 1020, 6, 4)) rvc(`c.addi4spn ${creg()}, sp, ${v}`);
for (const v of imms(0, 124, 5, 4)) {
  rvc(`c.lw ${creg()}, ${v}(${creg()})`);
  rvc(`c.sw ${creg()}, ${v}(${creg()})`);
}
for (const v of imms(0, 248, 5, 8)) {
  rvc(`c.ld ${creg()}, ${v}(${creg()})`);
  rvc(`c.sd ${creg()}, ${v}(${creg()})`);
}
rvc('c.nop');
for (const v of imms(-32, 31, 6).filter((x) => x !== 0)) {
  rvc(`c.addi ${pick(NZ)}, ${v}`);
  rvc(`c.addiw ${pick(NZ)}, ${v}`);
  rvc(`c.li ${pick(NZ)}, ${v}`);
  rvc(`c.andi ${creg()}, ${v}`);
}
rvc(`c.addiw ${pick(NZ)}, 0`);
rvc(`c.li ${pick(NZ)}, 0`);
rvc(`c.andi ${creg()}, 0`);
for (const v of imms(-512, 496, 6, 16).filter((x) => x !== 0)) rvc(`c.addi16sp sp, ${v}`);
for (const v of [1, 31, 0xfffe0, 0xfffff, 5]) rvc(`c.lui ${pick(NZ.filter((x) => x !== 'sp'))}, ${v}`);
for (const op of ['c.srli', 'c.srai']) for (const v of imms(1, 63, 5)) rvc(`${op} ${creg()}, ${v}`);
for (const v of imms(1, 63, 5)) rvc(`c.slli ${pick(NZ)}, ${v}`);
for (const op of ['c.sub', 'c.xor', 'c.or', 'c.and', 'c.subw', 'c.addw'])
  for (let i = 0; i < 3; i++) rvc(`${op} ${creg()}, ${creg()}`);
for (let i = 0; i < 8; i++) rvc(`c.j ${near(200)}`);
for (let i = 0; i < 6; i++) {
  rvc(`c.beqz ${creg()}, ${near(30)}`);
  rvc(`c.bnez ${creg()}, ${near(30)}`);
}
for (const v of imms(0, 252, 5, 4)) {
  rvc(`c.lwsp ${pick(NZ)}, ${v}(sp)`);
  rvc(`c.swsp ${reg()}, ${v}(sp)`);
}
for (const v of imms(0, 504, 5, 8)) {
  rvc(`c.ldsp ${pick(NZ)}, ${v}(sp)`);
  rvc(`c.sdsp ${reg()}, ${v}(sp)`);
}
for (let i = 0; i < 3; i++) {
  rvc(`c.jr ${pick(NZ)}`);
  rvc(`c.jalr ${pick(NZ)}`);
  rvc(`c.mv ${pick(NZ)}, ${pick(NZ)}`);
  rvc(`c.add ${pick(NZ)}, ${pick(NZ)}`);
}
rvc('c.ebreak');
// forward targets past the last instruction land on the data that follows
while (label <= maxRef) lines.push(`.L${label++}:`);

// The conformance halfwords, HINTs and reserved encodings, as raw data.
lines.push('  .option rvc');
for (const h of [
  0x6101, 0x6001, 0x302d, 0x0000, 0x0001, 0x0005, 0x0101, 0x4001, 0x4005, 0x6005, 0x0002, 0x1002, 0x8002,
  0x8006, 0x9002, 0x9006, 0x8101, 0x8501, 0x9101, 0x2000, 0x8000, 0xa000, 0x2002, 0xa002, 0x9c41, 0x9c61,
  0x4002, 0x6002, 0x2001, 0x6081, 0x6181,
])
  lines.push(`  .half 0x${h.toString(16)}`);

// A strided sweep of the 16-bit encoding space (low bits != 11).
for (let h = 0; h < 0x10000; h += 7) if ((h & 3) !== 3) lines.push(`  .half 0x${h.toString(16)}`);
lines.push('  .balign 4');
lines.push('  .option norvc');

// Random 32-bit words under every major opcode, so funct3/funct7/reserved-field checks get exercised.
// SYSTEM with funct3 = 0 is left out: LLVM decodes privileged instructions (wfi, mret, ...) that are
// not RV64IMAC and that berm treats as illegal.
const majors = [
  0x03, 0x07, 0x0f, 0x13, 0x17, 0x1b, 0x23, 0x27, 0x2f, 0x33, 0x37, 0x3b, 0x43, 0x63, 0x67, 0x6f, 0x73,
];
for (let i = 0; i < 3000; i++) {
  const m = majors[i % majors.length];
  let w = ((rnd() & ~0x7f) | m) >>> 0;
  if (m === 0x73 && ((w >>> 12) & 7) === 0) w = (w | (1 << 12)) >>> 0;
  // bias toward valid funct7 values so that R-type and shift forms are not all reserved
  if (i % 3 === 0) w = (w & 0x01ffffff) | (pick([0, 0, 1, 0x20]) << 25);
  lines.push(`  .word 0x${(w >>> 0).toString(16)}`);
}

// one data relocation, so that the linked file has a relocation section (berm's reader requires one)
lines.push('  .data', '  .dword _start');

process.stdout.write(lines.join('\n') + '\n');

// Decoder: spec-reserved encodings, immediates and expansions, and totality over the 16-bit space.
import t from 'tap';
import { decode } from '../src/riscv/decode.js';

t.test('reserved RV64C halfwords are illegal (conformance issue)', async (t) => {
  // c.addi16sp nzimm=0, c.lui rd=x0 nzimm=0, c.addiw rd=x0 (RV32's c.jal), zero word, c.jr x0,
  // c.lwsp/c.ldsp rd=x0, c.fld/c.fsd/c.fldsp (D), quadrant-0 funct3=100, c.addi4spn nzuimm=0,
  // c.lui nzimm=0 with rd != 0, reserved c.subw-row encodings
  for (const h of [
    0x6101, 0x6001, 0x302d, 0x0000, 0x8002, 0x4002, 0x6002, 0x2000, 0xa000, 0x2002, 0x8000, 0x0004, 0x6501,
    0x9c41, 0x9c61,
  ]) {
    const i = decode(h);
    t.equal(i.op, 'illegal', h.toString(16));
    t.equal(i.bits, h);
    t.equal(i.size, 2);
  }
});

t.test('compressed expansions', async (t) => {
  t.match(decode(0x7139), { op: 'addi', rd: 2, rs1: 2, imm: -64, compressed: 'c.addi16sp', size: 2 });
  t.match(decode(0x757d), { op: 'lui', rd: 10, imm: -4096, compressed: 'c.lui' });
  t.match(decode(0x2505), { op: 'addiw', rd: 10, rs1: 10, imm: 1, compressed: 'c.addiw' });
  t.match(decode(0x8082), { op: 'jalr', rd: 0, rs1: 1, imm: 0, compressed: 'c.jr' });
  t.match(decode(0x9502), { op: 'jalr', rd: 1, rs1: 10, compressed: 'c.jalr' });
  t.match(decode(0x852e), { op: 'add', rd: 10, rs1: 0, rs2: 11, compressed: 'c.mv' });
  t.match(decode(0x9002), { op: 'ebreak', compressed: 'c.ebreak' });
  t.match(decode(0x0001), { op: 'addi', rd: 0, rs1: 0, imm: 0, compressed: 'c.nop' });
  t.match(decode(0x0800), { op: 'addi', rd: 8, rs1: 2, imm: 16, compressed: 'c.addi4spn' });
  t.match(decode(0x9d1d), { op: 'subw', rd: 10, rs1: 10, rs2: 15, compressed: 'c.subw' });
  t.match(decode(0xbfe5), { op: 'jal', rd: 0, imm: -8, compressed: 'c.j' });
  t.match(decode(0xdd7d), { op: 'beq', rs1: 10, rs2: 0, imm: -2, compressed: 'c.beqz' });
  t.match(decode(0x6522), { op: 'ld', rd: 10, rs1: 2, imm: 8, compressed: 'c.ldsp' });
  t.match(decode(0xe42a), { op: 'sd', rs1: 2, rs2: 10, imm: 8, compressed: 'c.sdsp' });
  t.match(decode(0x8505), { op: 'srai', rd: 10, imm: 1, compressed: 'c.srai' });
});

t.test('32-bit forms', async (t) => {
  t.match(decode(0xffff8537), { op: 'lui', rd: 10, imm: -32768, size: 4 });
  t.match(decode(0x00000517), { op: 'auipc', rd: 10, imm: 0 });
  t.match(decode(0xff5ff0ef), { op: 'jal', rd: 1, imm: -12 });
  t.match(decode(0xfeb50ee3), { op: 'beq', rs1: 10, rs2: 11, imm: -4 });
  t.match(decode(0xfea5bc23), { op: 'sd', rs1: 11, rs2: 10, imm: -8 });
  t.match(decode(0x43f55513), { op: 'srai', rd: 10, rs1: 10, imm: 63 });
  t.match(decode(0x06b5252f), { op: 'amoadd.w', aq: true, rl: true });
  t.match(decode(0x1405b52f), { op: 'lr.d', aq: true, rl: false });
  t.match(decode(0xc0002573), { op: 'csrrs', rd: 10, imm: 0xc00, rs1: 0 });
  t.match(decode(0x0000100f), { op: 'fence.i' });
  t.match(decode(0x00000073), { op: 'ecall' });
  t.match(decode(0x30200073), { op: 'illegal', bits: 0x30200073 }); // mret: privileged
  t.match(decode(0x04051513), { op: 'illegal' }); // slli with imm[11:6] != 0
  t.match(decode(0x02051513), { op: 'slli', imm: 32 });
  t.match(decode(0x00052007), { op: 'illegal' }); // flw
  t.match(decode(0xffffffff), { op: 'illegal', size: 4, bits: 0xffffffff });
});

t.test('total over the 16-bit space and random words', async (t) => {
  let n = 0;
  for (let h = 0; h < 0x10000; h++) {
    if ((h & 3) === 3) continue;
    const i = decode(h | 0xabcd0000);
    if (i.size !== 2 || i.bits !== h) t.fail(h.toString(16));
    n++;
  }
  let seed = 1;
  for (let k = 0; k < 100000; k++) {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    const i = decode(seed | 3);
    if (i.size !== 4 || i.bits !== (seed | 3) >>> 0) t.fail(seed.toString(16));
  }
  t.equal(n, 49152);
});

/**
 * Instruction tests: every RV64IMAC instruction and every RV64C form over interesting operands
 * plus the named spec cases other implementations got wrong.
 */
import type { TestCase } from './lib.js';
import { Rng } from './rng.js';
import { AMOS, BRANCHES, I_OPS, LOADS, R_OPS, SHIFT_IMM, SHIFT_IMM_W, SHIFT_OPS, STORES } from './isa.js';

const I64_MIN = -(1n << 63n);
const I64_MAX = (1n << 63n) - 1n;
export const SPECIAL: bigint[] = [
  0n,
  1n,
  -1n,
  I64_MIN,
  I64_MAX,
  -(1n << 31n),
  (1n << 31n) - 1n,
  0x80000000n,
  0xffffffffn,
];
export const SHIFTS: bigint[] = [0n, 1n, 31n, 32n, 33n, 63n, 64n, 65n, 127n, -1n];

/** A signed 64-bit literal for `li`. */
export const lit = (v: bigint) => BigInt.asIntN(64, v).toString();
const li = (r: string, v: bigint) => `  li ${r}, ${lit(v)}`;

function values(rng: Rng, n: number): bigint[] {
  const out = [...SPECIAL];
  for (let i = 0; i < n; i++) {
    const k = rng.int(3);
    const r = rng.u64();
    out.push(k === 0 ? r : k === 1 ? BigInt.asIntN(32, r) : BigInt(rng.range(-300, 300)));
  }
  return out;
}

const PATTERN = [
  0x80, 0xff, 0x7f, 0x01, 0x00, 0x81, 0xfe, 0x55, 0xaa, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde,
];
const DATA32 = [...PATTERN, ...PATTERN.map((b) => b ^ 0x80)];

/** Value tests: every one runs in berm and in qemu and is compared. */
export function unitTests(seed = 1): TestCase[] {
  const rng = new Rng(seed);
  const T: TestCase[] = [];
  const vals = values(rng, 4);
  const add = (t: TestCase) => T.push(t);

  for (const op of R_OPS)
    for (const a of vals)
      for (const b of vals)
        add({
          name: `${op} ${lit(a)} ${lit(b)}`,
          body: [li('a1', a), li('a2', b), `  ${op} a0, a1, a2`],
          outs: ['a0'],
        });
  // rd = rs1 = rs2 aliasing
  for (const op of [...R_OPS, ...SHIFT_OPS])
    for (const a of vals.slice(0, 9))
      add({ name: `${op} aliased ${lit(a)}`, body: [li('a1', a), `  ${op} a1, a1, a1`], outs: ['a1'] });
  const shifts = [...SHIFTS, BigInt(rng.range(0, 1000)), rng.u64()];
  for (const op of SHIFT_OPS)
    for (const a of vals)
      for (const s of shifts)
        add({
          name: `${op} ${lit(a)} ${lit(s)}`,
          body: [li('a1', a), li('a2', s), `  ${op} a0, a1, a2`],
          outs: ['a0'],
        });
  const imms = [0, 1, -1, 2047, -2048, 0x555, -0x556, rng.range(-2048, 2047)];
  for (const op of I_OPS)
    for (const a of vals)
      for (const k of imms)
        add({ name: `${op} ${lit(a)} ${k}`, body: [li('a1', a), `  ${op} a0, a1, ${k}`], outs: ['a0'] });
  for (const op of SHIFT_IMM)
    for (const a of vals)
      for (const k of [0, 1, 31, 32, 33, 63, rng.range(2, 62)])
        add({ name: `${op} ${lit(a)} ${k}`, body: [li('a1', a), `  ${op} a0, a1, ${k}`], outs: ['a0'] });
  for (const op of SHIFT_IMM_W)
    for (const a of vals)
      for (const k of [0, 1, 15, 31, rng.range(2, 30)])
        add({ name: `${op} ${lit(a)} ${k}`, body: [li('a1', a), `  ${op} a0, a1, ${k}`], outs: ['a0'] });
  for (const k of [0, 1, 0x7ffff, 0x80000, 0xfffff, 0xffff8, rng.range(0, 0xfffff)]) {
    add({ name: `lui ${k}`, body: [`  lui a0, ${k}`], outs: ['a0'] });
    add({
      name: `auipc ${k} (relative to its pc)`,
      body: ['1:', `  auipc a0, ${k}`, '  la a1, 1b', '  sub a0, a0, a1'],
      outs: ['a0'],
    });
  }
  for (const op of BRANCHES)
    for (const a of vals.slice(0, 9))
      for (const b of vals.slice(0, 9))
        add({
          name: `${op} ${lit(a)} ${lit(b)}`,
          body: [li('a1', a), li('a2', b), '  li a0, 0', `  ${op} a1, a2, 1f`, '  li a0, 1', '1:'],
          outs: ['a0'],
        });
  add({
    name: 'backward branch loop',
    body: ['  li a0, 0', '  li a1, 5', '1:', '  addi a0, a0, 3', '  addi a1, a1, -1', '  bnez a1, 1b'],
    outs: ['a0', 'a1'],
  });
  // loads at every offset of a 32-byte pattern, through a base in the middle (negative offsets too)
  for (const [op, w] of LOADS)
    for (let off = -16; off + w <= 16; off += w)
      add({
        name: `${op} ${off}`,
        body: ['  la a1, %D+16', `  ${op} a0, ${off}(a1)`],
        outs: ['a0'],
        data: DATA32,
      });
  for (const [op, w] of STORES)
    for (const v of vals.slice(0, 9))
      for (let off = -8; off + w <= 8; off += w * 2)
        add({
          name: `${op} ${lit(v)} ${off}`,
          body: ['  la a1, %M+8', li('a2', v), `  ${op} a2, ${off}(a1)`],
          outs: [],
          mem: 16,
        });
  // atomics on a cell in the test's slot
  const amoVals = [0n, 1n, -1n, I64_MIN, I64_MAX, -(1n << 31n), 0x80000000n, 0xffffffffn];
  for (const op of AMOS)
    for (const sfx of ['.w', '.d'])
      for (const a of amoVals)
        for (const b of amoVals.slice(0, 5)) {
          const ord = rng.pick(['', '', '.aq', '.rl', '.aqrl']);
          add({
            name: `${op}${sfx}${ord} mem=${lit(a)} rs2=${lit(b)}`,
            body: [
              '  la a1, %M',
              li('a2', a),
              '  sd a2, 0(a1)',
              li('a3', b),
              `  ${op}${sfx}${ord} a0, a3, (a1)`,
            ],
            outs: ['a0'],
            mem: 8,
          });
        }
  for (const sfx of ['.w', '.d'])
    for (const v of amoVals) {
      add({
        name: `lr${sfx}/sc${sfx} ${lit(v)} succeeds, a second sc fails`,
        body: [
          '  la a1, %M',
          li('a2', v),
          '  sd a2, 0(a1)',
          `  lr${sfx} a0, (a1)`,
          '  addi a3, a0, 7',
          `  sc${sfx} a4, a3, (a1)`,
          '  addi a3, a3, 7',
          `  sc${sfx} a5, a3, (a1)`,
        ],
        outs: ['a0', 'a4', 'a5'],
        mem: 8,
      });
    }
  // jumps
  add({
    name: 'jal x0 forward (4-byte)',
    body: [
      '  li a0, 1',
      '  .option push',
      '  .option norvc',
      '  jal x0, 1f',
      '  .option pop',
      '  li a0, 2',
      '1:',
    ],
    outs: ['a0'],
  });
  add({
    name: 'jal ra to a function (4-byte): ra = jal + 4',
    saveRa: true,
    body: [
      '  .option push',
      '  .option norvc',
      '  jal ra, %T_x',
      '  .option pop',
      '2:',
      '  la a3, 2b',
      '  sub a1, ra, a3',
    ],
    outs: ['a0', 'a1'],
    expect: [46n, 0n],
    extra: ['  .type %T_x, @function', '%T_x:', '  li a0, 46', '  ret', '  .size %T_x, .-%T_x'],
  });
  add({
    name: 'call (auipc ra + jalr ra, lo(ra)) reaches the target, ra = jalr + 4',
    saveRa: true,
    body: [
      '1:',
      '  auipc ra, %pcrel_hi(%T_x)',
      '  jalr ra, %pcrel_lo(1b)(ra)',
      '2:',
      '  mv a2, ra',
      '  la a3, 2b',
      '  sub a1, a2, a3',
    ],
    outs: ['a0', 'a1'],
    expect: [42n, 0n],
    extra: ['  .type %T_x, @function', '%T_x:', '  li a0, 42', '  ret', '  .size %T_x, .-%T_x'],
  });
  add({
    name: 'c.jalr ra leaves ra = c.jalr + 2',
    saveRa: true,
    body: ['  la t0, %T_x', '  c.jalr t0', '2:', '  mv a2, ra', '  la a3, 2b', '  sub a1, a2, a3'],
    outs: ['a0', 'a1'],
    expect: [43n, 0n],
    extra: ['  .type %T_x, @function', '%T_x:', '  li a0, 43', '  ret', '  .size %T_x, .-%T_x'],
  });
  add({
    name: 'jalr with a non-zero offset to a function',
    saveRa: true,
    body: ['  la t0, %T_x', '  addi t0, t0, -20', '  jalr ra, 20(t0)'],
    outs: ['a0'],
    expect: [44n],
    extra: ['  .type %T_x, @function', '%T_x:', '  li a0, 44', '  ret', '  .size %T_x, .-%T_x'],
  });
  add({
    name: 'c.jr tail call to a function that stores the result',
    raw: true,
    body: ['  li a0, 7', '  la t0, %T_x', '  c.jr t0'],
    outs: ['a0'],
    extra: [
      '  .type %T_x, @function',
      '%T_x:',
      '  addi a0, a0, 1',
      '  la t6, %R',
      '  sd a0, 0(t6)',
      '  ret',
      '  .size %T_x, .-%T_x',
    ],
  });
  // AUIPC with a negative immediate: a call 4 KiB back (the target is placed before the test)
  add({
    name: 'auipc negative: call 4 KiB back lands on the target, auipc -1 is pc - 4096',
    saveRa: true,
    body: ['  call %T_y', '1:', '  auipc a1, 0xfffff', '  la a2, 1b', '  sub a1, a1, a2'],
    outs: ['a0', 'a1'],
    expect: [45n, -4096n],
    extra: [
      '  .p2align 1',
      '  .skip 4096',
      '  .type %T_y, @function',
      '%T_y:',
      '  li a0, 45',
      '  ret',
      '  .size %T_y, .-%T_y',
    ],
  });
  // compressed forms, written explicitly
  const cv = vals.slice(0, 9);
  for (const v of cv) {
    for (const k of [1, -1, 31, -32])
      add({ name: `c.addi ${lit(v)} ${k}`, body: [li('a0', v), `  c.addi a0, ${k}`], outs: ['a0'] });
    for (const k of [0, 1, -1, 31, -32])
      add({ name: `c.addiw ${lit(v)} ${k}`, body: [li('a0', v), `  c.addiw a0, ${k}`], outs: ['a0'] });
    for (const k of [1, 31, 32, 63])
      for (const op of ['c.slli', 'c.srli', 'c.srai'])
        add({ name: `${op} ${lit(v)} ${k}`, body: [li('a0', v), `  ${op} a0, ${k}`], outs: ['a0'] });
    for (const k of [0, -1, 31, -32])
      add({ name: `c.andi ${lit(v)} ${k}`, body: [li('a0', v), `  c.andi a0, ${k}`], outs: ['a0'] });
    for (const w of cv.slice(0, 6)) {
      for (const op of ['c.sub', 'c.xor', 'c.or', 'c.and', 'c.subw', 'c.addw', 'c.add', 'c.mv'])
        add({
          name: `${op} ${lit(v)} ${lit(w)}`,
          body: [li('a0', v), li('a1', w), `  ${op} a0, a1`],
          outs: ['a0'],
        });
    }
    add({
      name: `c.beqz/c.bnez ${lit(v)}`,
      body: [
        li('a1', v),
        '  li a0, 0',
        '  li a2, 0',
        '  c.beqz a1, 1f',
        '  li a0, 1',
        '1:',
        '  c.bnez a1, 2f',
        '  li a2, 1',
        '2:',
      ],
      outs: ['a0', 'a2'],
    });
  }
  for (const k of [0, 1, -1, 31, -32]) add({ name: `c.li ${k}`, body: [`  c.li a0, ${k}`], outs: ['a0'] });
  for (const k of [1, 31, 0xfffe0, 0xfffff, 0xffff8])
    add({ name: `c.lui ${k}`, body: [`  c.lui a0, ${k}`], outs: ['a0'] });
  add({ name: 'c.nop', body: ['  li a0, 3', '  c.nop', '  c.nop'], outs: ['a0'] });
  add({ name: 'c.j', body: ['  li a0, 1', '  c.j 1f', '  li a0, 2', '1:'], outs: ['a0'] });
  for (const off of [0, 4, 8, 12, 120])
    add({
      name: `c.lw ${off}`,
      body: ['  la a1, %D', `  c.lw a0, ${off}(a1)`],
      outs: ['a0'],
      data: [...DATA32, ...new Array(96).fill(0xc3)],
    });
  for (const off of [0, 8, 16, 24, 120])
    add({
      name: `c.ld ${off}`,
      body: ['  la a1, %D', `  c.ld a0, ${off}(a1)`],
      outs: ['a0'],
      data: [...DATA32, ...new Array(96).fill(0x9c)],
    });
  for (const v of cv) {
    add({
      name: `c.sw ${lit(v)}`,
      body: ['  la a1, %M', li('a0', v), '  c.sw a0, 4(a1)'],
      outs: [],
      mem: 16,
    });
    add({
      name: `c.sd ${lit(v)}`,
      body: ['  la a1, %M', li('a0', v), '  c.sd a0, 8(a1)'],
      outs: [],
      mem: 16,
    });
    add({
      name: `c.swsp/c.lwsp/c.sdsp/c.ldsp ${lit(v)}`,
      body: [
        '  addi sp, sp, -32',
        li('a0', v),
        '  c.sdsp a0, 16(sp)',
        '  c.swsp a0, 8(sp)',
        '  c.ldsp a1, 16(sp)',
        '  c.lwsp a2, 8(sp)',
        '  addi sp, sp, 32',
      ],
      outs: ['a1', 'a2'],
    });
  }
  add({
    name: 'c.addi4spn and c.addi16sp (sp-relative)',
    body: [
      '  mv t0, sp',
      '  c.addi16sp sp, -64',
      '  c.addi4spn a0, sp, 16',
      '  sub a0, a0, t0',
      '  sub a1, sp, t0',
      '  c.addi16sp sp, 64',
      '  sub a2, sp, t0',
    ],
    outs: ['a0', 'a1', 'a2'],
    expect: [-48n, -64n, 0n],
  });
  // fence and fence.i are no-ops; the counters execute (their values are host clocks: not compared)
  add({
    name: 'fence, fence.i, rdcycle/rdtime/rdinstret execute',
    body: [
      '  li a0, 5',
      '  fence',
      '  fence rw, rw',
      '  fence.i',
      '  rdcycle a1',
      '  rdtime a1',
      '  rdinstret a1',
      '  csrrc a1, cycle, x0',
      '  csrrsi a1, time, 0',
      '  csrrci a1, instret, 0',
    ],
    outs: ['a0'],
  });
  return T;
}

/** Named spec cases that other implementations got wrong: expected values from the spec, cross-checked against qemu. */
export function namedSpecTests(): TestCase[] {
  const ones = -1n;
  const r = (name: string, op: string, a: bigint, b: bigint, want: bigint): TestCase => ({
    name,
    body: [li('a1', a), li('a2', b), `  ${op} a0, a1, a2`],
    outs: ['a0'],
    expect: [want],
  });
  return [
    r('REMW by 0 with rs1 = 0x1_8000_0000', 'remw', 0x180000000n, 0n, 0xffffffff80000000n),
    r('REMUW by 0 with rs1 = 0x1_8000_0000', 'remuw', 0x180000000n, 0n, 0xffffffff80000000n),
    r('DIVW by 0 gives all ones', 'divw', 0x180000000n, 0n, ones),
    r('DIVUW by 0 gives all ones', 'divuw', 0x180000000n, 0n, ones),
    r('DIV INT64_MIN / -1 = INT64_MIN', 'div', I64_MIN, -1n, I64_MIN),
    r('REM INT64_MIN % -1 = 0', 'rem', I64_MIN, -1n, 0n),
    r('DIVW 0x80000000 / -1', 'divw', 0x80000000n, -1n, 0xffffffff80000000n),
    r('REMW 0x80000000 % -1 = 0', 'remw', 0x80000000n, -1n, 0n),
    r('MULH -1 * 1 = all ones', 'mulh', -1n, 1n, ones),
    r('MULHSU -1 * 1 = all ones', 'mulhsu', -1n, 1n, ones),
    r('MULHU -1 * 1 = 0', 'mulhu', -1n, 1n, 0n),
    { name: 'LUI 0xffff8', body: ['  lui a0, 0xffff8'], outs: ['a0'], expect: [0xffffffffffff8000n] },
    r('SLL by 65 shifts by 1', 'sll', 3n, 65n, 6n),
    r('SLLW by 33 shifts by 1', 'sllw', 3n, 33n, 6n),
    r('SRLW of -1 by 32', 'srlw', -1n, 32n, ones),
    r('SRAW of 0x80000000 by 63', 'sraw', 0x80000000n, 63n, ones),
  ];
}

/** jal with a link register other than ra to a label inside the function (see regressions/). */
export const JAL_A0_LOCAL: TestCase = {
  name: 'jal a0 to a local label links pc + 4',
  body: [
    '  .option push',
    '  .option norvc',
    '1:',
    '  auipc a1, 0',
    '  jal a0, 2f',
    '  nop',
    '2:',
    '  .option pop',
    '  sub a0, a0, a1',
  ],
  outs: ['a0'],
  expect: [8n],
};

/** Tests run only in berm: each must stop with the given trap at `offset` bytes into t_N. */
export interface TrapTest {
  test: TestCase;
  trap: 'IllegalInstruction' | 'Breakpoint';
  offset: number;
  bits?: number;
}

export function trapTests(): TrapTest[] {
  const raw = (name: string, body: string[]): TestCase => ({
    name,
    body: [...body, '  ret'],
    outs: [],
    raw: true,
  });
  const out: TrapTest[] = [];
  for (const h of [0x6101, 0x6001, 0x302d])
    out.push({
      test: raw(`reserved half-word 0x${h.toString(16)}`, [
        '  li a0, 1',
        '  c.nop',
        `  .2byte 0x${h.toString(16)}`,
      ]),
      trap: 'IllegalInstruction',
      offset: 4,
      bits: h,
    });
  out.push({
    test: raw('ebreak', ['  c.nop', '  .option push', '  .option norvc', '  ebreak', '  .option pop']),
    trap: 'Breakpoint',
    offset: 2,
  });
  out.push({ test: raw('c.ebreak', ['  c.nop', '  c.ebreak']), trap: 'Breakpoint', offset: 2 });
  // writes to the read-only user counters are illegal (qemu-user raises SIGILL as well)
  out.push({
    test: raw('csrrw cycle', ['  c.nop', '  csrrw a0, cycle, a1']),
    trap: 'IllegalInstruction',
    offset: 2,
    bits: 0xc0059573,
  });
  out.push({
    test: raw('csrrwi time', ['  c.nop', '  csrrwi a0, time, 1']),
    trap: 'IllegalInstruction',
    offset: 2,
    bits: 0xc010d573,
  });
  out.push({
    test: raw('csrrs cycle with rs1 != 0', ['  c.nop', '  csrrs a0, cycle, a1']),
    trap: 'IllegalInstruction',
    offset: 2,
    bits: 0xc005a573,
  });
  return out;
}

/** ecall reaches the host function registered under a7 (berm only: qemu's ecall is Linux's). */
export const ECALL_TEST: TestCase = {
  name: 'ecall calls the host function in a7 with a0..a5',
  raw: true,
  // the la gives the image a relocation section (the engine requires one)
  body: ['  la a3, %T', '  li a7, 4242', '  li a0, 40', '  li a1, 2', '  ecall', '  ret'],
  outs: [],
};

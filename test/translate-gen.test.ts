// The translator's typed layer (src/translate/gen.ts) and the emitter's lowering maps: loads and
// stores of every width and sign run in V8 against DataView's reading of the same bytes, 64-bit
// constants keep all 64 bits, the local allocator numbers locals after the parameters and keeps a
// pair last, every ISA-table mnemonic has a lowering (control transfers exactly for jumps and
// branches) and every branch a comparison, a module imports exactly IMPORT_SIGNATURES, and which
// results the emitter knows to be sign-extended word values.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { readElf } from '../src/elf/reader.js';
import {
  IMPORT_MODULE,
  IMPORT_SIGNATURES,
  Imports,
  DEFAULT_TRANSLATE_OPTIONS,
} from '../src/translate/abi.js';
import { translateBaseline } from '../src/translate/baseline.js';
import { ByteModule } from '../src/translate/bytes.js';
import { BRANCH_CONDITIONS, LOWERINGS } from '../src/translate/emit.js';
import { stepSext } from '../src/translate/words.js';
import { decode } from '../src/riscv/decode.js';
import { Gen, LocalPlan, signatureTypes, type Width } from '../src/translate/gen.js';
import { INSTRUCTIONS, opsOfKind } from '../src/riscv/isa.js';

t.test('every mnemonic has a lowering, every branch a comparison', async (t) => {
  t.same(
    Object.keys(LOWERINGS).sort(),
    INSTRUCTIONS.map((e) => e.name).sort(),
    'one lowering per table entry',
  );
  for (const e of INSTRUCTIONS) {
    const control = e.flow === 'branch' || e.flow === 'jump';
    t.equal(
      LOWERINGS[e.name].via === 'control',
      control,
      `${e.name}: lowered as control exactly when it jumps`,
    );
  }
  t.same(Object.keys(BRANCH_CONDITIONS).sort(), opsOfKind('branch').sort());
  t.equal(new Set(Object.values(BRANCH_CONDITIONS)).size, 6, 'six distinct comparisons');
});

t.test('local allocator', async (t) => {
  const plan = new LocalPlan({ params: ['i32', 'i64'], result: 'none' });
  t.equal(plan.param(1), 1);
  t.throws(() => plan.param(2), RangeError);
  t.equal(plan.add('i64'), 2);
  t.equal(plan.add('f64'), 3);
  t.equal(plan.type(0), 'i32');
  t.equal(plan.type(3), 'f64');
  t.equal(plan.add('pair'), 4);
  t.throws(() => plan.add('i32'), /pair local must be the last/);
});

/** A module exporting `load<w><u|s>(addr) -> i64`, `store<w>(addr, v)` and `k<i>() -> i64` over an imported page. */
function memoryModule(consts: bigint[]): WebAssembly.Module {
  const m = new ByteModule();
  const ty = m.types;
  const g = new Gen(m, ty, 'trap');
  m.setMemory(1, 1);
  m.addMemoryImport('0', 'env', 'mem');
  for (const w of [1, 2, 4, 8] as Width[]) {
    for (const signed of [false, true]) {
      const sig = signatureTypes(ty, { params: ['i32'], result: 'i64' });
      m.addFunction(
        `load${w}${signed ? 's' : 'u'}`,
        sig.params,
        sig.result,
        [],
        g.load(w, signed, m.local.get(0, ty.i32)),
      );
      m.addFunctionExport(`load${w}${signed ? 's' : 'u'}`, `load${w}${signed ? 's' : 'u'}`);
    }
    const st = signatureTypes(ty, { params: ['i32', 'i64'], result: 'none' });
    m.addFunction(
      `store${w}`,
      st.params,
      st.result,
      [],
      g.store(w, m.local.get(0, ty.i32), m.local.get(1, ty.i64)),
    );
    m.addFunctionExport(`store${w}`, `store${w}`);
  }
  consts.forEach((c, k) => {
    m.addFunction(`k${k}`, ty.none, ty.i64, [], g.c64(c));
    m.addFunctionExport(`k${k}`, `k${k}`);
  });
  return new WebAssembly.Module(m.emitBinary());
}

t.test('loads and stores by width and sign, 64-bit constants', async (t) => {
  const consts = [0n, -1n, 2n ** 63n - 1n, -(2n ** 63n), 0x123456789abcdef0n, 2n ** 64n - 2n];
  const mem = new WebAssembly.Memory({ initial: 1, maximum: 1 });
  const inst = new WebAssembly.Instance(memoryModule(consts), { env: { mem } });
  const ex = inst.exports as Record<string, (...a: (number | bigint)[]) => bigint>;
  const view = new DataView(mem.buffer);
  const bytes = [0x81, 0xf2, 0x93, 0xa4, 0xb5, 0xc6, 0xd7, 0xe8];
  bytes.forEach((b, i) => view.setUint8(100 + i, b));
  const expect: Record<string, bigint> = {
    load1u: BigInt(view.getUint8(100)),
    load1s: BigInt(view.getInt8(100)),
    load2u: BigInt(view.getUint16(100, true)),
    load2s: BigInt(view.getInt16(100, true)),
    load4u: BigInt(view.getUint32(100, true)),
    load4s: BigInt(view.getInt32(100, true)),
    load8u: view.getBigInt64(100, true),
    load8s: view.getBigInt64(100, true),
  };
  for (const [name, v] of Object.entries(expect)) t.equal(ex[name](100), v, name);
  for (const w of [1, 2, 4, 8]) {
    for (let i = 0; i < 16; i++) view.setUint8(200 + i, 0x55);
    ex[`store${w}`](200, -0x0123456789abcdefn);
    const want = new Uint8Array(16).fill(0x55);
    new DataView(want.buffer).setBigInt64(0, -0x0123456789abcdefn, true);
    want.fill(0x55, w);
    t.same([...new Uint8Array(mem.buffer, 200, 16)], [...want], `store${w} writes exactly ${w} bytes`);
  }
  consts.forEach((c, k) => t.equal(ex[`k${k}`](), BigInt.asIntN(64, c), `constant ${c}`));
});

t.test('a translated module imports exactly the described signatures', async (t) => {
  const elf = readElf(readFileSync(new URL('./data/ecall.elf', import.meta.url)));
  const mod = new WebAssembly.Module(translateBaseline(elf, DEFAULT_TRANSLATE_OPTIONS).wasm);
  const imports = WebAssembly.Module.imports(mod);
  t.same(
    imports.map((i) => `${i.module}.${i.name}:${i.kind}`).sort(),
    [
      `${IMPORT_MODULE}.${Imports.memory}:memory`,
      ...Object.keys(IMPORT_SIGNATURES).map(
        (k) => `${IMPORT_MODULE}.${Imports[k as keyof typeof IMPORT_SIGNATURES]}:function`,
      ),
    ].sort(),
  );
  // the engine's ecall import is called with the declared argument count (pc and three pieces
  // of the number; a0..a5 travel through the ecall argument area)
  t.equal(IMPORT_SIGNATURES.ecall.params.length, 4);
});

t.test(
  'which results are sign-extended 32-bit values (the word narrowing of bitwise operations)',
  async (t) => {
    // RV64I: the W forms and lw sign-extend their 32-bit result; lbu/lhu/slt fit in 32 bits; lwu
    // zero-extends and add may carry past bit 31; a bitwise and/or/xor of two such values is one.
    const all = 0; // no register known
    const sext = (mask: number, word: number) => stepSext(mask, decode(word), false);
    const A0 = 1 << 10;
    const A1 = 1 << 11;
    t.equal(sext(all, 0x0005a503) & A0, A0, 'lw a0, 0(a1)');
    t.equal(sext(all, 0x0005e503) & A0, 0, 'lwu a0, 0(a1)');
    t.equal(sext(all, 0x00b5053b) & A0, A0, 'addw a0, a0, a1');
    t.equal(sext(A0 | A1, 0x00b50533) & A0, 0, 'add a0, a0, a1 of two word values');
    t.equal(sext(A0 | A1, 0x00b56533) & A0, A0, 'or a0, a0, a1 of two word values');
    t.equal(sext(A0, 0x00b56533) & A0, 0, 'or a0, a0, a1 with a1 unknown');
    t.equal(sext(A0, 0xfff54513) & A0, A0, 'xori a0, a0, -1 (not) of a word value');
    t.equal(sext(A0, 0x02055513) & A0, 0, 'srli a0, a0, 32');
    t.equal(sext(all, 0x00100513) & A0, A0, 'li a0, 1');
    t.equal(sext(A1, 0x00058513) & A0, A0, 'mv a0, a1 (addi a0, a1, 0) of a word value');
    t.equal(sext(0, 0x00058513) & A0, 0, 'mv a0, a1 with a1 unknown');
    t.equal(sext(A1, 0x00158513) & A0, 0, 'addi a0, a1, 1 of a word value (may leave 32 bits)');
    t.equal(sext(A1, 0x00b00533) & A0, A0, 'add a0, x0, a1 (c.mv) of a word value');
    t.equal(sext(A1, 0x0000852e) & A0, A0, 'c.mv a0, a1 of a word value');
    t.equal(sext(0, 0x0000852e) & A0, 0, 'c.mv a0, a1 with a1 unknown');
    t.equal(stepSext(A0 | A1 | (1 << 8), decode(0x008000ef), true), 1 << 8, 'a call clobbers ra, a0, a1');
  },
);

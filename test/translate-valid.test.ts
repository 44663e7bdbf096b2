// Every module the translator emits is valid Wasm, and a failed translation is a TranslateError
// naming what failed, never an internal error. test/data/fnptr.elf (clang -O2) calls a dozen
// functions through pointers loaded from .data at one call site, so Binaryen's optimiser inlines
// the indirect-call dispatcher there; a trap node shared by the dispatcher's leaves once made the
// optimiser abort ("expected i32, seeing i64"). Expected values: `make -C test/data fnptr-expected`
// (the same C built natively with x86-64 gcc).
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BadIndirectTarget } from '../src/engine/traps.js';
import { Engine, Linker } from '../src/engine/engine.js';
import { readElf } from '../src/elf/reader.js';
import { DEFAULT_TRANSLATE_OPTIONS, TranslateError } from '../src/translate/abi.js';
import { ExitCode, exitCodeOf } from '../src/cli/context.js';
import { translate } from '../src/translate/module.js';
import { translateBaseline } from '../src/translate/baseline.js';
import { validateWithWabt } from '../src/translate/listing.js';
import { Harness } from '../src/harness/harness.js';
import { fixtureElfs, ROOT } from './helpers/fixtures.js';

const FNPTR = join(ROOT, 'test', 'data', 'fnptr.elf');
const RUST_BUILD = join(ROOT, 'fixtures', 'rust', 'build');
const NATIVE: [bigint, bigint, bigint][] = [
  [0n, 7n, 7n],
  [1n, 7n, 8n],
  [11n, 7n, 4335784409886392218n],
  [12n, 7n, 616438906474714242n],
  [1000n, 7n, 7673011025081939444n],
  [100000n, 0x123456789abcdefn, 3003259283493130999n],
];

for (const tier of ['baseline', 'optimized'] as const) {
  t.test(`fnptr.elf, ${tier} tier: calls through .data function pointers`, async (t) => {
    const engine = new Engine({ cacheDir: null, tier });
    const mod = await engine.compile(FNPTR);
    t.ok(WebAssembly.validate(readWasm(tier)), 'the emitted module validates');
    const linker = new Linker(engine);
    for (const [n, seed, want] of NATIVE) {
      const [a0] = linker.instantiate(mod).call('fold', n, seed, 0n);
      t.equal(a0, want, `fold(${n}, ${seed}, 0)`);
    }
    // a pointer two bytes into a function is no entry: the dispatcher traps at the call site
    t.throws(() => linker.instantiate(mod).call('fold', 3n, 7n, 2n), BadIndirectTarget);
  });
}

// test/data/outlined.s: code shared by LLVM's machine outliner (rustc opt-level z) follows no
// calling convention: called through t0 it reads and writes the caller's callee-saved registers;
// tail-jumped to, it reads one (or stores it as data), restores the caller's and returns from the
// caller's frame; it may call through a function pointer. The values follow from the RV64I
// semantics: call_outlined(x) = 9x + 6, tail_outlined(x) = 2x + 15, store_outlined(x) = 5x,
// indirect_outlined(x) = 4x + 3.
for (const tier of ['baseline', 'optimized'] as const) {
  t.test(`outlined.elf, ${tier} tier: machine-outliner code runs as the caller's own`, async (t) => {
    const engine = new Engine({ cacheDir: null, tier });
    const mod = await engine.compile(join(ROOT, 'test', 'data', 'outlined.elf'));
    const linker = new Linker(engine);
    for (const x of [0n, 5n, 1000n]) {
      t.equal(linker.instantiate(mod).call('call_outlined', x)[0], 9n * x + 6n, `call_outlined(${x})`);
      t.equal(linker.instantiate(mod).call('tail_outlined', x)[0], 2n * x + 15n, `tail_outlined(${x})`);
      t.equal(linker.instantiate(mod).call('store_outlined', x)[0], 5n * x, `store_outlined(${x})`);
      t.equal(
        linker.instantiate(mod).call('indirect_outlined', x)[0],
        4n * x + 3n,
        `indirect_outlined(${x})`,
      );
    }
  });
}

function readWasm(tier: 'baseline' | 'optimized'): Uint8Array {
  const image = readElf(new Uint8Array(readFileSync(FNPTR)));
  return (tier === 'baseline' ? translateBaseline : translate)(image, DEFAULT_TRANSLATE_OPTIONS).wasm;
}

// (the optimising tier of every fixture is validated by V8 in test/fixtures-raw.test.ts, and of
// some by wabt below). Each module is validated twice, independently: by V8 and by wabt.
t.test(
  'every fixture and test ELF translates to a valid module on the baseline tier (V8 and wabt)',
  async (t) => {
    const elfs = [
      ...fixtureElfs().map((e) => e.path),
      ...readdirSync(RUST_BUILD)
        .filter((n) => n.endsWith('.elf'))
        .map((n) => join(RUST_BUILD, n)),
      ...readdirSync(join(ROOT, 'test', 'data'))
        .filter((n) => n.endsWith('.elf'))
        .map((n) => join(ROOT, 'test', 'data', n)),
    ];
    t.ok(elfs.length >= 60, `${elfs.length} ELFs`);
    for (const path of elfs) {
      const image = readElf(new Uint8Array(readFileSync(path)));
      const { wasm } = translateBaseline(image, DEFAULT_TRANSLATE_OPTIONS);
      const name = path.split('/').pop()!;
      t.ok(WebAssembly.validate(wasm), `${name}: V8`);
      await t.resolves(validateWithWabt(wasm), `${name}: wabt`);
    }
  },
);

// wabt validates what Binaryen wrote (Binaryen validated its module before optimising it): the
// gcc -O2 build of each C source and the smaller Rust builds, as the full set takes minutes on
// the optimising tier.
t.test('the optimising tier writes modules wabt validates', async (t) => {
  const elfs = [
    ...fixtureElfs()
      .filter((e) => e.compiler === 'gcc' && e.opt === 'O2' && !e.path.includes('medlow'))
      .map((e) => e.path),
    ...['rs_dense-Os', 'rs_fmt-Os', 'rs_shared-O2'].map((n) => join(RUST_BUILD, `${n}.elf`)),
  ];
  t.ok(elfs.length >= 12, `${elfs.length} ELFs`);
  for (const path of elfs) {
    const { wasm } = translate(readElf(new Uint8Array(readFileSync(path))), DEFAULT_TRANSLATE_OPTIONS);
    await t.resolves(validateWithWabt(wasm), path.split('/').pop()!);
  }
});

// One function with 150 jump tables: each indirect jump once had its own switch over every
// jump-table target of the function (module size quadratic in the function's size: 830 KB of Wasm
// for 10 KB of text). Expected value: `make -C test/data switches-expected` (native gcc).
t.test('jump tables cost code linear in the function size, on both tiers', async (t) => {
  const path = join(ROOT, 'test', 'data', 'switches.elf');
  const image = readElf(new Uint8Array(readFileSync(path)));
  const text = image.sections.filter((s) => (s.flags & 4) !== 0).reduce((n, s) => n + s.size, 0);
  const wasm = translateBaseline(image, DEFAULT_TRANSLATE_OPTIONS).wasm;
  t.ok(wasm.length < 8 * text, `baseline: ${wasm.length} bytes of Wasm for ${text} bytes of text`);
  for (const tier of ['baseline', 'optimized'] as const) {
    const engine = new Engine({ cacheDir: null, tier });
    const mod = await engine.compile(path);
    const [a0] = new Linker(engine).instantiate(mod).call('huge', 12345n, 678n);
    t.equal(a0, 18446743839390171223n, `huge(12345, 678), ${tier} tier`);
  }
});

// fixtures/big: ~100 KiB of text generated by gen.py; values from `make -C fixtures/big expected`
t.test('the ~100 KiB-text guest on the baseline tier', async (t) => {
  const engine = new Engine({ cacheDir: null, tier: 'baseline' });
  const mod = await engine.compile(join(ROOT, 'fixtures', 'big', 'big-gcc-O2.elf'));
  const text = mod.elf.sections.filter((s) => (s.flags & 4) !== 0).reduce((n, s) => n + s.size, 0);
  t.ok(text >= 100 * 1024, `${text} bytes of text`);
  const linker = new Linker(engine);
  t.equal(linker.instantiate(mod).call('big_run', 1n, 7n)[0], 16983176686899154273n);
  t.equal(linker.instantiate(mod).call('big_run', 3n, 12345n)[0], 10127571426060142464n);
});

/**
 * `elf` with its first R_RISCV_64 relocation whose symbol is `from` retargeted to the symbol `to`
 * (the symbol index in r_info rewritten; ELF64 layout from the System V gABI).
 */
function retarget(elf: Uint8Array, from: string, to: string): Uint8Array {
  const b = new Uint8Array(elf);
  const v = new DataView(b.buffer);
  const shoff = Number(v.getBigUint64(0x28, true));
  const sec = (i: number) => {
    const o = shoff + i * 64;
    const [type, link] = [v.getUint32(o + 4, true), v.getUint32(o + 40, true)];
    return {
      type,
      link,
      off: Number(v.getBigUint64(o + 24, true)),
      size: Number(v.getBigUint64(o + 32, true)),
    };
  };
  const all = Array.from({ length: v.getUint16(0x3c, true) }, (_, i) => sec(i));
  const symtab = all.find((s) => s.type === 2)!;
  const strtab = all[symtab.link]!;
  const names: string[] = [];
  for (let o = symtab.off; o < symtab.off + symtab.size; o += 24) {
    const at = strtab.off + v.getUint32(o, true);
    names.push(Buffer.from(b.subarray(at, b.indexOf(0, at))).toString());
  }
  for (const s of all.filter((s) => s.type === 4)) {
    for (let o = s.off + 8; o < s.off + s.size; o += 24) {
      const info = v.getBigUint64(o, true);
      if ((info & 0xffffffffn) === 2n && names[Number(info >> 32n)] === from) {
        v.setBigUint64(o, (BigInt(names.indexOf(to)) << 32n) | 2n, true);
        return b;
      }
    }
  }
  throw new Error(`no R_RISCV_64 relocation against ${from}`);
}

// A data pointer (a string table entry) retargeted to _start makes _start an indirect target; the
// optimiser then inlined a dispatcher whose leaves shared one trap node and aborted with a
// non-Error object (the CLI said "internal error: [object Object]", exit 4). Both tiers translate
// it now, to a module V8 accepts, and the tools that do not use the pointer behave as before.
t.test('a relocation retargeted to _start translates on both tiers', async (t) => {
  const elf = retarget(
    new Uint8Array(readFileSync(join(ROOT, 'fixtures', 'build', 'misbehave-clang-O2.elf'))),
    '.L.str',
    '_start',
  );
  const image = readElf(elf);
  for (const tr of [translate, translateBaseline]) {
    const { wasm } = tr(image, DEFAULT_TRANSLATE_OPTIONS);
    t.ok(WebAssembly.validate(wasm), `${tr.name}: the module validates`);
  }
  const h = await Harness.load(new Engine({ cacheDir: null, tier: 'optimized' }), elf);
  const r = h.invoke('always_fails', '{}');
  t.same([r.status, r.status === 'failed' ? r.message : ''], ['failed', 'always_fails: deliberate failure']);
});

t.test(
  'a translation failure is bad input (exit 2) naming the function, not an internal error',
  async (t) => {
    const e = new TranslateError('translating f_1119e (fold) failed: boom', 'f_1119e');
    t.equal(exitCodeOf(e), ExitCode.BadInput);
    t.equal(e.functionName, 'f_1119e');
  },
);

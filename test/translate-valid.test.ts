// Every module the translator emits is valid Wasm, and a failed translation is a TranslateError
// naming what failed, never an internal error. test/data/fnptr.elf (clang -O2) calls a dozen
// functions through pointers loaded from .data at one call site, so Binaryen's optimiser inlines
// the indirect-call dispatcher there; a trap node shared by the dispatcher's leaves once made the
// optimiser abort ("expected i32, seeing i64"). Expected values: `make -C test/data fnptr-expected`
// (the same C built natively with x86-64 gcc).
import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BadIndirectTarget } from '../src/engine/traps.js';
import { Engine, Linker } from '../src/engine/engine.js';
import { readElf } from '../src/elf/reader.js';
import { DEFAULT_TRANSLATE_OPTIONS, TranslateError } from '../src/translate/abi.js';
import { ExitCode, exitCodeOf } from '../src/cli/context.js';
import { translate } from '../src/translate/module.js';
import { fixtureElfs, ROOT } from './helpers/fixtures.js';

const FNPTR = join(ROOT, 'test', 'data', 'fnptr.elf');
const NATIVE: [bigint, bigint, bigint][] = [
  [0n, 7n, 7n],
  [1n, 7n, 8n],
  [11n, 7n, 4335784409886392218n],
  [12n, 7n, 616438906474714242n],
  [1000n, 7n, 7673011025081939444n],
  [100000n, 0x123456789abcdefn, 3003259283493130999n],
];

for (const optimizeLevel of [0, 2]) {
  t.test(`fnptr.elf at -O${optimizeLevel}: calls through .data function pointers`, async (t) => {
    const engine = new Engine({ cacheDir: null, optimizeLevel });
    const mod = await engine.compile(FNPTR);
    t.ok(WebAssembly.validate(readWasm(optimizeLevel)), 'the emitted module validates');
    const linker = new Linker(engine);
    for (const [n, seed, want] of NATIVE) {
      const [a0] = linker.instantiate(mod).call('fold', n, seed, 0n);
      t.equal(a0, want, `fold(${n}, ${seed}, 0)`);
    }
    // a pointer two bytes into a function is no entry: the dispatcher traps at the call site
    t.throws(() => linker.instantiate(mod).call('fold', 3n, 7n, 2n), BadIndirectTarget);
  });
}

function readWasm(optimizeLevel: number): Uint8Array {
  const image = readElf(new Uint8Array(readFileSync(FNPTR)));
  return translate(image, { ...DEFAULT_TRANSLATE_OPTIONS, optimizeLevel }).wasm;
}

t.test('every fixture translates to a valid module without optimisation', async (t) => {
  const elfs = fixtureElfs();
  t.ok(elfs.length >= 48, `${elfs.length} fixtures`);
  for (const elf of elfs) {
    const image = readElf(new Uint8Array(readFileSync(elf.path)));
    const { wasm } = translate(image, { ...DEFAULT_TRANSLATE_OPTIONS, optimizeLevel: 0 });
    t.ok(WebAssembly.validate(wasm), elf.path.split('/').pop()!);
  }
});

t.test(
  'a translation failure is bad input (exit 2) naming the function, not an internal error',
  async (t) => {
    const e = new TranslateError('translating f_1119e (fold) failed: boom', 'f_1119e');
    t.equal(exitCodeOf(e), ExitCode.BadInput);
    t.equal(e.functionName, 'f_1119e');
  },
);

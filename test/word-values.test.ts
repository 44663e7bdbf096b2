// The optimising tier's word-value analysis (src/translate/words.ts: which registers hold
// sign-extended 32-bit values; a move copies the property, and `sext.w` of such a value is written
// as a copy) against cases where a register is a word value on one path and not on another: two
// paths merging, a loop's back edge, a call's result moved, a load into the same register,
// `add rd, rs, x0` / `add rd, x0, rs`, writes to x0, `c.mv` and a loop that calls. Both tiers
// return what qemu-riscv64 computes for test/data/words.s (`make -C test/data words-expected`).
import t from 'tap';
import { join } from 'node:path';
import { Engine, Linker } from '../src/engine/engine.js';
import { ROOT } from './helpers/fixtures.js';

const ELF = join(ROOT, 'test', 'data', 'words.elf');

/** [case, a0 passed, a0 returned under qemu-riscv64 (signed)] */
const CASES: [string, bigint, bigint][] = [
  ['case_merge', 1n, 0n],
  ['case_loop', 2n, -2147483641n],
  ['case_call', 0n, 5n],
  ['case_load', 0n, 9n],
  ['case_add0', 0n, 24n],
  ['case_cmv', 0n, 9n],
  ['case_inner', 0n, 16n],
];

for (const tier of ['baseline', 'optimized'] as const) {
  t.test(`${tier} tier: the results qemu computes`, async (t) => {
    const engine = new Engine({ cacheDir: null, tier, memorySize: 1 << 20 });
    const mod = await engine.compile(ELF);
    for (const [name, arg, want] of CASES) {
      const got = BigInt.asIntN(64, new Linker(engine).instantiate(mod).call(name, arg)[0]);
      t.equal(got, want, `${name}(${arg})`);
    }
  });
}

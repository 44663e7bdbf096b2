// Fuel is charged alike on every tier: the baseline tier (and the lazy tier, the same code
// translated one function at a time) keeps the count in the `fuel` global throughout, the
// optimising tier in a local while a function runs (src/translate/emit.ts L_FUEL, written back
// around calls), with the same amounts at the same sites. So for every budget a run ends the same
// way on each: the same result, or OutOfFuel at the same pc (the charge whose poll
// found the budget spent). Programs from fixtures/src/compute.c: recursion (fib_rec), loops with
// calls through a function pointer (qsort_ints, via the dispatcher), nested loops (coremark_mix).
import t from 'tap';
import { join } from 'node:path';
import { basicHostFunctions, Engine, Linker } from '../src/engine/engine.js';
import { OutOfFuel } from '../src/engine/traps.js';
import { ROOT } from './helpers/fixtures.js';

const ELF = join(ROOT, 'fixtures', 'build', 'compute-gcc-O2.elf');
const RUNS: [string, bigint[]][] = [
  ['fib_rec', [18n]],
  ['qsort_ints', [300n, 5n]],
  ['coremark_mix', [6n, 1n]],
];
const BUDGETS = [3_000, 20_000, 50_000, 120_000, 300_000, 800_000, 2_000_000];

t.test('every budget ends a run alike on every tier', async (t) => {
  const linkers = await Promise.all(
    (['baseline', 'optimized', 'lazy'] as const).map(async (tier) => {
      const engine = new Engine({ cacheDir: null, tier });
      const mod = await engine.compile(ELF);
      t.equal(mod.info.tier, tier);
      const linker = new Linker(engine);
      for (const [n, f] of basicHostFunctions(mod)) linker.define(n, f);
      return (fuel: number, name: string, args: bigint[]): string => {
        try {
          return `result ${linker.instantiate(mod, { fuel }).call(name, ...args)[0]}`;
        } catch (e) {
          if (e instanceof OutOfFuel) return `OutOfFuel at pc ${e.pc.toString(16)}`;
          throw e;
        }
      };
    }),
  );
  for (const [name, args] of RUNS) {
    const outcomes = new Set<string>();
    for (const fuel of BUDGETS) {
      const [base, opt, lazy] = linkers.map((run) => run(fuel, name, args));
      t.equal(opt, base, `${name}, budget ${fuel}: ${base}`);
      t.equal(lazy, base, `${name}, budget ${fuel} (lazy tier): ${base}`);
      outcomes.add(base.split(' ')[0]);
    }
    t.ok(outcomes.has('OutOfFuel') && outcomes.has('result'), `${name}: some budgets run out, some do not`);
  }
});

// Every raw entry point of every fixture build returns what the same C source computes natively
// (fixtures/expected.json, produced by fixtures/expected.py with x86-64 gcc, never by berm), on
// both translation tiers and on the lazy tier (the baseline tier's code, one function at a time).
import t from 'tap';
import { basicHostFunctions, Engine, Linker } from '../src/engine/engine.js';
import { caseInt, expected, fixtureElfs, TEST_CACHE } from './helpers/fixtures.js';
import { optimizeAhead, stopOptimizingAhead } from './helpers/optimize-ahead.js';

const engines = {
  baseline: new Engine({ cacheDir: TEST_CACHE, tier: 'baseline' }),
  optimized: new Engine({ cacheDir: TEST_CACHE, tier: 'optimized' }),
  lazy: new Engine({ cacheDir: null, tier: 'lazy' }),
};
const raw = expected().raw;

const elfs = fixtureElfs();
t.ok(elfs.length >= 48, `${elfs.length} fixture builds`);
// every second ELF with raw cases is optimised on a worker thread while this thread runs the
// baseline tier and the others (the optimising tier's compile then finds it in the cache)
const ahead = new Map(
  elfs
    .filter((e) => raw.some((c) => c.source === e.source))
    .filter((_, i) => i % 2 === 1)
    .map((e) => [e.path, optimizeAhead(engines.optimized, e.path)]),
);
t.teardown(() => stopOptimizingAhead());
for (const [tier, engine] of Object.entries(engines)) {
  let tested = 0;
  for (const elf of elfs) {
    const mine = raw.filter((c) => c.source === elf.source);
    if (mine.length === 0) continue;
    tested++;
    t.test(`${elf.path.split('/').pop()!} (${tier} tier)`, async (t) => {
      if (tier === 'optimized') await ahead.get(elf.path);
      const mod = await engine.compile(elf.path);
      t.equal(mod.info.tier, tier);
      const linker = new Linker(engine);
      for (const [name, fn] of basicHostFunctions(mod)) linker.define(name, fn);
      for (const c of mine) {
        const inst = linker.instantiate(mod, { timeoutMs: 20_000 });
        const [a0, a1] = inst.call(c.symbol, ...c.args.map(caseInt));
        const what = `${c.symbol}(${c.args.join(', ')})`;
        if (c.returns >= 1) t.equal(a0, caseInt(c.a0!), `${what} a0`);
        if (c.returns >= 2) t.equal(a1, caseInt(c.a1!), `${what} a1`);
      }
    });
  }
  t.ok(tested >= 24, `${tested} fixture builds with raw cases (${tier} tier)`);
}

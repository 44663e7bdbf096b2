// Every raw entry point of every fixture build returns what the same C source computes natively
// (fixtures/expected.json, produced by fixtures/expected.py with x86-64 gcc, never by berm).
import t from 'tap';
import { basicHostFunctions, Engine, Linker } from '../src/engine/engine.js';
import { caseInt, expected, fixtureElfs, TEST_CACHE } from './helpers/fixtures.js';

const engine = new Engine({ cacheDir: TEST_CACHE });
const raw = expected().raw;

for (const elf of fixtureElfs()) {
  const mine = raw.filter((c) => c.source === elf.source);
  if (mine.length === 0) continue;
  t.test(elf.path.split('/').pop()!, async (t) => {
    const mod = await engine.compile(elf.path);
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

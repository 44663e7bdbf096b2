// Conformance suite: instruction tests and random programs run in berm and in
// qemu-riscv64 and compared; the named spec cases; trap tests; saved regressions; coverage report.
import t, { type Test } from 'tap';
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Coverage } from '../conformance/coverage.js';
import { ECALL_TEST, namedSpecTests, trapTests, unitTests } from '../conformance/gen-unit.js';
import { generate, toTest } from '../conformance/gen-fuzz.js';
import {
  build,
  buildBatch,
  CONFORMANCE_DIR,
  decodedNames,
  getEngine,
  REGRESSION_DIR,
  render,
  runBatch,
  runRegression,
  type Divergence,
  type TestCase,
} from '../conformance/lib.js';
import { Linker } from '../src/engine/engine.js';
import { Trap } from '../src/engine/traps.js';
import { optimizeAhead, stopOptimizingAhead } from './helpers/optimize-ahead.js';

/** The CI seed set; `make fuzz` runs many more (conformance/fuzz.ts). */
const CI_SEEDS_O0 = 240;
const CI_SEEDS_O2 = 40;
const BATCH = 2500;

const coverage = new Coverage();
let programs = 0;

const show = (d: Divergence) => `t_${d.index} ${d.test.name}\n    ${d.details.join('\n    ')}`;

/** Level 0 is the baseline tier, 1..3 the optimising tier; `alsoLevels` reuse the build and qemu run. */
async function differential(
  t: Test,
  tests: TestCase[],
  optimizeLevel = 2,
  alsoLevels: number[] = [],
): Promise<void> {
  const tier = (l: number) => (l === 0 ? 'baseline tier' : `optimising tier, O${l}`);
  const chunks: TestCase[][] = [];
  for (let i = 0; i < tests.length; i += BATCH) chunks.push(tests.slice(i, i + BATCH));
  // every chunk built first (as/ld take little); on the optimising tier every second chunk is
  // optimised on a worker thread meanwhile, and found in the cache when its turn comes
  const builds = chunks.map((c) => buildBatch(c));
  const ahead = builds.map((b, k) =>
    optimizeLevel > 0 && k % 2 === 1 ? optimizeAhead(getEngine(optimizeLevel), b.guestElf) : null,
  );
  for (let k = 0; k < chunks.length; k++) {
    const i = k * BATCH;
    const chunk = chunks[k];
    await ahead[k];
    const r = await runBatch(chunk, false, optimizeLevel, alsoLevels, builds[k]);
    programs++;
    r.names.forEach((n) => coverage.add(n));
    t.same(
      r.divergences.map(show),
      [],
      `tests ${i}..${i + chunk.length - 1} agree with qemu (${[optimizeLevel, ...alsoLevels].map(tier).join('; ')})`,
    );
  }
}

t.test('named spec cases (values from the spec, cross-checked against qemu)', async (t) => {
  const tests = namedSpecTests();
  const r = await runBatch(tests);
  programs++;
  r.names.forEach((n) => coverage.add(n));
  const bad = new Map(r.divergences.map((d) => [d.index, d.details]));
  tests.forEach((c, i) => t.same(bad.get(i) ?? [], [], c.name));
});

t.test('every instruction and compressed form over interesting operands', async (t) => {
  await differential(t, unitTests(1), 2, [0]);
});

for (const level of [2, 0]) {
  t.test(
    `reserved encodings, ebreak and CSR writes trap at their own address (${level === 0 ? 'baseline' : 'optimising'} tier)`,
    async (t) => {
      const cases = trapTests();
      const built = build(render([...cases.map((c) => c.test), ECALL_TEST]), []);
      try {
        const mod = await getEngine(level).compile(built.guestElf);
        programs++;
        decodedNames(mod, cases.length + 1).forEach((n) => coverage.add(n));
        const start = (i: number) => mod.elf.symbols.find((s) => s.name === `t_${i}`)!.value;
        cases.forEach((c, i) => {
          const inst = new Linker(getEngine(level)).instantiate(mod);
          let err: unknown = null;
          try {
            inst.call(`t_${i}`);
          } catch (e) {
            err = e;
          }
          t.ok(err instanceof Trap, `${c.test.name}: traps`);
          const trap = err as Trap & { bits?: number };
          t.equal(trap.constructor.name, c.trap, `${c.test.name}: ${c.trap}`);
          t.equal(trap.pc, start(i) + c.offset, `${c.test.name}: trap.pc is the instruction's address`);
          if (c.bits !== undefined) t.equal(trap.bits, c.bits, `${c.test.name}: trap.bits`);
        });
        const k = cases.length;
        const inst = new Linker(getEngine(level))
          .define(4242n, (c) => [c.args[0] + c.args[1], 7n])
          .instantiate(mod);
        t.same(inst.call(`t_${k}`), [42n, 7n], 'ecall reaches the host function registered under a7');
      } finally {
        built.cleanup();
      }
    },
  );
}

t.test('random programs (CI seed set)', async (t) => {
  await differential(
    t,
    Array.from({ length: CI_SEEDS_O0 }, (_, i) => toTest(generate(i + 1))),
    0,
  );
  await differential(
    t,
    Array.from({ length: CI_SEEDS_O2 }, (_, i) => toTest(generate(100_000 + i))),
    2,
  );
});

t.test('saved regressions', async (t) => {
  const names = readdirSync(REGRESSION_DIR)
    .filter((n) => n.endsWith('.s'))
    .map((n) => n.slice(0, -2))
    .sort();
  // committed with the suite: none found is a broken checkout, not a pass
  t.ok(names.length >= 1, `${names.length} saved regressions`);
  for (const name of names) {
    const r = await runRegression(name);
    t.ok(r.qemuAgrees, `${name}: qemu still gives the saved output`);
    if (r.todo !== null) {
      t.same(r.mismatch, [], `${name}: berm matches qemu`, { todo: r.todo });
    } else {
      t.same(r.mismatch, [], `${name}: berm matches qemu`);
    }
  }
});

t.teardown(() => stopOptimizingAhead());

t.test('coverage: every mnemonic and compressed form is executed by some test', async (t) => {
  const report = coverage.report([
    'berm conformance coverage (BERM_WRITE_COVERAGE=1 npx tap test/conformance.test.ts)',
    `${programs} programs built and run`,
  ]);
  // The committed report is refreshed on request only, so a test run leaves the checkout clean.
  if (process.env.BERM_WRITE_COVERAGE === '1') {
    writeFileSync(join(CONFORMANCE_DIR, 'coverage.txt'), report);
  }
  t.same(coverage.missing(), [], 'no mnemonic or compressed form at zero');
});

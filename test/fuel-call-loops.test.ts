// A back edge to a block that calls a guest function charges its fuel without the poll; the call
// site's charge, one straight-line block later, polls (src/translate/emit.ts pollsOnBackEdge,
// docs/engine.md "Interrupts and fuel"). Both tiers follow the rule, so for every budget a
// run of test/data/callloop.s ends as the documented fuel model says: the same result, or
// OutOfFuel at the same pc, which is now always the call site and never the loop's branch. A loop
// of calls that never ends is still stopped by a deadline and by its budget.
import t from 'tap';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { Engine, Linker, type GuestModule } from '../src/engine/engine.js';
import { Interrupted, OutOfFuel } from '../src/engine/traps.js';
import { readElf } from '../src/elf/reader.js';
import { ROOT } from './helpers/fixtures.js';

const ELF = join(ROOT, 'test', 'data', 'callloop.elf');
const ADDRESS = new Map(readElf(readFileSync(ELF)).functions.map((f) => [f.name, f.start]));
const SLICE = 16384;
// callloop.s, uncompressed: call_loop is 10 instructions (40 bytes), leaf 2 (8 bytes); the loop is
// `jal leaf; addi; bnez` at call_loop + 12, so the back edge spans 12 bytes
const CALL_LOOP_ENTRY = 40 / 2;
const LEAF_ENTRY = 8 / 2;
const BACK_EDGE = 12 / 2;
const CALL_PC = ADDRESS.get('call_loop')! + 12;
const BRANCH_PC = ADDRESS.get('call_loop')! + 20;

/**
 * The documented model: fuel is charged on entering a function (at the site that calls it) and on
 * back edges; a charge that polls and finds the count below 0 takes the next slice of the budget
 * (min(slice, what is left); what the count was below 0 is forgotten), or ends the run with
 * OutOfFuel at its pc when nothing is left. `backEdgePolls`: the rule before this change.
 */
function model(iterations: number, budget: number, backEdgePolls: boolean): string {
  let fuel = 0;
  let left = budget;
  const charge = (x: number, pc: number, poll: boolean): boolean => {
    fuel -= x;
    if (!poll || fuel >= 0) return true;
    if (left <= 0) {
      outAt = pc;
      return false;
    }
    const g = Math.min(SLICE, left);
    left -= g;
    fuel = g;
    return true;
  };
  let outAt = -1;
  if (!charge(CALL_LOOP_ENTRY, ADDRESS.get('call_loop')!, true)) return `OutOfFuel at ${outAt}`;
  for (let i = 1; i <= iterations; i++) {
    if (!charge(LEAF_ENTRY, CALL_PC, true)) return `OutOfFuel at ${outAt}`;
    if (i < iterations && !charge(BACK_EDGE, BRANCH_PC, backEdgePolls)) return `OutOfFuel at ${outAt}`;
  }
  return `result ${iterations}`;
}

async function tiers(): Promise<[string, GuestModule, Linker][]> {
  const out: [string, GuestModule, Linker][] = [];
  for (const tier of ['baseline', 'optimized'] as const) {
    const engine = new Engine({ cacheDir: null, tier, memorySize: 1 << 20 });
    out.push([tier, await engine.compile(ELF), new Linker(engine)]);
  }
  return out;
}

t.test('a loop of calls runs out of fuel at its call site, as the model says, on both tiers', async (t) => {
  const ls = await tiers();
  const n = 1000;
  let differs = 0;
  for (let budget = 4000; budget <= 10_300; budget += 37) {
    const want = model(n, budget, false);
    if (want !== model(n, budget, true)) differs++;
    for (const [tier, mod, linker] of ls) {
      let got: string;
      try {
        got = `result ${linker.instantiate(mod, { fuel: budget }).call('call_loop', BigInt(n))[0]}`;
      } catch (e) {
        if (!(e instanceof OutOfFuel)) throw e;
        got = `OutOfFuel at ${e.pc}`;
      }
      t.equal(got, want, `call_loop(${n}), fuel ${budget}, ${tier}`);
    }
  }
  t.ok(differs > 0, `the old rule (the branch polls) would end ${differs} of these runs elsewhere`);
});

t.test('a loop of calls that never ends is stopped by a deadline and by its budget', async (t) => {
  for (const [tier, mod, linker] of await tiers()) {
    const inst = linker.instantiate(mod, { timeoutMs: 30 });
    t.throws(() => inst.call('call_spin'), Interrupted, `${tier}: deadline`);
    const err = t.throws(() => linker.instantiate(mod, { fuel: 3 * SLICE + 5 }).call('call_spin'), OutOfFuel);
    t.equal((err as OutOfFuel).pc, ADDRESS.get('call_spin')! + 8, `${tier}: out of fuel at the call`);
  }
});

// The instance slots an engine keeps between instances, over all its modules, stay within their
// bounds: resident bytes (a slot counted by the bytes its calls touched), a count (each memory
// reserves ~10 GiB of address space), and time (a large slot left idle is dropped and a
// collection asked for); an undeployed module's slots go.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { basicHostFunctions, Engine, Linker, type GuestModule } from '../src/engine/engine.js';
import { SlotKeeper } from '../src/engine/slot-keeper.js';
import { fixtureElfs, TEST_CACHE } from './helpers/fixtures.js';
import { monotonicMs } from '../src/util/clock.js';

const compute = fixtureElfs().find(
  (e) => e.source === 'compute.c' && e.compiler === 'gcc' && e.opt === 'O2',
)!;
const MiB = 1024 * 1024;

t.test('the keeper drops the least recently kept slots past its bytes and its count', async (t) => {
  const k = new SlotKeeper<string>({ maxBytes: 10, maxSlots: 3, idleMs: 60_000, keepIdleBytes: 0 });
  const a = {};
  const b = {};
  t.ok(k.keep(a, 'a1', 4));
  t.ok(k.keep(b, 'b1', 4));
  t.equal(k.bytes, 8);
  t.ok(k.keep(a, 'a2', 4), 'a third of 4 bytes: 12 > 10, so the oldest (a1) goes');
  t.equal(k.bytes, 8);
  t.equal(k.count(a), 1);
  t.equal(k.take(a), 'a2');
  t.equal(k.take(a), undefined);
  t.ok(k.keep(a, 'a3', 1));
  t.ok(k.keep(a, 'a4', 1));
  t.ok(k.keep(a, 'a5', 1), 'a fourth slot: over the count of 3, so the oldest (b1) goes');
  t.equal(k.size, 3);
  t.equal(k.count(b), 0);
  t.notOk(k.keep(b, 'huge', 11), 'larger than the whole bound: never kept');
  t.equal(k.size, 3);
  k.forget(a);
  t.equal(k.size, 0);
  t.equal(k.bytes, 0);
  t.equal(k.dropped, 3, 'a1, b1 and the huge one were dropped (forget is not counted)');
});

t.test('a sweep drops large slots idle for idleMs and asks for a collection', async (t) => {
  let reclaimed = 0;
  const k = new SlotKeeper<string>(
    { maxBytes: 100, maxSlots: 10, idleMs: 1_000, keepIdleBytes: 5 },
    () => reclaimed++,
  );
  const o = {};
  k.keep(o, 'small', 5);
  k.keep(o, 'large', 6);
  const now = monotonicMs();
  t.equal(k.sweep(now), 0, 'nothing idle yet');
  t.equal(reclaimed, 0);
  t.equal(k.sweep(now + 1_000), 6, 'the large one is dropped once idle');
  t.equal(reclaimed, 1);
  t.equal(k.take(o), 'small', 'the small one stays warm');
});

t.test("an engine's slots over many modules stay within the keeper's bounds", async (t) => {
  let reclaimed = 0;
  const engine = new Engine({
    cacheDir: TEST_CACHE,
    keep: { maxBytes: 12 * MiB, maxSlots: 3, idleMs: 200, keepIdleBytes: MiB },
    reclaim: () => reclaimed++,
  });
  const bytes = readFileSync(compute.path);
  const first = await engine.compile(bytes);
  // five deployments of one image: five modules, as a worker has one per deployed name
  const mods: GuestModule[] = [first];
  for (let i = 0; i < 4; i++) mods.push(engine.moduleFor(bytes, first.wasm, first.info));
  const linker = new Linker(engine);
  for (const [n, f] of basicHostFunctions(first)) linker.define(n, f);
  for (const m of mods) {
    const inst = linker.instantiate(m);
    // 1,200,000 ints malloc'd, filled and sorted: the slot touches over 4.5 MiB
    inst.call('qsort_ints', 1_200_000n, 7n);
    inst.dispose();
    t.ok(engine.keeper.size <= 3, `kept ${engine.keeper.size} slots`);
    t.ok(engine.keeper.bytes <= 12 * MiB, `kept ${(engine.keeper.bytes / MiB).toFixed(1)} MiB`);
  }
  t.equal(engine.keeper.size, 2, 'two slots of over 4.5 MiB fit in 12 MiB');
  t.ok(engine.keeper.bytes > 9 * MiB, 'each counted by what it touched');
  t.equal(engine.keeper.dropped, 3);
  // a kept slot is reused by its own module only
  const last = mods[4]!;
  const again = linker.instantiate(last);
  t.equal(engine.keeper.count(last), 0, 'the kept slot of the last module was taken');
  again.dispose();
  last.release();
  t.equal(engine.keeper.count(last), 0, 'released with its module');
  // idle: the sweep (armed when a slot was kept) drops the large slots and asks for a collection
  await new Promise((r) => setTimeout(r, 700));
  t.equal(engine.keeper.size, 0, 'the idle large slots were dropped');
  t.ok(reclaimed >= 1, 'and a collection was asked for');
});

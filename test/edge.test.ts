// Engine edge cases found by review: misaligned atomics, fuel that must count long loop bodies,
// interrupts that arrive between runs.
import t from 'tap';
import { join } from 'node:path';
import { Engine, Linker } from '../src/engine/engine.js';
import { Interrupted, MemoryFault, OutOfFuel } from '../src/engine/traps.js';
import { ROOT, TEST_CACHE } from './helpers/fixtures.js';

const engine = new Engine({ cacheDir: TEST_CACHE, memorySize: 1 << 20 });
const elf = join(ROOT, 'test', 'data', 'edge.elf');

t.test('AMOs need natural alignment (A extension): a misaligned one faults', async (t) => {
  const mod = await engine.compile(elf);
  const inst = new Linker(engine).instantiate(mod);
  const aligned = mod.layout.heapStart;
  t.same(inst.call('amo_at', BigInt(aligned))[0], 0n, 'aligned: returns the old value');
  t.same(inst.call('amo_at', BigInt(aligned))[0], 1n, 'and added one');
  const err = t.throws(() => inst.call('amo_at', BigInt(aligned + 4))) as unknown;
  t.type(err, MemoryFault);
  t.equal((err as MemoryFault).address, BigInt(aligned + 4));
});

t.test('fuel counts the whole loop body, not only the block that ends in the back edge', async (t) => {
  const mod = await engine.compile(elf);
  // 100 iterations run 100 * 514 instructions: a budget of 10,000 must not be enough
  const inst = new Linker(engine).instantiate(mod, { fuel: 10_000 });
  t.throws(() => inst.call('long_body', 100n), OutOfFuel);
  const enough = new Linker(engine).instantiate(mod, { fuel: 200_000 });
  t.same(enough.call('long_body', 100n)[0], 51200n, 'a budget above the bound lets it finish');
});

t.test('an interrupt raised while nothing runs does not stop the next run', async (t) => {
  const mod = await engine.compile(elf);
  engine.interruptHandle.interrupt();
  const inst = new Linker(engine).instantiate(mod);
  t.same(inst.call('long_body', 3n)[0], 1536n);
  const spinning = new Linker(engine).instantiate(mod, { timeoutMs: 50 });
  t.throws(() => spinning.call('spin'), Interrupted, 'a deadline still stops a spinning guest');
});

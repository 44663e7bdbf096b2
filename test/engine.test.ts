// Engine API: linker registration by name and number, host functions reading and writing guest
// memory and a0/a1, fuel, deadlines, argument checks, memory bounds of the host-side helpers.
import t from 'tap';
import { basicHostFunctions, Engine, Linker } from '../src/engine/engine.js';
import { HostCallError, MemoryFault, OutOfFuel, UnknownHostCall } from '../src/engine/traps.js';
import { fnv1a64 } from '../src/util/fnv.js';
import { caseInt, expected, fixtureElfs, TEST_CACHE } from './helpers/fixtures.js';

const engine = new Engine({ cacheDir: TEST_CACHE });
const find = (source: string) =>
  fixtureElfs().find((e) => e.source === source && e.compiler === 'gcc' && e.opt === 'O2')!.path;

t.test('options are checked', async (t) => {
  t.throws(() => new Engine({ memorySize: 3 << 20 }), RangeError, 'memory must be a power of two');
  t.throws(() => new Engine({ memorySize: 1 << 31 }), RangeError, 'at most 1 GiB');
  t.throws(() => new Engine({ optimizeLevel: 7 }), RangeError);
  t.doesNotThrow(() => new Engine({ memorySize: 1 << 16, cacheDir: null }), '64 KiB is allowed');
});

t.test('raw calls: arguments, results, errors', async (t) => {
  const mod = await engine.compile(find('raw.c'));
  const inst = new Linker(engine).instantiate(mod);
  t.same(inst.call('raw_add', 40n, 2n)[0], 42n);
  t.same(inst.call('raw_add', -1n, 1n)[0], 0n, 'wraps modulo 2^64');
  t.same(inst.call('raw_const')[0], 0x0123456789abcdefn);
  t.throws(() => inst.call('no_such_symbol'), /no exported guest function/);
  t.throws(() => inst.call('raw_add', 1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n, 9n), /at most 8/);
  t.ok(mod.exports().includes('raw_add'));
  t.equal(mod.functionAt(mod.image.functions[0].start)?.name, mod.image.functions[0].name);
});

t.test('host memory helpers refuse bytes outside guest memory', async (t) => {
  const mod = await engine.compile(find('raw.c'));
  const inst = new Linker(engine).instantiate(mod);
  const { base, size } = mod.layout;
  t.throws(() => inst.memory.read(0, 8), MemoryFault, 'null');
  t.throws(() => inst.memory.read(base - 1, 1), MemoryFault, 'below the image');
  t.throws(() => inst.memory.read(base + size - 4, 8), MemoryFault, 'runs past the end');
  t.throws(
    () => inst.memory.write(2n ** 64n - 1n, new Uint8Array(2)),
    MemoryFault,
    'top of the address space',
  );
  inst.memory.write(mod.layout.heapStart, new Uint8Array([1, 2, 3]));
  t.same([...inst.memory.read(mod.layout.heapStart, 3)], [1, 2, 3]);
});

t.test('host calls: by name and number, unknown numbers trap, host errors are wrapped', async (t) => {
  const mod = await engine.compile(find('hostcalls.c'));
  const lines: string[] = [];
  const linker = new Linker(engine);
  for (const [name, fn] of basicHostFunctions(mod, (l) => lines.push(l))) linker.define(name, fn);
  t.ok(linker.has('berm.log') && linker.has(fnv1a64('berm.log')), 'a name registers its FNV-1a-64 number');
  const r = linker.instantiate(mod).call('hc_interleave', 10n, 42n);
  // the value the same C source computes natively (fixtures/expected.json)
  const want = expected().raw.find(
    (c) => c.source === 'hostcalls.c' && c.symbol === 'hc_interleave' && c.args.join() === '10,42',
  );
  t.ok(want, 'fixtures/expected.json has hc_interleave(10, 42)');
  t.equal(r[0], caseInt(want!.a0!));
  t.ok(lines.length > 0, 'the guest logged through berm.log');
  const bare = new Linker(engine).instantiate(mod);
  t.throws(() => bare.call('hc_interleave', 10n, 42n), UnknownHostCall);
  const failing = new Linker(engine).define('berm.log', () => {
    throw new Error('disk on fire');
  });
  for (const [name, fn] of basicHostFunctions(mod)) if (name !== 'berm.log') failing.define(name, fn);
  const err = t.throws(() => failing.instantiate(mod).call('hc_interleave', 10n, 42n)) as unknown;
  t.type(err, HostCallError);
  t.match((err as Error).message, /disk on fire/);
});

t.test('fuel runs out with OutOfFuel; a deadline interrupts', async (t) => {
  const mod = await engine.compile(find('misbehave.c'));
  const inst = new Linker(engine).instantiate(mod, { fuel: 100_000 });
  t.throws(() => inst.call('bad_loop_nocall', 1n), OutOfFuel);
  const slow = new Linker(engine).instantiate(mod, { timeoutMs: 20 });
  t.throws(() => slow.call('bad_loop_nocall', 1n), { name: 'Interrupted' });
  const mod2 = await engine.compile(find('compute.c'));
  const enough = new Linker(engine).instantiate(mod2, { fuel: 1e9 });
  t.doesNotThrow(() => enough.call('fib_rec', 20n), 'a finite computation fits a large budget');
});

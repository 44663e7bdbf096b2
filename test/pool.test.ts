// Reused memories are reset completely: whatever one call's guest stores or host writes left in
// the image, heap or stack, the next instance of the module sees the pristine image and zeros.
import t from 'tap';
import { basicHostFunctions, Engine, Linker } from '../src/engine/engine.js';
import { readImage } from '../src/translate/module.js';
import { computeLayout } from '../src/translate/abi.js';
import { join } from 'node:path';
import { fixtureElfs, ROOT, TEST_CACHE } from './helpers/fixtures.js';

const engine = new Engine({ cacheDir: TEST_CACHE, poolSize: 1 });
const compute = fixtureElfs().find(
  (e) => e.source === 'compute.c' && e.compiler === 'gcc' && e.opt === 'O2',
)!;

function pristine(bytes: Uint8Array, expect: Uint8Array): boolean {
  return bytes.length === expect.length && bytes.every((b, i) => b === expect[i]);
}

t.test('a pooled memory comes back as a fresh one', async (t) => {
  const mod = await engine.compile(compute.path);
  const { layout, elf: image } = mod;
  const linker = new Linker(engine);
  for (const [n, f] of basicHostFunctions(mod)) linker.define(n, f);
  const imageLen = image.imageEnd - layout.base;
  const fresh = readImage(image, layout.base, imageLen);
  const heapProbe = 256 * 1024;
  const stackProbe = 64 * 1024;

  const first = linker.instantiate(mod);
  const slotMemory = first.memory.memory;
  first.call('qsort_ints', 5000n, 7n); // malloc'd heap, deep stack, .data/.bss updates
  first.call('fib_rec', 18n);
  first.memory.write(layout.heapStart + 12345, new Uint8Array([9, 9, 9])); // a host write
  first.memory.write(layout.base + 8, new Uint8Array([0xee])); // the host scribbles on the image
  const heapBefore = first.memory.read(layout.heapStart, heapProbe);
  const stackBefore = first.memory.read(layout.initialSp + 16 - stackProbe, stackProbe);
  t.ok(
    heapBefore.some((b) => b !== 0),
    'the calls left data on the heap',
  );
  t.ok(
    stackBefore.some((b) => b !== 0),
    'and on the stack',
  );
  first.dispose();

  const second = linker.instantiate(mod);
  t.equal(second.memory.memory, slotMemory, 'the memory was reused');
  t.ok(pristine(second.memory.read(layout.base, imageLen), fresh), 'the image is pristine');
  t.ok(
    second.memory.read(layout.heapStart, heapProbe).every((b) => b === 0),
    'the heap is zero',
  );
  t.ok(
    second.memory.read(layout.initialSp + 16 - stackProbe, stackProbe).every((b) => b === 0),
    'the stack is zero',
  );
  t.throws(() => first.call('fib_rec', 3n), /disposed/, 'a disposed instance cannot run');
  second.dispose();
});

t.test('a guest store anywhere (not only near sp or the image) is reset', async (t) => {
  const mod = await engine.compile(join(ROOT, 'test', 'data', 'poke.elf'));
  const { layout } = mod;
  const targets = [
    layout.heapStart + Math.floor(layout.heapSize / 2), // the middle of the heap
    layout.stackLimit - 4096, // the guard below the stack
    layout.base + layout.size - 8, // the last word of memory
  ];
  const inst = new Linker(engine).instantiate(mod);
  for (const a of targets) inst.call('poke', BigInt(a), 0xabcdefn);
  for (const a of targets)
    t.equal(inst.call('peek', BigInt(a))[0], 0xabcdefn, `stored at 0x${a.toString(16)}`);
  inst.dispose();
  const again = new Linker(engine).instantiate(mod);
  for (const a of targets) t.equal(again.call('peek', BigInt(a))[0], 0n, `0x${a.toString(16)} is zero again`);
  again.dispose();
});

t.test('the heap starts at the first 4 KiB page past the image; a store in the gap is reset', async (t) => {
  // docs/engine.md, Layout: [image][heap ...], the heap from the image's end rounded up to 4 KiB.
  // A reset zeroes [0, dirty_hi) whole, the gap included, so the gap is kept under a page.
  const opts = { memorySize: 1 << 20, stackSize: 64 * 1024, optimizeLevel: 0 };
  t.equal(computeLayout(0x10000, 0x11060, opts).heapStart, 0x12000);
  t.equal(computeLayout(0x10000, 0x12000, opts).heapStart, 0x12000, 'an image ending on a page');
  const mod = await engine.compile(join(ROOT, 'test', 'data', 'poke.elf'));
  const { layout, elf: image } = mod;
  t.equal(layout.heapStart, Math.ceil(image.imageEnd / 4096) * 4096);
  const gap = layout.heapStart - 8;
  t.ok(gap >= image.imageEnd, 'the gap is past the image');
  const inst = new Linker(engine).instantiate(mod);
  inst.call('poke', BigInt(gap), 0x77n);
  inst.call('poke', BigInt(layout.heapStart + 64), 0x78n);
  inst.dispose();
  const again = new Linker(engine).instantiate(mod);
  t.equal(again.call('peek', BigInt(gap))[0], 0n, 'the gap is zero again');
  t.equal(again.call('peek', BigInt(layout.heapStart + 64))[0], 0n, 'the heap is zero again');
  again.dispose();
});

t.test('a store through sp moved anywhere (a stack of its own) is reset', async (t) => {
  // stores at sp plus a non-negative offset are not tracked one by one: the write to sp is
  const mod = await engine.compile(join(ROOT, 'test', 'data', 'poke.elf'));
  const { layout } = mod;
  const targets = [
    layout.heapStart + 4096 + 8 * 1000, // the heap, far below the stack split
    layout.stackLimit - 8192, // the guard below the stack
    layout.base + layout.size - 8, // the last word of memory
  ];
  const inst = new Linker(engine).instantiate(mod);
  for (const a of targets) inst.call('sp_poke', BigInt(a), 0x5a5a5an);
  for (const a of targets)
    t.equal(inst.call('peek', BigInt(a))[0], 0x5a5a5an, `stored at 0x${a.toString(16)} through sp`);
  inst.dispose();
  const again = new Linker(engine).instantiate(mod);
  for (const a of targets) t.equal(again.call('peek', BigInt(a))[0], 0n, `0x${a.toString(16)} is zero again`);
  t.throws(() => again.call('sp_poke', BigInt(layout.base + layout.size), 1n), { name: 'MemoryFault' });
  again.dispose();
});

// Tiered translation: the 'auto' tier starts a guest on the baseline tier (Wasm written directly;
// with `lazy: true`, on the lazy tier: test/lazy.test.ts),
// optimises it in a worker thread, caches the optimised tier under its own key and swaps it in for
// later instances; 'optimized' (berm compile) translates the optimised tier in the foreground.
// Expected values: `make -C test/data fnptr-expected` (the C source built natively).
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine, Linker } from '../src/engine/engine.js';
import { ROOT } from './helpers/fixtures.js';

const FNPTR = join(ROOT, 'test', 'data', 'fnptr.elf');
const bytes = new Uint8Array(readFileSync(FNPTR));
const WANT = 7673011025081939444n; // fold(1000, 7, 0)

t.test('auto without lazy: baseline first, optimised tier swapped in and cached', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'berm-tiers-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const engine = new Engine({ cacheDir: dir, lazy: false });
  t.teardown(() => engine.close());
  const mod = await engine.compile(bytes);
  t.equal(mod.info.tier, 'baseline');
  t.equal(mod.info.cached, false);
  t.equal(mod.info.translate?.optimize, 0, 'the baseline tier runs no optimiser');
  const linker = new Linker(engine);
  const before = mod.wasm;
  t.equal(linker.instantiate(mod).call('fold', 1000n, 7n, 0n)[0], WANT, 'baseline result');
  t.equal(await mod.optimized, true, 'the optimised tier was swapped in');
  t.equal(mod.info.tier, 'optimized');
  t.not(mod.wasm, before, 'later instances use another module');
  t.equal(linker.instantiate(mod).call('fold', 1000n, 7n, 0n)[0], WANT, 'optimised result');
  const keys = engine.cache!.list().map((e) => e.key);
  t.ok(keys.includes(engine.keyFor(bytes, 'baseline')), 'baseline tier cached');
  t.ok(keys.includes(engine.keyFor(bytes, 'optimized')), 'optimised tier cached');
  t.not(engine.keyFor(bytes, 'baseline'), engine.keyFor(bytes, 'optimized'), 'the key names the tier');

  const again = await new Engine({ cacheDir: dir }).compile(bytes);
  t.equal(again.info.tier, 'optimized', 'a later compile gets the optimised tier from the cache');
  t.equal(again.info.cached, true);
});

t.test('optimized: translated in the foreground; baseline: never optimised', async (t) => {
  const opt = await new Engine({ cacheDir: null, tier: 'optimized' }).compile(bytes);
  t.equal(opt.info.tier, 'optimized');
  t.ok(opt.info.translate!.optimize > 0, 'Binaryen optimised it');
  const base = await new Engine({ cacheDir: null, tier: 'baseline' }).compile(bytes);
  t.equal(base.info.tier, 'baseline');
  t.equal(await base.optimized, true, 'a module in its final tier is settled');
  t.equal(base.info.tier, 'baseline');
  t.throws(() => new Engine({ tier: 'fast' as never }), RangeError);
});

// V8 counts an unshared WebAssembly.Memory's size as external memory and, past its 64 MiB soft
// limit, starts a collection ("external memory pressure" in --trace-gc and --trace-incremental-marking:
// incremental marking, or a scavenge at the next backing store allocated, such as the instance's
// globals); a shared memory counts 0. Both tiers import a shared memory so that a process's first
// 64 MiB instance starts none (the cold path to a first call, and a CLI call from the cache).
for (const tier of ['baseline', 'optimized'] as const) {
  t.test(`${tier} tier: shared memory, no external-memory collection on the first instance`, async (t) => {
    const base = await new Engine({ cacheDir: null, tier }).compile(bytes);
    const inst = new Linker(base.engine).instantiate(base);
    t.equal(inst.tier, tier);
    t.ok(inst.memory.memory.buffer instanceof SharedArrayBuffer, `the ${tier} instance has a shared memory`);
    t.equal(inst.call('fold', 1000n, 7n, 0n)[0], WANT);
    // a fresh process: compile and call on this tier with the default 64 MiB memory, and (the
    // control, proving the probe sees such a collection) create an unshared 64 MiB memory after.
    // The optimised tier comes from a cache this process fills (as `berm compile` leaves it for a
    // CLI call): Binaryen, which translates it, has a large unshared memory of its own.
    let cacheDir: string | null = null;
    if (tier === 'optimized') {
      cacheDir = mkdtempSync(join(tmpdir(), 'berm-tiers-'));
      t.teardown(() => rmSync(cacheDir!, { recursive: true, force: true }));
      const filler = new Engine({ cacheDir, tier });
      await filler.compile(FNPTR);
      filler.cache!.flush(); // written now, before the child reads it
    }
    const script = [
      `import { Engine, Linker } from './src/engine/engine.ts';`,
      `const mod = await new Engine({ cacheDir: ${JSON.stringify(cacheDir)}, tier: '${tier}' }).compile(${JSON.stringify(FNPTR)});`,
      `if (mod.info.tier !== '${tier}' || mod.info.cached !== (${tier === 'optimized'})) throw new Error('not the ${tier} tier as expected');`,
      `const a0 = new Linker(mod.engine).instantiate(mod).call('fold', 1000n, 7n, 0n)[0];`,
      `console.log('CALLED ' + a0);`,
      `globalThis.kept = new WebAssembly.Memory({ initial: 1024, maximum: 1024 });`,
      `for (let i = 0; i < 200000; i++) globalThis.junk = { i };`,
      `console.log('CONTROL');`,
    ].join('\n');
    const out = execFileSync(
      process.execPath,
      [
        '--stack-size=4000',
        '--import=./scripts/ts/register.mjs',
        '--trace-gc',
        '--trace-incremental-marking',
        '--input-type=module',
        '-e',
        script,
      ],
      { cwd: ROOT, encoding: 'utf8' },
    );
    const [beforeCall, rest] = out.split(`CALLED ${WANT}\n`);
    t.ok(rest !== undefined, 'the child called the guest');
    t.notMatch(
      beforeCall,
      /external memory pressure/,
      'no collection for external memory before the first call returned',
    );
    t.match(rest, /external memory pressure/, 'the control (an unshared 64 MiB memory) does start one');
  });
}

// The other side of a shared memory counting as no external memory: slots dropped (a full pool,
// the swap to the optimised tier, an instance never disposed) must still be collected, or a
// process churning through instances (of either tier) keeps every dropped memory's pages resident.
// A fresh process: 80 rounds of 8 live instances (the pool keeps 4, so 320 memories are dropped),
// each with 3 MiB written; without a collection that is 960 MiB more resident memory.
for (const tier of ['baseline', 'optimized'] as const) {
  t.test(`${tier} tier: dropped shared memories are collected (resident memory stays bounded)`, async (t) => {
    const script = [
      `import { Engine, Linker } from './src/engine/engine.ts';`,
      `const engine = new Engine({ cacheDir: null, tier: '${tier}', memorySize: 4 << 20 });`,
      `const mod = await engine.compile(${JSON.stringify(FNPTR)});`,
      `const linker = new Linker(engine);`,
      `const bytes = new Uint8Array(3 << 20).fill(0x5a);`,
      `let first = 0;`,
      `for (let r = 0; r < 80; r++) {`,
      `  const live = [];`,
      `  for (let i = 0; i < 8; i++) {`,
      `    const inst = linker.instantiate(mod);`,
      `    if (!(inst.memory.memory.buffer instanceof SharedArrayBuffer)) throw new Error('not shared');`,
      `    inst.memory.write(mod.layout.heapStart, bytes);`,
      `    live.push(inst);`,
      `  }`,
      `  for (const inst of live) inst.dispose();`,
      `  if (r === 0) first = process.memoryUsage().rss;`,
      `}`,
      `console.log(JSON.stringify({ first, last: process.memoryUsage().rss }));`,
    ].join('\n');
    const out = execFileSync(
      process.execPath,
      ['--stack-size=4000', '--import=./scripts/ts/register.mjs', '--input-type=module', '-e', script],
      { cwd: ROOT, encoding: 'utf8' },
    );
    const { first, last } = JSON.parse(out.trim().split('\n').pop()!) as { first: number; last: number };
    const grown = (last - first) / 2 ** 20;
    // V8's soft limit for external memory is 64 MiB: a collection comes at the latest after ~16
    // dropped 4 MiB memories (80-150 MiB measured); 400 MiB leaves room for late collections
    t.ok(grown < 400, `resident memory grew ${grown.toFixed(0)} MiB over 79 rounds (316 memories dropped)`);
  });
}

// An instance live while the optimised tier is swapped in runs on to the end on its first tier
// (baseline, or lazy); its slot must not then go back to the pool, or every later instance of a
// caller making one at a time would take that slot and run the first tier forever (Instance.tier
// tells them apart).
for (const lazy of [false, true]) {
  const first = lazy ? 'lazy' : 'baseline';
  t.test(
    `auto: a ${first} instance disposed after the swap does not keep later instances on it`,
    async (t) => {
      const dir = mkdtempSync(join(tmpdir(), 'berm-tiers-'));
      t.teardown(() => rmSync(dir, { recursive: true, force: true }));
      const engine = new Engine({ cacheDir: dir, lazy });
      t.teardown(() => engine.close());
      const mod = await engine.compile(bytes);
      const linker = new Linker(engine);
      const live = linker.instantiate(mod);
      t.equal(live.tier, first, `the first instance is on the ${first} tier`);
      t.equal(await mod.optimized, true, 'the optimised tier was swapped in');
      t.equal(live.call('fold', 1000n, 7n, 0n)[0], WANT, 'the live instance still runs');
      live.dispose();
      for (let i = 0; i < 3; i++) {
        const next = linker.instantiate(mod);
        t.equal(next.tier, 'optimized', `instance ${i + 1} after the swap: optimised tier`);
        t.equal(next.call('fold', 1000n, 7n, 0n)[0], WANT);
        next.dispose();
      }
    },
  );
}

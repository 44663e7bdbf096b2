// The Wasm cache: keyed by content, atomic, self-checking; a warm compile never imports Binaryen.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cacheKey, WasmCache } from '../src/cache/cache.js';
import { Engine } from '../src/engine/engine.js';
import { fixtureElfs, ROOT } from './helpers/fixtures.js';

const raw = fixtureElfs().find((e) => e.source === 'raw.c' && e.compiler === 'clang' && e.opt === 'O2')!;

function child(dir: string, forbid: boolean, tier = 'optimized'): { cached: boolean; a0: string } {
  const args = ['--stack-size=4000', '--import=./scripts/ts/register.mjs'];
  if (forbid) args.push('--import=./test/helpers/forbid-binaryen.mjs');
  args.push('test/helpers/compile-once.ts', raw.path, dir, tier);
  return JSON.parse(execFileSync(process.execPath, args, { cwd: ROOT, encoding: 'utf8' }));
}

t.test('cold then warm in new processes; the warm one never imports binaryen', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'berm-cache-'));
  const cold = child(dir, false);
  t.same(cold, { cached: false, a0: '5' });
  const warm = child(dir, true);
  t.same(warm, { cached: true, a0: '5' });
  t.throws(
    () => child(mkdtempSync(join(tmpdir(), 'berm-cache-')), true),
    'a cold compile of the optimised tier needs binaryen (the guard works)',
  );
  // the baseline tier writes Wasm itself: a cold start never loads Binaryen on the main thread
  // (the guard also reaches the background worker, whose optimisation then fails quietly)
  t.same(child(mkdtempSync(join(tmpdir(), 'berm-cache-')), true, 'auto'), { cached: false, a0: '5' });
});

t.test('a corrupt or truncated entry is detected and rebuilt', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'berm-cache-'));
  const engine = new Engine({ cacheDir: dir });
  const first = await engine.compile(raw.path);
  t.equal(first.info.cached, false);
  const [file] = readdirSync(dir);
  const path = join(dir, file);
  const good = readFileSync(path);
  for (const bad of [
    good.subarray(0, good.length - 7),
    Buffer.concat([good.subarray(0, 60), Buffer.from([good[60] ^ 1]), good.subarray(61)]),
    Buffer.alloc(0),
  ]) {
    writeFileSync(path, bad);
    const again = await engine.compile(raw.path);
    t.equal(again.info.cached, false, 'a damaged entry is a miss');
    t.same(readFileSync(path), good, 'and is rewritten whole');
  }
  t.equal((await engine.compile(raw.path)).info.cached, true);
});

t.test('keys separate content and options', async (t) => {
  t.not(cacheKey(['ab', 'c']), cacheKey(['a', 'bc']), 'parts are length-prefixed');
  const a = new Engine({ cacheDir: null });
  const b = new Engine({ cacheDir: null, memorySize: 1 << 20 });
  const elf = new Uint8Array(readFileSync(raw.path));
  t.not(a.keyFor(elf), b.keyFor(elf), 'memory size is part of the key');
  const c = new WasmCache(mkdtempSync(join(tmpdir(), 'berm-cache-')));
  t.equal(c.get('0'.repeat(64)), null);
  t.ok(c.put('1'.repeat(64), new Uint8Array([1, 2, 3])));
  t.same(
    c.list().map((e) => e.key),
    ['1'.repeat(64)],
  );
  t.equal(c.clear(), 1);
  t.same(c.list(), []);
  t.throws(() => c.get('../etc/passwd'), /bad cache key/);
});

// Lazy validation of Wasm function bodies (src/engine/v8-flags.ts): with the engine loaded, V8
// defers a body's validation to its first call (a cached module's warm compile skips validating
// code the call never runs), a fresh translation is still validated whole, and a body that fails
// late throws a CompileError from the call instead of aborting the process.
import t from 'tap';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { hash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine, Linker } from '../src/engine/engine.js';
import { compileFresh, enableLazyValidation } from '../src/engine/v8-flags.js';
import { readUleb32 } from '../src/util/leb.js';
import { fixtureElfs } from './helpers/fixtures.js';

// (module (func (export "f") i32.const 0)): the body leaves a value a void function may not
// (core spec 3.3.1, instruction sequences), so V8 must refuse it when it validates the body
const BAD = new Uint8Array([
  0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, 1, 4, 1, 0x60, 0, 0, 3, 2, 1, 0, 7, 5, 1, 1, 0x66, 0, 0, 0x0a, 6, 1, 4, 0,
  0x41, 0, 0x0b,
]);
const onV8 = process.versions.v8.startsWith('11.');

t.test('applied on V8 11 only', async (t) => {
  t.equal(enableLazyValidation('11.3.244.8-node.38'), true);
  t.equal(enableLazyValidation('12.4.254.21-node.33'), false, 'not checked there: left alone');
  t.equal(enableLazyValidation('garbage'), false);
});

t.test(
  'deferred to the first call, which throws a CompileError',
  { skip: !onV8 && 'V8 11 only' },
  async (t) => {
    t.notOk(WebAssembly.validate(BAD), 'WebAssembly.validate still validates the bodies');
    const m = new WebAssembly.Module(BAD);
    const f = new WebAssembly.Instance(m).exports.f as () => void;
    t.throws(f, WebAssembly.CompileError, 'the call reaching the body');
    t.throws(f, /Compiling function #0 failed/, 'and every later one');
  },
);

t.test('a fresh translation is validated whole', async (t) => {
  t.throws(() => compileFresh(BAD), /Compiling function #0 failed/, "with V8's own message");
  t.ok(compileFresh(BAD.subarray(0, 8)) instanceof WebAssembly.Module, 'an empty module compiles');
  if (onV8) {
    // the flag is back on afterwards: a late failure still throws rather than aborting
    const f = new WebAssembly.Instance(new WebAssembly.Module(BAD)).exports.f as () => void;
    t.throws(f, WebAssembly.CompileError, 'the flag is on again');
  }
});

/**
 * `wasm` with every function body replaced by one of the same size that is all `nop`s: a body of
 * a function with results then leaves nothing to return and is invalid (core spec 3.3.1), while
 * the module's structure (types, imports, exports, section sizes) stays as it was.
 */
function hollowBodies(wasm: Uint8Array): Uint8Array {
  const out = new Uint8Array(wasm);
  let p = 8;
  while (p < out.length) {
    const id = out[p++];
    const [size, at] = readUleb32(out, p)!;
    if (id === 10) {
      let [count, q] = readUleb32(out, at)!;
      for (; count > 0; count--) {
        const [len, start] = readUleb32(out, q)!;
        out[start] = 0; // no local declarations
        out.fill(0x01, start + 1, start + len - 1); // nop
        out[start + len - 1] = 0x0b; // end
        q = start + len;
      }
    }
    p = at + size;
  }
  return out;
}

t.test('a forged cache entry fails its call with a CompileError, not the process', async (t) => {
  const raw = fixtureElfs().find((e) => e.source === 'raw.c' && e.compiler === 'clang' && e.opt === 'O2')!;
  const dir = mkdtempSync(join(tmpdir(), 'berm-lazy-'));
  const engine = new Engine({ cacheDir: dir, tier: 'optimized' });
  await engine.compile(raw.path);
  await new Promise<void>((resolve) => setImmediate(resolve)); // the entry is written after the turn
  const name = readdirSync(dir).find((f) => f.endsWith('.wasm'))!;
  const good = readFileSync(join(dir, name)).subarray(8 + 16 + 64);
  const forged = hollowBodies(good);
  t.notOk(WebAssembly.validate(forged), 'the forged module is invalid');
  // with a header that matches: the entry passes the cache's sha256 check, only V8 can judge it
  const head = `BERMWC02${forged.length.toString(16).padStart(16, '0')}${hash('sha256', forged, 'hex')}`;
  writeFileSync(join(dir, name), Buffer.concat([Buffer.from(head), forged]));
  const mod = await new Engine({ cacheDir: dir, tier: 'optimized' }).compile(raw.path);
  const call = () => new Linker(mod.engine).instantiate(mod).call('raw_add', 2n, 3n);
  if (onV8) {
    t.equal(mod.info.cached, true, 'compiled from the cache without validating the bodies');
    t.throws(call, WebAssembly.CompileError, 'the first call of a forged body throws');
  } else {
    t.equal(mod.info.cached, false, 'refused by V8 at compile: a miss, translated again');
    t.same(call(), [5n]);
  }
});

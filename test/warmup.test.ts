// The engine's background warm-up compile (src/engine/warmup.ts): its module is valid Wasm whose
// function import and export have exactly the signatures a translated guest module's imports and
// entry stubs have (read from a module the baseline translator writes for a fixture, so a change of
// the guest ABI that leaves the warm-up module behind fails here), and it starts once per process.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { readElf } from '../src/elf/reader.js';
import { warmupModuleBytes, warmWrapperCompiler } from '../src/engine/warmup.js';
import { translateBaseline } from '../src/translate/baseline.js';
import { DEFAULT_TRANSLATE_OPTIONS, Exports, IMPORT_MODULE, Imports } from '../src/translate/abi.js';
import { fixtureElfs } from './helpers/fixtures.js';

/** A function type as text, e.g. `7f7f7f7f->7c` (value type bytes, core spec 5.3). */
interface Parsed {
  types: string[];
  imports: { module: string; name: string; type: string }[];
  exports: { name: string; type: string }[];
}

/** The function types of a module's function imports and exports (core spec 5.5 sections 1, 2, 3, 7). */
function parse(wasm: Uint8Array): Parsed {
  let p = 8;
  const u = (): number => {
    let r = 0;
    let s = 0;
    let b: number;
    do {
      b = wasm[p++];
      r += (b & 127) * 2 ** s;
      s += 7;
    } while (b & 128);
    return r;
  };
  const str = (): string => {
    const n = u();
    p += n;
    return Buffer.from(wasm.subarray(p - n, p)).toString('latin1');
  };
  const hex = (n: number): string => {
    p += n;
    return Buffer.from(wasm.subarray(p - n, p)).toString('hex');
  };
  const out: Parsed = { types: [], imports: [], exports: [] };
  const funcTypes: number[] = [];
  const exported: { name: string; index: number }[] = [];
  while (p < wasm.length) {
    const id = wasm[p++];
    const size = u();
    const end = p + size;
    if (id === 1) {
      for (let n = u(); n > 0; n--) {
        if (wasm[p++] !== 0x60) throw new Error('not a function type');
        const params = hex(u());
        const results = hex(u());
        out.types.push(`${params}->${results}`);
      }
    } else if (id === 2) {
      for (let n = u(); n > 0; n--) {
        const module = str();
        const name = str();
        const kind = wasm[p++];
        if (kind === 0) {
          const type = u();
          funcTypes.push(type);
          out.imports.push({ module, name, type: out.types[type] });
        } else if (kind === 2) {
          const flags = wasm[p++];
          u();
          if (flags & 1) u();
        } else throw new Error(`import kind ${kind}`);
      }
    } else if (id === 3) {
      for (let n = u(); n > 0; n--) funcTypes.push(u());
    } else if (id === 7) {
      for (let n = u(); n > 0; n--) {
        const name = str();
        const kind = wasm[p++];
        const index = u();
        if (kind === 0) exported.push({ name, index });
      }
    }
    p = end;
  }
  out.exports = exported.map((e) => ({ name: e.name, type: out.types[funcTypes[e.index]] }));
  return out;
}

t.test('the warm-up module has the signatures of a guest module', async (t) => {
  const bytes = warmupModuleBytes();
  t.ok(WebAssembly.validate(bytes), 'V8 accepts it');
  const fixture = fixtureElfs().find(
    (e) => e.source === 'raw.c' && e.compiler === 'clang' && e.opt === 'O2',
  )!;
  const image = readElf(new Uint8Array(readFileSync(fixture.path)));
  const guest = parse(translateBaseline(image, DEFAULT_TRANSLATE_OPTIONS).wasm);
  const warm = parse(bytes);
  const ecall = guest.imports.find((i) => i.module === IMPORT_MODULE && i.name === Imports.ecall)!;
  t.ok(ecall, 'the guest imports ecall');
  t.same(new Set(guest.imports.map((i) => i.type)), new Set([ecall.type]), 'one import signature');
  t.same(
    warm.imports.map((i) => i.type),
    [ecall.type],
  );
  const stubs = guest.exports.filter((e) => e.name.startsWith(Exports.entryPrefix));
  t.ok(stubs.length > 0, 'the guest exports entry stubs');
  t.same(new Set(stubs.map((e) => e.type)), new Set([stubs[0].type]), 'one entry signature');
  t.same(
    warm.exports.map((e) => e.type),
    [stubs[0].type],
  );
  t.equal(ecall.type, '7f7f7f7f->7c', '(i32 x 4) -> f64');
  t.equal(stubs[0].type, '7e7e7e7e7e7e7e7e->7e7e', '(i64 x 8) -> (i64, i64)');
});

t.test('it runs: the export returns two zeros; the background compile starts once', async (t) => {
  const m = new WebAssembly.Module(warmupModuleBytes());
  const i = new WebAssembly.Instance(m, { berm: { h: () => 0 } });
  t.same((i.exports.e as (...a: bigint[]) => bigint[])(1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n), [0n, 0n]);
  // importing the engine elsewhere in this process may have started it already
  warmWrapperCompiler();
  t.equal(warmWrapperCompiler(), false, 'a second call does nothing');
});

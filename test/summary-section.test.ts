// The image summary as a Wasm custom section (src/engine/summary-section.ts), checked against V8's
// own reading of custom sections (WebAssembly.Module.customSections, JS API spec).
import t from 'tap';
import { appendSummary, findSummary, SUMMARY_SECTION } from '../src/engine/summary-section.js';

const customSections = (
  WebAssembly.Module as unknown as { customSections(m: WebAssembly.Module, name: string): ArrayBuffer[] }
).customSections;
// the empty module (magic, version 1) and one with a type section and another custom section
const EMPTY = new Uint8Array([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00]);
const OTHER = new Uint8Array([
  ...EMPTY,
  ...[0x01, 0x04, 0x01, 0x60, 0x00, 0x00], // type section: one type, () -> ()
  ...[0x00, 0x04, 0x01, 0x78, 0xaa, 0xbb], // custom section "x" with two bytes
]);

t.test('appended, V8 sees the section and the module is unchanged otherwise', async (t) => {
  for (const [base, text] of [
    [EMPTY, ''],
    [EMPTY, 'short'],
    [OTHER, 'é'.repeat(200)], // 400 bytes of UTF-8: a two-byte length
    [OTHER, 'x'.repeat(20_000)], // a three-byte length
  ] as const) {
    const wasm = appendSummary(base, text);
    t.ok(WebAssembly.validate(wasm), 'valid');
    const mod = new WebAssembly.Module(wasm);
    const seen = customSections(mod, SUMMARY_SECTION);
    t.equal(seen.length, 1);
    t.equal(Buffer.from(seen[0]).toString('utf8'), text, 'V8 reads the same text');
    t.equal(customSections(mod, 'x').length, base === OTHER ? 1 : 0, 'the other section kept');
    t.same(findSummary(wasm), { text, moduleBytes: base.length });
  }
});

t.test('absent or damaged: null', async (t) => {
  t.equal(findSummary(EMPTY), null);
  t.equal(findSummary(OTHER), null, 'another custom section is not it');
  const wasm = appendSummary(OTHER, 'abc');
  t.equal(findSummary(wasm.subarray(0, wasm.length - 1)), null, 'truncated');
  const bad = new Uint8Array([...EMPTY, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff]);
  t.equal(findSummary(bad), null, 'a length over 32 bits');
});

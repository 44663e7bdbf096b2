// The optimising tier's branch hint section (src/translate/hints.ts): read back by Binaryen's own
// binary reader (an independent implementation of the branch hinting proposal's format), every
// hint is "unlikely" on an `if` whose then-arm calls the poll or trap import (or the module's helper
// for it), and every such `if`
// is hinted; the module validates and runs the same; the engine turns V8's reading of the section
// on (src/engine/v8-flags.ts).
import t from 'tap';
import binaryen from 'binaryen';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readElf } from '../src/elf/reader.js';
import { DEFAULT_TRANSLATE_OPTIONS } from '../src/translate/abi.js';
import { translate } from '../src/translate/module.js';
import { addBranchHints, BRANCH_HINT_SECTION } from '../src/translate/hints.js';
import { enableBranchHints, enableWasmInlining, wasmInliningRefused } from '../src/engine/v8-flags.js';
import { Engine, Linker } from '../src/engine/engine.js';
import { ROOT } from './helpers/fixtures.js';

const HINT = '(@metadata.code.branch_hint "\\00")';

/** The text from `open` (an opening parenthesis) to its matching close. */
function sexpr(text: string, open: number): string {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === '(') depth++;
    else if (text[i] === ')' && --depth === 0) return text.slice(open, i + 1);
  }
  throw new Error('unbalanced');
}
/** The `(then ...)` arm of an `(if ...)` expression (its direct child). */
function thenArm(ifText: string): string {
  let depth = 0;
  for (let i = 0; i < ifText.length; i++) {
    if (ifText[i] === '(') {
      if (depth === 1 && ifText.startsWith('(then', i)) return sexpr(ifText, i);
      depth++;
    } else if (ifText[i] === ')') depth--;
  }
  throw new Error('if without then');
}

for (const name of ['compute-gcc-O2.elf', 'raw-gcc-O0.elf']) {
  t.test(`${name}: the poll and trap arms are hinted unlikely, nothing else`, async (t) => {
    const image = readElf(new Uint8Array(readFileSync(join(ROOT, 'fixtures', 'build', name))));
    const wasm = translate(image, DEFAULT_TRANSLATE_OPTIONS).wasm;
    t.ok(WebAssembly.validate(wasm), 'validates');
    // (customSections is missing from TypeScript's lib typing of WebAssembly.Module)
    const sections = (
      WebAssembly.Module as unknown as { customSections(m: object, n: string): ArrayBuffer[] }
    ).customSections;
    t.equal(sections(new WebAssembly.Module(wasm), BRANCH_HINT_SECTION).length, 1, 'one hint section');
    t.equal(addBranchHints(wasm), wasm, 'a hinted module is left as it is');

    const bm = binaryen.readBinary(wasm);
    const text = bm.emitText();
    bm.dispose();
    // the imports' names in the text (the name section names only the module's own functions)
    const importName = (field: string): string =>
      new RegExp(`\\(import "berm" "${field}" \\(func (\\$\\S+)`).exec(text)![1];
    // translated code calls the imports through the module's helpers (image.ts addImportHelpers)
    for (const helper of ['$trap', '$poll']) t.ok(text.includes(`(func ${helper} `), `helper ${helper}`);
    const coldCall = new RegExp(
      `\\(call (${[importName('poll'), importName('trap'), '$trap', '$poll'].map((n) => n.replace(/\$/g, '\\$')).join('|')})\\s`,
    );
    let hinted = 0;
    let cold = 0;
    let wrong = 0;
    let missed = 0;
    for (let i = text.indexOf('(if'); i >= 0; i = text.indexOf('(if', i + 1)) {
      if (!/^\(if[\s(]/.test(text.slice(i, i + 4))) continue;
      const isHinted = text.slice(0, i).trimEnd().endsWith(HINT);
      const arm = thenArm(sexpr(text, i));
      // a direct call in the arm (a nested `if`'s own arm counts for that `if` too)
      const callsCold = coldCall.test(arm);
      if (isHinted) hinted++;
      if (callsCold) cold++;
      if (isHinted && !callsCold) wrong++;
      if (callsCold && !isHinted && !/\(if[\s(]/.test(arm)) missed++;
    }
    t.equal(text.split(HINT).length - 1, hinted, 'every hint stands on an if');
    t.ok(hinted > 10, `hints present (${hinted} of ${cold} ifs with a cold call)`);
    t.equal(wrong, 0, 'no hint on an if whose then-arm calls neither poll nor trap');
    t.equal(missed, 0, 'every if whose then-arm calls poll or trap (and holds no other if) is hinted');
    t.notOk(text.includes('branch_hint "\\01"'), 'no likely hints');
  });
}

t.test('the engine turns on V8 branch hints where V8 needs the flag', async (t) => {
  t.equal(enableBranchHints('11.3.244.8-node.38'), true, 'V8 11 (Node 20)');
  t.equal(enableBranchHints('12.4.254.21-node.33'), true, 'V8 12 (Node 22)');
  t.equal(enableBranchHints('13.6.233.10-node.24'), false, 'V8 13.6 reads hints by default');
  t.equal(enableBranchHints('garbage'), false, 'unknown version: left alone');
  // Wasm inlining: only on the V8 it was measured on
  t.equal(enableWasmInlining('11.3.244.8-node.38'), true, 'V8 11 (Node 20): inlining on');
  t.equal(enableWasmInlining('12.4.254.21-node.33'), false, 'V8 12: left at its default');
  t.equal(enableWasmInlining('garbage'), false, 'unknown version: left alone');
  t.equal(enableWasmInlining('11.3.244.8-node.38', true), false, 'V8 11, refused: left alone');
  t.equal(wasmInliningRefused([], {}), false, 'nothing said: not refused');
  t.equal(wasmInliningRefused(['--no-wasm-inlining'], {}), true, "node's --no-wasm-inlining");
  t.equal(
    wasmInliningRefused(['--stack-size=4000', '--no-wasm_inlining'], {}),
    true,
    'the underscore spelling',
  );
  t.equal(wasmInliningRefused([], { BERM_WASM_INLINING: '0' }), true, 'BERM_WASM_INLINING=0');
  t.equal(wasmInliningRefused(['--wasm-inlining'], { BERM_WASM_INLINING: '1' }), false, 'asked for');
  // the hinted compute fixture returns native gcc's fib(20) = 6765 (fib_rec counts from fib(0) = 0)
  const engine = new Engine({ cacheDir: null, tier: 'optimized' });
  const mod = await engine.compile(join(ROOT, 'fixtures', 'build', 'compute-gcc-O2.elf'));
  t.equal(new Linker(engine).instantiate(mod).call('fib_rec', 20n)[0], 6765n, 'fib_rec(20)');
});

t.test('bytes the reader does not decode leave the module unchanged', async (t) => {
  const junk = new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, 10, 5, 1, 3, 0, 0xff, 0x0b]);
  t.equal(addBranchHints(junk), junk);
  const truncated = new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, 10, 0x80]);
  t.equal(addBranchHints(truncated), truncated);
});

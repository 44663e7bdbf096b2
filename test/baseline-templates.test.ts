// The baseline tier's one-pass templates (translate/direct.ts) write the bytes the general lowering
// writes through ByteModule: every ELF of the repository (fixtures/, test/data/) is translated with
// the instruction templates on and off, and the two Wasm binaries must be byte-identical. A change
// to a template or to the lowering that makes them differ fails here, naming the ELF.
import t from 'tap';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { readElf } from '../src/elf/reader.js';
import { DEFAULT_TRANSLATE_OPTIONS } from '../src/translate/abi.js';
import { translateBaseline } from '../src/translate/baseline.js';
import { DirectWriter } from '../src/translate/direct.js';
import { oneRunTemplates } from '../src/translate/emit.js';

const ROOT = resolve(import.meta.dirname, '..');

function elfsUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const st = statSync(p);
    if (st.isDirectory()) out.push(...elfsUnder(p));
    else if (st.size > 4) {
      const head = readFileSync(p).subarray(0, 4);
      if (head[0] === 0x7f && head[1] === 0x45 && head[2] === 0x4c && head[3] === 0x46) out.push(p);
    }
  }
  return out.sort();
}

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

t.test('the instruction templates write what the general lowering writes, for every ELF', async (t) => {
  const elfs = [...elfsUnder(join(ROOT, 'fixtures')), ...elfsUnder(join(ROOT, 'test', 'data'))];
  t.ok(elfs.length >= 40, `${elfs.length} ELFs found`);
  // count the templates written, so the comparison cannot pass by the switch doing nothing
  const proto = DirectWriter.prototype as unknown as { regImm: (...a: unknown[]) => unknown };
  const regImm = proto.regImm;
  let written = 0;
  proto.regImm = function (this: unknown, ...a: unknown[]) {
    written++;
    return regImm.apply(this, a);
  };
  t.teardown(() => {
    proto.regImm = regImm;
  });
  let templated = 0;
  let writtenOn = 0;
  let writtenOff = 0;
  for (const path of elfs) {
    const image = readElf(new Uint8Array(readFileSync(path)));
    oneRunTemplates.instructions = true;
    written = 0;
    const fast = translateBaseline(image, DEFAULT_TRANSLATE_OPTIONS).wasm;
    writtenOn += written;
    oneRunTemplates.instructions = false;
    written = 0;
    let general: Uint8Array;
    try {
      general = translateBaseline(image, DEFAULT_TRANSLATE_OPTIONS).wasm;
    } finally {
      oneRunTemplates.instructions = true;
    }
    writtenOff += written;
    if (sha(fast) !== sha(general)) t.fail(`${relative(ROOT, path)}: the two paths differ`);
    else templated++;
  }
  t.equal(templated, elfs.length, 'every ELF byte-identical both ways');
  t.ok(writtenOn > 1000, `the templates wrote ${writtenOn} register-immediate instructions`);
  t.equal(writtenOff, 0, 'with the switch off, no instruction went through a template');
});

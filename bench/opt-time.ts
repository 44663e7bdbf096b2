/**
 * The optimising tier's cost per ELF: `translate()` (Binaryen build, optimise, emit) in this
 * process, printing the optimiser's wall time, the process CPU time of the whole translation (a
 * shared machine disturbs it far less than wall time) and the optimised module's bytes. The first
 * ELF also pays compiling Binaryen itself.
 *   node --stack-size=4000 --import ./scripts/ts/register.mjs bench/opt-time.ts ELF...
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { readElf } from '../src/elf/reader.js';
import { DEFAULT_TRANSLATE_OPTIONS } from '../src/translate/abi.js';
import { translate } from '../src/translate/module.js';

for (const path of process.argv.slice(2)) {
  const image = readElf(new Uint8Array(readFileSync(path)));
  const c0 = process.cpuUsage();
  const t = translate(image, DEFAULT_TRANSLATE_OPTIONS);
  const c = process.cpuUsage(c0);
  const cpu = (c.user + c.system) / 1e6;
  console.log(
    `${basename(path)}: optimise ${(t.timings.optimize / 1000).toFixed(2)} s wall, translate ${cpu.toFixed(2)} s CPU, ${t.wasm.length} bytes`,
  );
}

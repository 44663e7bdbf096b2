// Decoder speed: every instruction in the executable segments of fixtures/build/*.elf decoded ten
// times per round, 15 rounds; prints ns per decode (median and best round). Further arguments name
// other decoder modules (exporting `decode(bits)`) measured in the same rounds, interleaved, so
// that a change is judged against its baseline on the same machine load:
//   node --import ./scripts/ts/register.mjs bench/decode.ts [/path/to/other/decode.ts ...]
import { readdirSync, readFileSync } from 'node:fs';
import { readElf } from '../src/elf/reader.js';
import * as table from '../src/riscv/decode.js';

type Decoder = { decode(bits: number): { size: number } };
const decoders: [string, Decoder][] = [['src/riscv/decode.ts', table]];
for (const path of process.argv.slice(2)) decoders.push([path, (await import(path)) as Decoder]);

const dir = new URL('../fixtures/build/', import.meta.url);
const words: number[] = [];
for (const name of readdirSync(dir).filter((n) => n.endsWith('.elf'))) {
  for (const seg of readElf(readFileSync(new URL(name, dir))).segments) {
    if ((seg.flags & 1) === 0) continue;
    const d = seg.data.subarray(0, seg.filesz);
    for (let o = 0; o + 1 < d.length;) {
      const lo = d[o] | (d[o + 1] << 8);
      if ((lo & 3) !== 3) {
        words.push(lo);
        o += 2;
      } else {
        if (o + 3 >= d.length) break;
        words.push((lo | (d[o + 2] << 16) | (d[o + 3] << 24)) >>> 0);
        o += 4;
      }
    }
  }
}
const code = Uint32Array.from(words);
let sink = 0;
const rounds: number[][] = decoders.map(() => []);
for (let r = 0; r < 15; r++) {
  decoders.forEach(([, d], j) => {
    const t0 = process.hrtime.bigint();
    for (let k = 0; k < 10; k++) for (let i = 0; i < code.length; i++) sink += d.decode(code[i]).size;
    rounds[j].push(Number(process.hrtime.bigint() - t0) / (10 * code.length));
  });
}
decoders.forEach(([name], j) => {
  const s = rounds[j].sort((a, b) => a - b);
  console.log(
    `${name}: ${code.length} instructions, ns/decode median ${s[7].toFixed(1)}, best ${s[0].toFixed(1)}`,
  );
});
if (sink === 0) console.log('(no instructions)');

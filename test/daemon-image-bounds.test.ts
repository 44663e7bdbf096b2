// bermd's translation bounds (--max-code-bytes, --max-symbols, --max-relocations): a deploy over
// one is refused with 413 naming the bound, the image's figure and the limit, before anything is
// translated, and a stored image over a lowered bound is reported at restart, not served. The
// figures an image has come from binutils' readelf (an independent reader), not from berm's.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { elfTableSizes } from '../src/elf/reader.js';
import { REPO, elf, testDaemon } from './helpers/daemon.js';

const BIG = 'fixtures/big/big-gcc-O2.elf';
const BIG_BYTES = elf(BIG);

/** readelf's figures: .symtab entries, RELA entries, and the bytes of the sized FUNC symbols. */
function readelfFigures(file: string): { symbols: number; relocations: number; code: number } {
  const sections = execFileSync('readelf', ['--section-headers', '--wide', join(REPO, file)], {
    encoding: 'utf8',
  });
  let symbols = 0;
  let relocations = 0;
  // "  [11] .symtab  SYMTAB  0000000000000000 01c0a8 023538 18  12 6017  8"
  for (const m of sections.matchAll(
    /\]\s+\S+\s+(SYMTAB|RELA)\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)/g,
  )) {
    const entries = parseInt(m[2]!, 16) / parseInt(m[3]!, 16);
    if (m[1] === 'SYMTAB') symbols += entries;
    else relocations += entries;
  }
  const syms = execFileSync('readelf', ['--symbols', '--wide', join(REPO, file)], { encoding: 'utf8' });
  // "  1234: 0000000000010120    42 FUNC    GLOBAL DEFAULT    1 name": one function per address
  const functions = new Map<string, number>();
  for (const m of syms.matchAll(/^\s*\d+:\s+([0-9a-f]+)\s+(0x[0-9a-f]+|\d+)\s+FUNC\s/gm)) {
    const size = Number(m[2]);
    if (size > 0) functions.set(m[1]!, Math.max(functions.get(m[1]!) ?? 0, size));
  }
  let code = 0;
  for (const s of functions.values()) code += s;
  return { symbols, relocations, code };
}

const want = readelfFigures(BIG);

t.test('the header counts are what readelf lists', async (t) => {
  t.ok(want.symbols > 1000 && want.relocations > 10_000 && want.code > 100_000, JSON.stringify(want));
  t.same(elfTableSizes(BIG_BYTES), { symbols: want.symbols, relocations: want.relocations });
  t.equal(
    elfTableSizes(Buffer.from('not an ELF at all, but longer than sixty-four bytes.............')),
    null,
  );
  // any damage to the headers it reads: a count or null, never a throw (the reader names it next)
  const shoff = Number(BIG_BYTES.readBigUInt64LE(40));
  let seed = 12345;
  const rand = (n: number): number => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  let bad = 0;
  let nulls = 0;
  for (let i = 0; i < 3000; i++) {
    const b = Buffer.from(BIG_BYTES);
    const at = i % 2 === 0 ? rand(64) : shoff + rand(BIG_BYTES.length - shoff);
    b[at] = rand(256);
    const r = elfTableSizes(b);
    const most = Math.floor(b.length / 24);
    if (r === null) nulls++;
    else if (![r.symbols, r.relocations].every((n) => Number.isSafeInteger(n) && n >= 0 && n <= most)) bad++;
  }
  t.equal(bad, 0, 'a damaged header gives null or counts of tables inside the file');
  t.ok(nulls > 0 && nulls < 3000, `${nulls} damaged headers left to the reader`);
});

t.test('a deploy over a bound is 413 naming it, and one at the bound is served', async (t) => {
  const cases = [
    { flag: 'maxCodeBytes', limit: 'max-code-bytes', actual: want.code },
    { flag: 'maxSymbols', limit: 'max-symbols', actual: want.symbols },
    { flag: 'maxRelocations', limit: 'max-relocations', actual: want.relocations },
  ] as const;
  for (const c of cases) {
    const d = await testDaemon({ [c.flag]: String(c.actual - 1) });
    t.teardown(() => d.stop());
    t.ok(d.logs.some((l) => new RegExp(`${c.limit} +${c.actual - 1} +\\(flag --${c.limit}\\)`).test(l)));
    const r = await d.req('/harnesses/big', { method: 'PUT', body: BIG_BYTES });
    t.equal(r.status, 413, c.limit);
    const body = (await r.json()) as { error: string; limit: string; actual: number; max: number };
    t.same(
      { limit: body.limit, actual: body.actual, max: body.max },
      {
        limit: c.limit,
        actual: c.actual,
        max: c.actual - 1,
      },
    );
    t.match(
      body.error,
      new RegExp(`has ${c.actual} .* over the limit of ${c.actual - 1} \\(--${c.limit}\\)`),
    );
    t.equal((await d.req('/harnesses/big')).status, 404, 'nothing published');
    await d.stop();
  }
  // each bound is inclusive: an image exactly at all three is served
  const d = await testDaemon({
    maxCodeBytes: String(want.code),
    maxSymbols: String(want.symbols),
    maxRelocations: String(want.relocations),
  });
  t.teardown(() => d.stop());
  const ok = await d.req('/harnesses/big', { method: 'PUT', body: BIG_BYTES });
  t.equal(ok.status, 200, await ok.text());
});

t.test('a stored image over a lowered bound is reported at restart, not served', async (t) => {
  const d = await testDaemon();
  t.equal((await d.req('/harnesses/big', { method: 'PUT', body: BIG_BYTES })).status, 200);
  await d.stop();
  const d2 = await testDaemon({ maxCodeBytes: '64K' }, {}, d.root);
  t.teardown(() => d2.stop());
  t.ok(
    d2.logs.some((l) =>
      /warning: harness big \(sha256 [0-9a-f]{64}\) not restored: the image has \d+ bytes of code in functions, over the limit of 65536 \(--max-code-bytes\)/.test(
        l,
      ),
    ),
    d2.logs.join('\n'),
  );
  t.equal((await d2.req('/harnesses/big')).status, 404);
});

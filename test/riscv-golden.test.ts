// berm's disassembler against llvm-objdump 14's listings committed under test/golden/ (produced by
// scripts/update-golden.sh; llvm is not needed to run this test).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import t from 'tap';
import { compareListing } from './helpers/golden-listing.js';

const dir = new URL('./golden/', import.meta.url);

function check(name: string, elf: URL, listing: URL): void {
  t.test(name, async (t) => {
    const { checked, diffs } = compareListing(readFileSync(elf), readFileSync(listing, 'utf8'));
    t.ok(checked > 0, `${checked} lines compared`);
    t.same(diffs.slice(0, 30), [], `${diffs.length} differences`);
  });
}

check('all encodings', new URL('all-encodings.elf', dir), new URL('all-encodings.txt', dir));

// Listings of the SDK fixture ELFs (fixtures/build/, committed by the fixtures build).
const fixtures = new URL('fixtures/', dir);
const builds = new URL('../fixtures/build/', import.meta.url);
if (existsSync(fixtures)) {
  for (const f of readdirSync(fixtures).filter((n) => n.endsWith('.txt'))) {
    const base = f.slice(0, -4);
    const elf = new URL(`${base}.elf`, builds);
    if (existsSync(elf)) check(`fixture ${base}`, elf, new URL(f, fixtures));
    else t.comment(`skipped fixture ${base}: fixtures/build/${base}.elf is missing`);
  }
}

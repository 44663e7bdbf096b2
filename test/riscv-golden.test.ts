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
// Both are committed: a missing listing or ELF fails rather than skips.
const listings = readdirSync(fixtures).filter((n) => n.endsWith('.txt'));
t.ok(listings.length >= 40, `${listings.length} fixture listings`);
for (const f of listings) {
  const base = f.slice(0, -4);
  const elf = new URL(`${base}.elf`, builds);
  t.ok(existsSync(elf), `fixtures/build/${base}.elf exists`);
  if (existsSync(elf)) check(`fixture ${base}`, elf, new URL(f, fixtures));
}

// The catalog's search (an n-gram filter, then a substring check) against a plain implementation
// of the rule it must keep: a case-insensitive substring of the reference, the usage, a tool's
// name or a tool's description, over the visible entries in catalog order; the empty term lists
// all. A generated corpus (fixed seeds, more entries than one filter segment) with mixed-case and
// non-ASCII text, taken-down entries, and random terms: substrings of the text (hits), random
// strings (mostly misses), one and two code units, non-ASCII ones, the empty term; every term also
// paged with a random limit, the pages joined must be the whole result.
import t from 'tap';
import { Catalog } from '../src/index/catalog.js';
import type { IndexEntry } from '../src/index/entry.js';
import { SEGMENT_ENTRIES } from '../src/index/grams.js';

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296;
  };
}

// letters with case pairs that change length or depend on context when lowercased (İ, Σ), a
// letter outside the BMP (a surrogate pair), CJK, and the separators a reference holds
const ALPHABET = [
  ...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ',
  'é',
  'É',
  'ß',
  'Σ',
  'σ',
  'ς',
  'İ',
  'ı',
  '中',
  '😀',
  ' ',
  '-',
  '_',
  '/',
  ':',
  '.',
];

function plainSearch(all: IndexEntry[], hidden: Set<IndexEntry>, term: string): IndexEntry[] {
  const l = term.toLowerCase();
  return all.filter(
    (e) =>
      !hidden.has(e) &&
      (e.reference.toLowerCase().includes(l) ||
        e.usage.toLowerCase().includes(l) ||
        e.tools.some((x) => x.name.toLowerCase().includes(l) || x.description.toLowerCase().includes(l))),
  );
}

t.test('search equals the plain substring rule, paged or not', async (t) => {
  const r = rng(7);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  // a skewed alphabet: mostly a few letters, so terms of three and more hit often
  const text = (len: number): string => {
    let s = '';
    for (let i = 0; i < len; i++) s += r() < 0.7 ? pick(['a', 'b', 'c', 'E', 'o', ' ']) : pick(ALPHABET);
    return s;
  };
  const n = 2 * SEGMENT_ENTRIES + 123;
  const c = new Catalog();
  const all: IndexEntry[] = [];
  for (let i = 0; i < n; i++) {
    const e: IndexEntry = {
      reference: `ghcr.io/${text(3)}/h${i}:v${i % 4}`,
      digest: 'sha256:' + i.toString(16).padStart(64, '0'),
      usage: text(Math.floor(r() * 30)),
      tools: Array.from({ length: Math.floor(r() * 3) }, () => ({
        name: text(4),
        description: text(Math.floor(r() * 25)),
        parameters: {},
      })),
    };
    all.push(e);
    c.add(e);
  }
  const hidden = new Set<IndexEntry>();
  for (let k = 0; k < 300; k++) {
    const e = pick(all);
    if (c.hide(e.reference, e.digest)) hidden.add(e);
  }
  t.ok(hidden.size > 250, 'some entries taken down');

  const terms: string[] = [
    '',
    'Σ',
    'σ',
    'ς',
    'i̇',
    'İ',
    'ß',
    'SS',
    '😀',
    '\ud83d',
    'é',
    'É',
    'h1',
    'H12',
    ':v3',
  ];
  for (let k = 0; k < 400; k++) {
    const kind = k % 5;
    if (kind === 0) {
      // a piece of some entry's text, case flipped at random: a hit (unless taken down)
      const e = pick(all);
      const field = pick([e.reference, e.usage, ...e.tools.flatMap((x) => [x.name, x.description])]);
      const at = Math.floor(r() * field.length);
      const piece = field.slice(at, at + 1 + Math.floor(r() * 6));
      terms.push(r() < 0.5 ? piece.toUpperCase() : piece);
    } else if (kind === 1) terms.push(text(1));
    else if (kind === 2) terms.push(text(2));
    else terms.push(text(3 + Math.floor(r() * 5)));
  }
  // for each non-ASCII letter: pieces of entries' text of one to four code units that start or end
  // at it (hits the generated terms would seldom make)
  const texts = all.flatMap((e) => [
    e.reference,
    e.usage,
    ...e.tools.flatMap((x) => [x.name, x.description]),
  ]);
  for (const ch of ALPHABET.filter((a) => a.charCodeAt(0) > 0x7f)) {
    const holding = texts.filter((s) => s.includes(ch));
    for (let len = 1; len <= 4; len++) {
      const s = pick(holding);
      const at = s.indexOf(ch);
      terms.push(s.slice(at, at + len), s.slice(Math.max(0, at + ch.length - len), at + ch.length));
    }
  }
  let matched = 0;
  for (const term of terms) {
    const want = plainSearch(all, hidden, term);
    matched += want.length > 0 ? 1 : 0;
    const got = c.search(term).entries;
    if (got.length !== want.length || got.some((e, i) => e !== want[i])) {
      t.fail(`term ${JSON.stringify(term)}: ${got.length} entries, the plain rule ${want.length}`);
      continue;
    }
    // the same result in pages of a random size
    const limit = 1 + Math.floor(r() * 40);
    const pages: IndexEntry[] = [];
    let cursor: string | undefined;
    let count = 0;
    do {
      const p = c.search(term, { limit, cursor });
      if (p.entries.length > limit) t.fail(`term ${JSON.stringify(term)}: a page over its limit`);
      pages.push(...p.entries);
      cursor = p.next;
    } while (cursor !== undefined && ++count < 10_000);
    if (pages.length !== want.length || pages.some((e, i) => e !== want[i]))
      t.fail(
        `term ${JSON.stringify(term)}: pages of ${limit} hold ${pages.length}, the plain rule ${want.length}`,
      );
  }
  t.ok(matched > terms.length / 3, `${matched} of ${terms.length} terms match something`);
  t.ok(matched < terms.length, 'some terms match nothing');
  t.pass(`${terms.length} terms compared`);
});

t.test('entries added after a search are found, and a cursor stays valid across adds', async (t) => {
  const c = new Catalog();
  const mk = (i: number, usage: string): IndexEntry => ({
    reference: `r.io/o/h${i}:v1`,
    digest: 'sha256:' + i.toString(16).padStart(64, '0'),
    usage,
    tools: [],
  });
  for (let i = 0; i < 100; i++) c.add(mk(i, i % 10 === 0 ? 'needle here' : 'hay'));
  const first = c.search('NEEDLE', { limit: 5 });
  t.equal(first.entries.length, 5);
  for (let i = 100; i < 5000; i++) c.add(mk(i, i === 4999 ? 'a needle at last' : 'hay'));
  const rest = c.search('needle', { cursor: first.next });
  t.same(
    rest.entries.map((e) => e.reference),
    ['r.io/o/h50:v1', 'r.io/o/h60:v1', 'r.io/o/h70:v1', 'r.io/o/h80:v1', 'r.io/o/h90:v1', 'r.io/o/h4999:v1'],
  );
});

/**
 * The in-memory index: every published version, searchable by case-insensitive substring over the
 * reference, the usage and the tools' names and descriptions, at 100,000 entries within
 * milliseconds.
 *
 * Design. Each entry keeps one lowercase "haystack" string: its searchable fields joined by NUL
 * (so a term never matches across two fields). Entries are grouped in blocks of
 * {@link BLOCK_ENTRIES} in publish order; each block has a bitset of {@link BLOCK_BITS} bits in
 * which every bigram and trigram (UTF-16 code units) of its entries' haystacks sets one hashed bit.
 * A search hashes the term's trigrams (its bigram when it is two characters long), skips every
 * block missing one of those bits (no false negatives: a block holding the term has all of them),
 * and checks the entries of the remaining blocks with `String.prototype.includes`. A one-character
 * term checks every entry (it matches most of them, so the first page fills at once). Adding an
 * entry sets its bits in the last block: a publish never rebuilds anything. Takedowns clear a
 * visibility flag.
 *
 * Order: entries stay in the order they were added (a directory is loaded key by key in sorted
 * order, each key's versions in the order they were published; later publishes after). A page's
 * cursor is the position after its last entry, which stays valid while entries are added.
 */
import { entryKey, entryMatches, type IndexEntry } from './entry.js';

/** Entries per block of the n-gram filter. */
export const BLOCK_ENTRIES = 32;
/** Bits of one block's filter (a power of two). */
export const BLOCK_BITS = 1 << 15;
const WORDS = BLOCK_BITS >>> 5;
const SHIFT = 32 - 15;
const SEP = '\u0000';

/** The hashed filter bit of the trigram (a, b, c); `a` = -1 hashes the bigram (b, c). */
function gram(a: number, b: number, c: number): number {
  return Math.imul(Math.imul(a, 0x01000193) ^ Math.imul(b, 0x9e3779b1) ^ c, 0xc2b2ae35) >>> SHIFT;
}

/** The lowercase searchable text of an entry (fields joined by NUL). */
export function haystackOf(e: IndexEntry): string {
  let s = e.reference + SEP + e.usage;
  for (const t of e.tools) s += SEP + t.name + SEP + t.description;
  return s.toLowerCase();
}

/** One page of search results. */
export interface SearchPage {
  entries: IndexEntry[];
  /** where the next page starts (pass as `cursor`), absent on the last page */
  next?: string;
}

/** Options of {@link Catalog.search}. */
export interface SearchOptions {
  /** at most this many entries (default: all) */
  limit?: number;
  /** a `next` of an earlier page: start after it */
  cursor?: string;
}

/** Thrown for a cursor that no page returned. */
export class CursorError extends Error {
  override name = 'CursorError';
}

/** Every published version in memory, searchable (see the module comment). */
export class Catalog {
  private readonly entries: IndexEntry[] = [];
  private readonly hay: string[] = [];
  private visible = new Uint8Array(1024);
  private bits = new Int32Array(0);
  private readonly byKey = new Map<string, number[]>();
  /** positions by `digest` + ' ' + `reference` */
  private readonly byVersion = new Map<string, number>();

  /** How many versions are held (taken-down ones included). */
  get size(): number {
    return this.entries.length;
  }

  /** How many distinct harnesses (keys) are held. */
  get keys(): number {
    return this.byKey.size;
  }

  /**
   * Add a version (in publish order).
   * @param key its harness key when the caller knows it (the file it was read from), else derived
   *   from the reference
   * @returns false when exactly this reference at this digest is already held (nothing added)
   */
  add(e: IndexEntry, key: string = entryKey(e.reference)): boolean {
    const version = `${e.digest} ${e.reference}`;
    if (this.byVersion.has(version)) return false;
    const i = this.entries.length;
    this.entries.push(e);
    const h = haystackOf(e);
    this.hay.push(h);
    if (i >= this.visible.length) {
      const v = new Uint8Array(this.visible.length * 2);
      v.set(this.visible);
      this.visible = v;
    }
    this.visible[i] = 1;
    const block = (i / BLOCK_ENTRIES) | 0;
    if ((block + 1) * WORDS > this.bits.length) {
      const b = new Int32Array(Math.max(WORDS, this.bits.length * 2));
      b.set(this.bits);
      this.bits = b;
    }
    const bits = this.bits;
    const base = block * WORDS;
    let a = -1;
    let b = h.length > 0 ? h.charCodeAt(0) : 0;
    for (let j = 1; j < h.length; j++) {
      const c = h.charCodeAt(j);
      const bi = gram(-1, b, c);
      bits[base + (bi >>> 5)]! |= 1 << (bi & 31);
      if (a >= 0) {
        const tri = gram(a, b, c);
        bits[base + (tri >>> 5)]! |= 1 << (tri & 31);
      }
      a = b;
      b = c;
    }
    const list = this.byKey.get(key);
    if (list) list.push(i);
    else this.byKey.set(key, [i]);
    this.byVersion.set(version, i);
    return true;
  }

  /**
   * Hide the version of `reference` at `digest` from search and from {@link versions}.
   * @returns whether it was held and visible
   */
  hide(reference: string, digest: string): boolean {
    const i = this.byVersion.get(`${digest} ${reference}`);
    if (i === undefined || this.visible[i] === 0) return false;
    this.visible[i] = 0;
    return true;
  }

  /** Hide every version at `digest` (a takedown line names a digest); @returns how many. */
  hideDigest(digest: string): number {
    let n = 0;
    for (const [version, i] of this.byVersion) {
      if (version.startsWith(digest + ' ') && this.visible[i] === 1) {
        this.visible[i] = 0;
        n++;
      }
    }
    return n;
  }

  /** The visible versions of one harness (key = reference without tag), in publish order; [] when none. */
  versions(key: string): IndexEntry[] {
    return (this.byKey.get(key) ?? []).filter((i) => this.visible[i] === 1).map((i) => this.entries[i]!);
  }

  /** The visible version of exactly `reference` published last, if any. */
  latest(reference: string): IndexEntry | undefined {
    const list = this.byKey.get(entryKey(reference)) ?? [];
    for (let k = list.length - 1; k >= 0; k--) {
      const i = list[k]!;
      if (this.visible[i] === 1 && this.entries[i]!.reference === reference) return this.entries[i];
    }
    return undefined;
  }

  /**
   * Visible versions matching `term` (case-insensitive substring of the reference, the usage, a
   * tool's name or description; the empty term matches all), in catalog order.
   * @throws CursorError for a cursor that is not a position of this catalog
   */
  search(term: string, opts: SearchOptions = {}): SearchPage {
    const t = term.toLowerCase();
    const limit = opts.limit ?? Infinity;
    let start = 0;
    if (opts.cursor !== undefined) {
      if (!/^\d{1,10}$/.test(opts.cursor) || Number(opts.cursor) > this.entries.length)
        throw new CursorError(
          `cursor ${JSON.stringify(opts.cursor.slice(0, 40))} is not one a page returned`,
        );
      start = Number(opts.cursor);
    }
    const out: IndexEntry[] = [];
    const grams = this.gramsOf(t);
    const n = this.entries.length;
    const bits = this.bits;
    const fieldsCheck = t.includes(SEP);
    let i = start;
    while (i < n) {
      const block = (i / BLOCK_ENTRIES) | 0;
      const end = Math.min(n, (block + 1) * BLOCK_ENTRIES);
      const base = block * WORDS;
      let candidate = true;
      for (let k = 0; k < grams.length; k++) {
        const g = grams[k]!;
        if ((bits[base + (g >>> 5)]! & (1 << (g & 31))) === 0) {
          candidate = false;
          break;
        }
      }
      if (candidate) {
        for (; i < end; i++) {
          if (this.visible[i] === 0) continue;
          if (fieldsCheck ? this.fieldMatch(i, t) : this.hay[i]!.includes(t)) {
            if (out.length === limit) return { entries: out, next: String(i) };
            out.push(this.entries[i]!);
          }
        }
      }
      i = end;
    }
    return { entries: out };
  }

  /** The filter bits a term needs: its trigrams, its bigram when it is two long, none when shorter. */
  private gramsOf(t: string): number[] {
    if (t.length < 2) return [];
    if (t.length === 2) return [gram(-1, t.charCodeAt(0), t.charCodeAt(1))];
    const out = new Set<number>();
    for (let j = 2; j < t.length; j++)
      out.add(gram(t.charCodeAt(j - 2), t.charCodeAt(j - 1), t.charCodeAt(j)));
    return [...out];
  }

  /** The exact field-by-field check, for a term holding the field separator. */
  private fieldMatch(i: number, t: string): boolean {
    return entryMatches(this.entries[i]!, t);
  }
}

/**
 * The in-memory index: every published version, searchable by case-insensitive substring over the
 * reference, the usage and the tools' names and descriptions, at 100,000 entries within
 * milliseconds.
 *
 * Design. Each entry keeps one lowercase "haystack" string: its searchable fields joined by NUL
 * (so a term never matches across two fields). An n-gram filter (./grams.ts) narrows a search to
 * candidate entries 32 at a time (a word of bits, ANDed with the visible entries' bits), and each
 * candidate is checked with `String.prototype.includes` on its haystack, so the result is exactly
 * the substring rule's. Adding an entry sets its bits in the last segment of the filter: a publish
 * never rebuilds anything. Takedowns clear a visibility bit.
 *
 * Order: entries stay in the order they were added (a directory is loaded key by key in sorted
 * order, each key's versions in the order they were published; later publishes after). A page's
 * cursor is the position after its last entry, which stays valid while entries are added.
 */
import { entryKey, entryMatches, type IndexEntry } from './entry.js';
import { GramFilter, termGrams } from './grams.js';

const SEP = '\u0000';

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
  /** bit i: entry i is visible (not taken down) */
  private visible = new Int32Array(64);
  private readonly filter = new GramFilter();
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
    if (i >>> 5 >= this.visible.length) {
      const v = new Int32Array(this.visible.length * 2);
      v.set(this.visible);
      this.visible = v;
    }
    this.visible[i >>> 5]! |= 1 << (i & 31);
    this.filter.add(i, h);
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
    if (i === undefined || !this.isVisible(i)) return false;
    this.visible[i >>> 5]! &= ~(1 << (i & 31));
    return true;
  }

  /** Hide every version at `digest` (a takedown line names a digest); @returns how many. */
  hideDigest(digest: string): number {
    let n = 0;
    for (const [version, i] of this.byVersion) {
      if (version.startsWith(digest + ' ') && this.isVisible(i)) {
        this.visible[i >>> 5]! &= ~(1 << (i & 31));
        n++;
      }
    }
    return n;
  }

  /** The visible versions of one harness (key = reference without tag), in publish order; [] when none. */
  versions(key: string): IndexEntry[] {
    return (this.byKey.get(key) ?? []).filter((i) => this.isVisible(i)).map((i) => this.entries[i]!);
  }

  /** The visible version of exactly `reference` published last, if any. */
  latest(reference: string): IndexEntry | undefined {
    const list = this.byKey.get(entryKey(reference)) ?? [];
    for (let k = list.length - 1; k >= 0; k--) {
      const i = list[k]!;
      if (this.isVisible(i) && this.entries[i]!.reference === reference) return this.entries[i];
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
    const grams = termGrams(t);
    const n = this.entries.length;
    const fieldsCheck = t.includes(SEP);
    const words = (n + 31) >>> 5;
    for (let w = start >>> 5; w < words; w++) {
      let bits = this.visible[w]! & this.filter.candidates(grams, w);
      if (w === start >>> 5) bits &= -1 << (start & 31);
      while (bits !== 0) {
        const low = bits & -bits;
        bits ^= low;
        const i = (w << 5) + 31 - Math.clz32(low);
        if (fieldsCheck ? this.fieldMatch(i, t) : this.hay[i]!.includes(t)) {
          if (out.length === limit) return { entries: out, next: String(i) };
          out.push(this.entries[i]!);
        }
      }
    }
    return { entries: out };
  }

  /** Whether entry `i` is visible. */
  private isVisible(i: number): boolean {
    return ((this.visible[i >>> 5]! >>> (i & 31)) & 1) === 1;
  }

  /** The exact field-by-field check, for a term holding the field separator. */
  private fieldMatch(i: number, t: string): boolean {
    return entryMatches(this.entries[i]!, t);
  }
}

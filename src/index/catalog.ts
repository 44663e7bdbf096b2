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
import { entryKey, entryMatches, formatEntryLine, parseIndexLine, type IndexEntry } from './entry.js';
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

/**
 * A catalog's state as plain arrays, for a snapshot (./snapshot.ts): entry i's line as read (an
 * entry line of the format), its haystack, its key and its version id (`digest reference`), the
 * visible bits, and the n-gram filter's segments.
 */
export interface CatalogParts {
  /** how many entries */
  entries: number;
  /** entry i's line (decoded on first need) */
  lines: string[] | ((i: number) => string);
  hay: string[];
  /** the keys and version ids, or a function giving them (called on first need) */
  ids: { keys: string[]; versions: string[] } | (() => { keys: string[]; versions: string[] });
  keyCount: number;
  visible: Int32Array;
  tri: Int32Array[];
  short: Int32Array[];
}

/** Every published version in memory, searchable (see the module comment). */
export class Catalog {
  /** entry i, parsed from lines[i] on first need when it came from a snapshot */
  private readonly entries: (IndexEntry | undefined)[] = [];
  /** entry i's line as read, when it was read from a file (undefined for a publish) */
  private readonly lines: (string | undefined)[] = [];
  private readonly hay: string[] = [];
  /** bit i: entry i is visible (not taken down) */
  private visible: Int32Array = new Int32Array(64);
  private readonly filter: GramFilter;
  /** the line of a snapshot's entry i (not held in `lines`) */
  private lineAt: ((i: number) => string) | null = null;
  /** the keys and version ids of a snapshot, until the maps below are built from them */
  private pendingIds: (() => { keys: string[]; versions: string[] }) | null = null;
  private keyCount = 0;
  private readonly keyOf: string[] = [];
  private readonly versionOf: string[] = [];
  private readonly byKey = new Map<string, number[]>();
  /** positions by `digest` + ' ' + `reference` */
  private readonly byVersion = new Map<string, number>();

  constructor(parts?: CatalogParts) {
    if (parts === undefined) {
      this.filter = new GramFilter();
      return;
    }
    this.filter = new GramFilter(parts.tri, parts.short);
    const lines = parts.lines;
    if (typeof lines === 'function') this.lineAt = lines;
    else this.lines.push(...lines);
    this.lines.length = parts.entries;
    this.entries.length = parts.entries;
    this.hay.push(...parts.hay);
    this.visible = parts.visible;
    this.keyCount = parts.keyCount;
    const ids = parts.ids;
    this.pendingIds = typeof ids === 'function' ? ids : () => ids;
  }

  /** How many versions are held (taken-down ones included). */
  get size(): number {
    return this.hay.length;
  }

  /** How many distinct harnesses (keys) are held. */
  get keys(): number {
    return this.pendingIds !== null ? this.keyCount : this.byKey.size;
  }

  /** The plain arrays of this catalog (see {@link CatalogParts}); lines of publishes formatted. */
  parts(): CatalogParts {
    this.ensureIds();
    const f = this.filter.segments();
    return {
      entries: this.size,
      lines: Array.from(this.hay, (_, i) => this.lineOf(i)),
      hay: this.hay,
      ids: { keys: this.keyOf, versions: this.versionOf },
      keyCount: this.byKey.size,
      visible: this.visible.slice(0, (this.size + 31) >>> 5),
      tri: f.tri,
      short: f.short,
    };
  }

  /**
   * Add a version (in publish order).
   * @param key its harness key when the caller knows it (the file it was read from), else derived
   *   from the reference
   * @param line the line it was read from, when it was read from a file
   * @returns false when exactly this reference at this digest is already held (nothing added)
   */
  add(e: IndexEntry, key: string = entryKey(e.reference), line?: string): boolean {
    this.ensureIds();
    const version = `${e.digest} ${e.reference}`;
    if (this.byVersion.has(version)) return false;
    const i = this.hay.length;
    this.entries.push(e);
    this.lines.push(line);
    const h = haystackOf(e);
    this.hay.push(h);
    if (i >>> 5 >= this.visible.length) {
      const v = new Int32Array(Math.max(64, this.visible.length * 2));
      v.set(this.visible);
      this.visible = v;
    }
    this.visible[i >>> 5]! |= 1 << (i & 31);
    this.filter.add(i, h);
    this.index(i, key, version);
    return true;
  }

  /** Record entry i under its key and version id. */
  private index(i: number, key: string, version: string): void {
    this.keyOf[i] = key;
    this.versionOf[i] = version;
    const list = this.byKey.get(key);
    if (list) list.push(i);
    else this.byKey.set(key, [i]);
    this.byVersion.set(version, i);
  }

  /** Build the key and version maps of a snapshot's entries, once. */
  private ensureIds(): void {
    if (this.pendingIds === null) return;
    const { keys, versions } = this.pendingIds();
    this.pendingIds = null;
    for (let i = 0; i < keys.length; i++) this.index(i, keys[i]!, versions[i]!);
  }

  /** Entry i's line: as read, or formatted for a publish. */
  private lineOf(i: number): string {
    const l = this.lines[i];
    if (l !== undefined) return l;
    const e = this.entries[i];
    if (e !== undefined) return formatEntryLine(e);
    return this.lineAt!(i);
  }

  /** Entry i (parsed from its line on first need). */
  private entry(i: number): IndexEntry {
    let e = this.entries[i];
    if (e === undefined) {
      const parsed = parseIndexLine(this.lineOf(i));
      if (parsed === null || parsed.kind !== 'entry')
        throw new Error(`entry ${i} of the catalog is not an entry line`);
      e = this.entries[i] = parsed.entry;
    }
    return e;
  }

  /**
   * Hide the version of `reference` at `digest` from search and from {@link versions}.
   * @returns whether it was held and visible
   */
  hide(reference: string, digest: string): boolean {
    this.ensureIds();
    const i = this.byVersion.get(`${digest} ${reference}`);
    if (i === undefined || !this.isVisible(i)) return false;
    this.visible[i >>> 5]! &= ~(1 << (i & 31));
    return true;
  }

  /** Hide every version at `digest` (a takedown line names a digest); @returns how many. */
  hideDigest(digest: string): number {
    this.ensureIds();
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
    this.ensureIds();
    return (this.byKey.get(key) ?? []).filter((i) => this.isVisible(i)).map((i) => this.entry(i));
  }

  /** The visible version of exactly `reference` published last, if any. */
  latest(reference: string): IndexEntry | undefined {
    this.ensureIds();
    const list = this.byKey.get(entryKey(reference)) ?? [];
    for (let k = list.length - 1; k >= 0; k--) {
      const i = list[k]!;
      if (this.isVisible(i) && this.versionOf[i]!.endsWith(' ' + reference)) {
        const e = this.entry(i);
        if (e.reference === reference) return e;
      }
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
      if (!/^\d{1,10}$/.test(opts.cursor) || Number(opts.cursor) > this.hay.length)
        throw new CursorError(
          `cursor ${JSON.stringify(opts.cursor.slice(0, 40))} is not one a page returned`,
        );
      start = Number(opts.cursor);
    }
    const out: IndexEntry[] = [];
    const grams = termGrams(t);
    const n = this.hay.length;
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
          out.push(this.entry(i));
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
    return entryMatches(this.entry(i), t);
  }
}

/**
 * The n-gram filter of the in-memory index: for a search term, the entries that may hold it, as
 * 32-bit words of candidate bits (entry `32 * w + b` is bit `b` of word `w`). It never loses a
 * match: an entry whose text holds the term has every n-gram of the term, so every bit the term
 * needs is set for it. A candidate is then checked with a substring test by the caller.
 *
 * Two bit-sliced signatures over the entries' lowercase text (UTF-16 code units):
 * - trigrams, per entry: each entry sets, for each of its trigrams, the bit of that entry in the
 *   trigram's hashed column ({@link TRI_COLUMNS} columns). A term of three or more code units
 *   ANDs the columns of its trigrams: 32 entries per machine word, so a miss over 100,000 entries
 *   costs a few thousand word operations, and a candidate is an entry whose signature has every
 *   bit (false positives are rare: an entry fills about a tenth of the columns);
 * - unigrams and bigrams, per block of 32 entries: each block sets, for each code unit and pair of
 *   code units of its entries, the block's bit in the gram's hashed column ({@link SHORT_COLUMNS}
 *   columns). A term of one or two code units keeps the blocks with the bit set; their entries are
 *   all candidates.
 *
 * Columns are stored in segments of {@link SEGMENT_ENTRIES} entries, column after column, so
 * adding an entry touches only the last segment and a growing index never moves old bits.
 */

/** Entries per segment (a multiple of 32 × 32, so a segment's blocks fill whole words). */
export const SEGMENT_ENTRIES = 4096;
/** Hashed trigram columns (a power of two). */
export const TRI_COLUMNS = 1 << 11;
/** Hashed unigram and bigram columns (a power of two). */
export const SHORT_COLUMNS = 1 << 12;

const SEG_WORDS = SEGMENT_ENTRIES >>> 5;
const SEG_BLOCK_WORDS = SEG_WORDS >>> 5;
const TRI_SHIFT = 32 - 11;
const SHORT_SHIFT = 32 - 12;

/** The trigram column of (a, b, c). */
function triColumn(a: number, b: number, c: number): number {
  return Math.imul(Math.imul(a, 0x01000193) ^ Math.imul(b, 0x9e3779b1) ^ c, 0xc2b2ae35) >>> TRI_SHIFT;
}

/** The short-gram column of the bigram (b, c), or of the unigram c when b is -1. */
function shortColumn(b: number, c: number): number {
  return Math.imul(Math.imul(b, 0x85ebca6b) ^ c, 0xc2b2ae35) >>> SHORT_SHIFT;
}

/** What a term needs: its columns, and which signature they belong to. */
export interface TermGrams {
  /** 'all': no filter (the empty term); 'short': block columns; 'tri': entry columns */
  kind: 'all' | 'short' | 'tri';
  columns: number[];
}

/** The columns a (lowercase) term needs. */
export function termGrams(t: string): TermGrams {
  if (t.length === 0) return { kind: 'all', columns: [] };
  if (t.length === 1) return { kind: 'short', columns: [shortColumn(-1, t.charCodeAt(0))] };
  if (t.length === 2) return { kind: 'short', columns: [shortColumn(t.charCodeAt(0), t.charCodeAt(1))] };
  const out = new Set<number>();
  for (let j = 2; j < t.length; j++)
    out.add(triColumn(t.charCodeAt(j - 2), t.charCodeAt(j - 1), t.charCodeAt(j)));
  return { kind: 'tri', columns: [...out] };
}

/** The two signatures (see the module comment), growing one segment at a time. */
export class GramFilter {
  /** per segment: TRI_COLUMNS columns of SEG_WORDS words */
  private readonly tri: Int32Array[] = [];
  /** per segment: SHORT_COLUMNS columns of SEG_BLOCK_WORDS words */
  private readonly short: Int32Array[] = [];

  /** An empty filter, or one made of {@link segments} of an earlier one (kept, not copied). */
  constructor(tri: Int32Array[] = [], short: Int32Array[] = []) {
    if (tri.length !== short.length)
      throw new Error('the filter needs as many short segments as trigram ones');
    for (let k = 0; k < tri.length; k++) {
      if (tri[k]!.length !== TRI_COLUMNS * SEG_WORDS || short[k]!.length !== SHORT_COLUMNS * SEG_BLOCK_WORDS)
        throw new Error(`segment ${k} of the filter has the wrong size`);
      this.tri.push(tri[k]!);
      this.short.push(short[k]!);
    }
  }

  /** The segments (the arrays themselves, for a snapshot). */
  segments(): { tri: Int32Array[]; short: Int32Array[] } {
    return { tri: this.tri, short: this.short };
  }

  /** Set the bits of entry `i` (entries are added in order, each once) with text `h`. */
  add(i: number, h: string): void {
    const seg = (i / SEGMENT_ENTRIES) | 0;
    while (this.tri.length <= seg) {
      this.tri.push(new Int32Array(TRI_COLUMNS * SEG_WORDS));
      this.short.push(new Int32Array(SHORT_COLUMNS * SEG_BLOCK_WORDS));
    }
    const tri = this.tri[seg]!;
    const short = this.short[seg]!;
    const local = i - seg * SEGMENT_ENTRIES;
    const word = local >>> 5;
    const bit = 1 << (local & 31);
    const block = local >>> 5;
    const blockWord = block >>> 5;
    const blockBit = 1 << (block & 31);
    let a = -1;
    let b = -1;
    for (let j = 0; j < h.length; j++) {
      const c = h.charCodeAt(j);
      short[shortColumn(-1, c) * SEG_BLOCK_WORDS + blockWord]! |= blockBit;
      if (b >= 0) short[shortColumn(b, c) * SEG_BLOCK_WORDS + blockWord]! |= blockBit;
      if (a >= 0) tri[triColumn(a, b, c) * SEG_WORDS + word]! |= bit;
      a = b;
      b = c;
    }
  }

  /**
   * The candidate bits of word `w` (entries 32w to 32w+31) for a term's grams: every bit for
   * 'all', the block's 32 entries or none for 'short', the AND of the columns for 'tri'.
   */
  candidates(g: TermGrams, w: number): number {
    if (g.kind === 'all') return -1;
    const seg = (w / SEG_WORDS) | 0;
    const local = w - seg * SEG_WORDS;
    const cols = g.columns;
    if (g.kind === 'short') {
      const short = this.short[seg];
      if (short === undefined) return 0;
      return (short[cols[0]! * SEG_BLOCK_WORDS + (local >>> 5)]! >>> (local & 31)) & 1 ? -1 : 0;
    }
    const tri = this.tri[seg];
    if (tri === undefined) return 0;
    let acc = -1;
    for (let k = 0; k < cols.length && acc !== 0; k++) acc &= tri[cols[k]! * SEG_WORDS + local]!;
    return acc;
  }
}

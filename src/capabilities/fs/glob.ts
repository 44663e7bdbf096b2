/**
 * Glob patterns over paths relative to a root: `*` (any run within one component), `?` (one
 * character), `**` as a whole component (any number of components), `[abc]` / `[a-z]` / `[!abc]`
 * classes (never matching '/') and `{a,b}` alternatives (not nested). `*` and `?` also match
 * leading dots. The walk never follows symlinks, not even in the pattern's literal prefix, so it
 * cannot leave the root.
 *
 * The matcher is written here rather than taken from picomatch (or another maintained matcher):
 * picomatch compiles to a backtracking RegExp, which is exactly what let a guest's pattern hang
 * the host; this one is a linear-time automaton with the same syntax the fs capability documents.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** Thrown for a malformed pattern; the message says what is wrong. */
export class GlobError extends Error {
  override name = 'GlobError';
}

/** Longest glob pattern accepted, in UTF-16 code units. */
export const GLOB_MAX_PATTERN = 1024;

/** A compiled glob: `test(rel)` runs in time linear in `rel.length` × the pattern's length. */
export interface GlobMatcher {
  test(rel: string): boolean;
}

type Test = (c: number) => boolean;
/** NFA state: consuming (`test`, then `next`), epsilon split (`outs`), or accepting. */
type State = { test: Test; next: number } | { outs: number[] } | { match: true };

const SLASH = 0x2f;
const notSlash: Test = (c) => c !== SLASH;

/** One element of a parsed pattern. */
type Item =
  | { kind: 'test'; test: Test }
  | { kind: 'star' }
  | { kind: 'globstar-dir' }
  | { kind: 'globstar-end' }
  | { kind: 'alt'; alts: Item[][] };

function classTest(body: string, negate: boolean): Test {
  const ranges: [number, number][] = [];
  for (let i = 0; i < body.length; i++) {
    const lo = body.charCodeAt(i);
    if (body[i + 1] === '-' && i + 2 < body.length) {
      ranges.push([lo, body.charCodeAt(i + 2)]);
      i += 2;
    } else {
      ranges.push([lo, lo]);
    }
  }
  const inSet = (c: number) => ranges.some(([a, b]) => c >= a && c <= b);
  // A class never matches the separator, negated or not: it stands for one character of a name.
  return negate ? (c) => c !== SLASH && !inSet(c) : (c) => c !== SLASH && inSet(c);
}

function parse(glob: string): Item[] {
  const top: Item[] = [];
  let alts: Item[][] | null = null;
  const out = () => (alts ? alts[alts.length - 1]! : top);
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === '*') {
      const atStart = i === 0 || glob[i - 1] === '/';
      if (!alts && glob[i + 1] === '*' && atStart && (i + 2 === glob.length || glob[i + 2] === '/')) {
        if (i + 2 === glob.length) {
          out().push({ kind: 'globstar-end' });
          i += 1;
        } else {
          // `**/**/` is the same as one `**/`: collapsing keeps the automaton small.
          const prev = out()[out().length - 1];
          if (prev?.kind !== 'globstar-dir') out().push({ kind: 'globstar-dir' });
          i += 2;
        }
      } else {
        while (glob[i + 1] === '*') i++;
        out().push({ kind: 'star' });
      }
    } else if (c === '?') {
      out().push({ kind: 'test', test: notSlash });
    } else if (c === '[') {
      const end = glob.indexOf(']', i + 2);
      if (end < 0) throw new GlobError(`unclosed '[' at ${i}`);
      let body = glob.slice(i + 1, end);
      const negate = body.startsWith('!') || body.startsWith('^');
      if (negate) body = body.slice(1);
      out().push({ kind: 'test', test: classTest(body, negate) });
      i = end;
    } else if (c === '{') {
      if (alts) throw new GlobError(`nested '{' at ${i}`);
      alts = [[]];
    } else if (c === '}' && alts) {
      top.push({ kind: 'alt', alts });
      alts = null;
    } else if (c === ',' && alts) {
      alts.push([]);
    } else {
      const code = glob.charCodeAt(i);
      out().push({ kind: 'test', test: (x) => x === code });
    }
  }
  if (alts) throw new GlobError("unclosed '{'");
  return top;
}

/**
 * Compile a glob (see the module comment) to a matcher over '/'-separated relative paths. The
 * matcher simulates a nondeterministic automaton (one pass over the path, a set of states per
 * character), so no pattern can make it backtrack: a compiled RegExp of `*a*a*a…b` or
 * `**\/**\/…` takes exponential time in V8 on a long name or a deep path.
 * @throws GlobError on an unclosed `[` or `{`, a nested `{`, a NUL byte, or a pattern longer
 *   than {@link GLOB_MAX_PATTERN}.
 */
export function compileGlob(glob: string): GlobMatcher {
  if (glob.includes('\0')) throw new GlobError('pattern contains a NUL byte');
  if (glob.length > GLOB_MAX_PATTERN) {
    throw new GlobError(`pattern is ${glob.length} characters; the limit is ${GLOB_MAX_PATTERN}`);
  }
  const states: State[] = [{ match: true }];
  const add = (st: State) => states.push(st) - 1;
  // Build back to front: each item becomes states leading to `next`.
  const build = (items: Item[], next: number): number => {
    for (let k = items.length - 1; k >= 0; k--) {
      const it = items[k]!;
      if (it.kind === 'test') {
        next = add({ test: it.test, next });
      } else if (it.kind === 'star') {
        const split: { outs: number[] } = { outs: [] };
        const id = add(split);
        split.outs.push(add({ test: notSlash, next: id }), next);
        next = id;
      } else if (it.kind === 'globstar-end') {
        const split: { outs: number[] } = { outs: [] };
        const id = add(split);
        split.outs.push(add({ test: () => true, next: id }), next);
        next = id;
      } else if (it.kind === 'globstar-dir') {
        // ([^/]*/)* : from `g`, either done, or a run of name characters then '/' back to `g`.
        const g: { outs: number[] } = { outs: [] };
        const gid = add(g);
        const slash = add({ test: (c) => c === SLASH, next: gid });
        const inName: { outs: number[] } = { outs: [] };
        const inNameId = add(inName);
        const nameChar = add({ test: notSlash, next: inNameId });
        inName.outs.push(nameChar, slash);
        g.outs.push(next, nameChar, slash);
        next = gid;
      } else {
        next = add({ outs: it.alts.map((a) => build(a, next)) });
      }
    }
    return next;
  };
  const start = build(parse(glob), 0);
  const n = states.length;
  const mark = new Int32Array(n).fill(-1);
  return {
    test(rel: string): boolean {
      let gen = 0;
      let cur: number[] = [];
      let nxt: number[] = [];
      const close = (from: number, into: number[]) => {
        const stack = [from];
        while (stack.length > 0) {
          const s = stack.pop()!;
          if (mark[s] === gen) continue;
          mark[s] = gen;
          const st = states[s]!;
          if ('outs' in st) stack.push(...st.outs);
          else into.push(s);
        }
      };
      mark.fill(-1);
      close(start, cur);
      for (let i = 0; i < rel.length && cur.length > 0; i++) {
        const c = rel.charCodeAt(i);
        gen++;
        nxt.length = 0;
        for (const s of cur) {
          const st = states[s]!;
          if ('test' in st && st.test(c)) close(st.next, nxt);
        }
        [cur, nxt] = [nxt, cur];
      }
      return cur.some((s) => 'match' in states[s]!);
    },
  };
}

/** The leading components of a glob that hold no wildcard: where the walk can start. */
export function literalPrefix(glob: string): string {
  const parts = glob.split('/');
  const lit: string[] = [];
  for (const p of parts.slice(0, -1)) {
    if (/[*?[{]/.test(p)) break;
    lit.push(p);
  }
  return lit.filter((p) => p !== '' && p !== '.').join('/');
}

/** One entry found by {@link walk}. */
export interface WalkEntry {
  /** '/'-separated path relative to the root */
  rel: string;
  /** absolute path on the host */
  abs: string;
  kind: 'file' | 'dir' | 'symlink' | 'other';
}

/** Result of {@link walk}: entries in sorted order, and whether a cap stopped it early. */
export interface WalkResult {
  entries: WalkEntry[];
  truncated: boolean;
}

/**
 * Depth-first walk of `root/start` without following symlinks, visiting at most `maxEntries`
 * entries (directories are read in sorted order so results are stable). Unreadable directories
 * are skipped.
 */
export function walk(root: string, start: string, maxEntries: number): WalkResult {
  const entries: WalkEntry[] = [];
  let truncated = false;
  // The literal prefix is walked into without a listing: check each of its components with lstat
  // so that a symlink there (say `rootlink -> /`) is not followed any more than one found below.
  let prefix = root;
  for (const part of start === '' ? [] : start.split('/')) {
    prefix = path.join(prefix, part);
    let st: fs.Stats;
    try {
      st = fs.lstatSync(prefix);
    } catch {
      return { entries, truncated };
    }
    if (!st.isDirectory()) return { entries, truncated };
  }
  const stack: string[] = [start];
  while (stack.length > 0) {
    const relDir = stack.pop()!;
    let dirents: fs.Dirent[];
    try {
      dirents = fs.readdirSync(path.join(root, relDir), { withFileTypes: true });
    } catch {
      continue;
    }
    dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const subdirs: string[] = [];
    for (const d of dirents) {
      if (entries.length >= maxEntries) {
        truncated = true;
        break;
      }
      const rel = relDir === '' ? d.name : `${relDir}/${d.name}`;
      const kind = d.isSymbolicLink() ? 'symlink' : d.isDirectory() ? 'dir' : d.isFile() ? 'file' : 'other';
      entries.push({ rel, abs: path.join(root, rel), kind });
      if (kind === 'dir') subdirs.push(rel);
    }
    if (truncated) break;
    for (const s of subdirs.reverse()) stack.push(s);
  }
  entries.sort((a, b) => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0));
  return { entries, truncated };
}

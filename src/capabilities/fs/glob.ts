/**
 * Glob patterns over paths relative to a root: `*` (any run within one component), `?` (one
 * character), `**` as a whole component (any number of components), `[abc]` / `[!abc]` classes
 * and `{a,b}` alternatives (not nested). `*` and `?` also match leading dots. The walk never
 * follows symlinks, so it cannot leave the root.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** Thrown for a malformed pattern; the message says what is wrong. */
export class GlobError extends Error {
  override name = 'GlobError';
}

/**
 * Compile a glob to an anchored RegExp over '/'-separated relative paths.
 * @throws GlobError on an unclosed `[` or `{`, a nested `{`, or a NUL byte.
 */
export function globToRegExp(glob: string): RegExp {
  if (glob.includes('\0')) throw new GlobError('pattern contains a NUL byte');
  let re = '';
  let inBrace = false;
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === '*') {
      const atStart = i === 0 || glob[i - 1] === '/';
      if (glob[i + 1] === '*' && atStart && (i + 2 === glob.length || glob[i + 2] === '/')) {
        if (i + 2 === glob.length) {
          re += '.*';
          i += 1;
        } else {
          re += '(?:[^/]*/)*';
          i += 2;
        }
      } else {
        re += '[^/]*';
      }
    } else if (c === '?') {
      re += '[^/]';
    } else if (c === '[') {
      const end = glob.indexOf(']', i + 2);
      if (end < 0) throw new GlobError(`unclosed '[' at ${i}`);
      let body = glob.slice(i + 1, end);
      const negate = body.startsWith('!') || body.startsWith('^');
      if (negate) body = body.slice(1);
      body = body.replace(/[\\\]^]/g, (m) => '\\' + m);
      re += negate ? `[^/${body}]` : `[${body}]`;
      i = end;
    } else if (c === '{') {
      if (inBrace) throw new GlobError(`nested '{' at ${i}`);
      inBrace = true;
      re += '(?:';
    } else if (c === '}' && inBrace) {
      inBrace = false;
      re += ')';
    } else if (c === ',' && inBrace) {
      re += '|';
    } else {
      re += c.replace(/[.+^${}()|\\]/g, (m) => '\\' + m);
    }
  }
  if (inBrace) throw new GlobError("unclosed '{'");
  return new RegExp(`^${re}$`);
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

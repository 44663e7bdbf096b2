/**
 * berm.fs.grep's search, run in the bridge worker (src/sync/bridge.ts) because the regular
 * expression comes from the guest: a catastrophic pattern spins inside V8 where no timer can
 * reach it, and only terminating the worker stops it.
 */
import * as fs from 'node:fs';
import { compileGlob, literalPrefix, walk } from './glob.js';
import { openVerified } from '../common/confine.js';

/** Arguments of {@link grep}; root is canonical and already checked. */
export interface GrepArgs {
  root: string;
  pattern: string;
  glob: string;
  maxEntries: number;
  maxResults: number;
  maxFileBytes: number;
}

/** Longest line text echoed back, in UTF-16 code units; longer lines are cut with '…'. */
export const GREP_MAX_LINE = 1000;

/**
 * "path:line:text" lines (line numbers from 1) of regular files under root whose relative path
 * matches `glob` and whose line matches `pattern`. Files that are binary (NUL in the first 8 KiB)
 * or over `maxFileBytes` are skipped. Symlinks are not followed.
 */
export async function grep(
  args: GrepArgs,
  signal: AbortSignal,
): Promise<{ lines: string[]; truncated: boolean }> {
  const re = new RegExp(args.pattern);
  const globRe = compileGlob(args.glob);
  const { entries, truncated: walkTruncated } = walk(args.root, literalPrefix(args.glob), args.maxEntries);
  const lines: string[] = [];
  let truncated = walkTruncated;
  const buf = Buffer.alloc(Math.min(args.maxFileBytes, 1 << 20));
  for (const e of entries) {
    if (signal.aborted) throw new Error('timed out');
    if (e.kind !== 'file' || !globRe.test(e.rel)) continue;
    const fd = openVerified(args.root, e.abs, 'read', e.rel, 'berm.fs.grep');
    if (typeof fd !== 'number') continue;
    let text: string;
    try {
      const size = fs.fstatSync(fd).size;
      if (size > args.maxFileBytes) continue;
      const data =
        size <= buf.length ? buf.subarray(0, fs.readSync(fd, buf, 0, size, 0)) : fs.readFileSync(fd);
      if (data.subarray(0, 8192).includes(0)) continue;
      text = data.toString('utf8');
    } finally {
      fs.closeSync(fd);
    }
    const fileLines = text.split('\n');
    for (let i = 0; i < fileLines.length; i++) {
      const line = fileLines[i]!.replace(/\r$/, '');
      if (!re.test(line)) continue;
      if (lines.length >= args.maxResults) {
        truncated = true;
        break;
      }
      const shown = line.length > GREP_MAX_LINE ? line.slice(0, GREP_MAX_LINE) + '…' : line;
      lines.push(`${e.rel}:${i + 1}:${shown}`);
    }
    if (truncated && lines.length >= args.maxResults) break;
  }
  return { lines, truncated };
}

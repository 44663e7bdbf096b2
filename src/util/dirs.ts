/**
 * Create a directory and its missing parents one level at a time. Node's
 * `mkdirSync(dir, { recursive: true })` loops for ever under /proc (each level reports ENOENT and
 * it retries the parent), and says nothing useful when a component is a file; this walks the path
 * itself and stops at the first level that cannot be created, naming it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** Why a directory could not be made; `message` names the path and the reason. */
export class DirectoryError extends Error {
  override name = 'DirectoryError';
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super(`${path}: ${reason}`);
  }
}

/**
 * Make sure `dir` is a directory, creating it and its missing parents (mode 0777 & ~umask).
 * @throws DirectoryError naming the first path component that is not a directory or cannot be
 *   created (and why: permission denied, not a directory, a read-only or virtual file system).
 */
export function ensureDirectory(dir: string): void {
  const abs = path.resolve(dir);
  const parts = abs.split(path.sep).filter((p) => p !== '');
  let cur: string = path.sep;
  for (const part of parts) {
    cur = path.join(cur, part);
    let st: fs.Stats | undefined;
    try {
      st = fs.statSync(cur);
    } catch {
      st = undefined;
    }
    if (st) {
      if (!st.isDirectory()) throw new DirectoryError(cur, 'exists and is not a directory');
      continue;
    }
    try {
      fs.mkdirSync(cur);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'EEXIST' && fs.statSync(cur).isDirectory()) continue;
      const why =
        code === 'EACCES' || code === 'EPERM'
          ? 'permission denied'
          : code === 'EROFS'
            ? 'read-only file system'
            : code === 'ENOENT'
              ? 'cannot be created here (a virtual file system such as /proc or /sys?)'
              : `${(e as Error).message}`;
      throw new DirectoryError(cur, `cannot create directory: ${why}`);
    }
  }
}

/**
 * Shared by the fs and exec capabilities (infrastructure, not a capability).
 * Confinement of guest paths to a granted root: `..` components, absolute paths outside root, NUL
 * bytes and symlinks resolving outside root are refused; device files, FIFOs, sockets, files with
 * more than one hard link (another name of the same file may lie outside root) and anything under
 * /proc, /sys or /dev are refused; and every open is re-checked after it happens (fstat + readlink
 * of /proc/self/fd/N) so a symlink swapped in between the check and the open cannot carry the
 * call outside root. Creating (write's files and parent directories) happens relative to a
 * directory handle already checked, through /proc/self/fd/N/name, the way openat(2) would: a
 * directory swapped for a symlink after the check cannot make anything be created outside.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { GrantEnv, GrantProblem, JsonSchema } from '../types.js';

/** A refusal (policy) or an error (allowed, but failed), as the handler will report it. */
export type PathFailure = { refused: string } | { error: string };

/** Host trees never served, whatever the root. */
export const FORBIDDEN_TREES: readonly string[] = ['/proc', '/sys', '/dev'];

/** True when `p` is `root` or lies below it (both absolute and normalised). */
export function isWithin(root: string, p: string): boolean {
  if (p === root) return true;
  const prefix = root.endsWith(path.sep) ? root : root + path.sep;
  return p.startsWith(prefix);
}

function inForbiddenTree(p: string): string | undefined {
  return FORBIDDEN_TREES.find((t) => isWithin(t, p));
}

/**
 * The canonical (symlink-free) form of a granted root.
 * @returns the path, or an error naming the fix when the grant has no root or it is unusable.
 */
export function canonicalRoot(root: string | undefined, capability: string): string | PathFailure {
  if (root === undefined || root === '') {
    return { error: `${capability}: no root is granted; declare root = "/some/dir" for this harness` };
  }
  let real: string;
  try {
    real = fs.realpathSync(path.resolve(root));
  } catch (e) {
    return { error: `${capability}: granted root ${root} is unusable: ${(e as Error).message}` };
  }
  const tree = inForbiddenTree(real);
  if (tree !== undefined) return { refused: `${capability}: granted root ${root} lies under ${tree}` };
  if (real === '/') return { refused: `${capability}: granted root ${root} resolves to /` };
  if (!fs.statSync(real).isDirectory())
    return { error: `${capability}: granted root ${root} is not a directory` };
  return real;
}

/**
 * Lexically place a guest path inside `root` (canonical). Relative paths are taken from root;
 * absolute ones must already name a place inside root (as declared or canonical).
 * @returns the absolute path (not yet resolved through symlinks), or a refusal.
 */
export function placeGuestPath(
  root: string,
  declaredRoot: string,
  guestPath: string,
  capability: string,
): string | PathFailure {
  if (guestPath.includes('\0')) return { refused: `${capability}: path contains a NUL byte` };
  if (guestPath === '') return { refused: `${capability}: path is empty` };
  const parts = guestPath.split(/[/\\]+/);
  // Refused outright, even when it would stay inside: `link/..` means different things to the
  // kernel (physical) and to path.resolve (lexical), and guests have no need for it.
  if (parts.includes('..'))
    return { refused: `${capability}: path ${JSON.stringify(guestPath)} contains '..'` };
  if (path.isAbsolute(guestPath)) {
    const abs = path.resolve(guestPath);
    for (const r of [root, path.resolve(declaredRoot)]) {
      if (isWithin(r, abs)) return path.join(root, path.relative(r, abs));
    }
    return {
      refused: `${capability}: absolute path ${JSON.stringify(guestPath)} lies outside the granted root`,
    };
  }
  return path.resolve(root, guestPath);
}

/**
 * Resolve symlinks of an existing path and check the result stays inside root and outside the
 * forbidden trees.
 * @returns the real path, or a refusal (escape) or error (missing, unreadable).
 */
export function resolveExisting(
  root: string,
  abs: string,
  guestPath: string,
  capability: string,
): string | PathFailure {
  let real: string;
  try {
    real = fs.realpathSync(abs);
  } catch (e) {
    return { error: `${capability}: ${JSON.stringify(guestPath)}: ${describeErrno(e)}` };
  }
  if (!isWithin(root, real)) {
    return {
      refused: `${capability}: ${JSON.stringify(guestPath)} resolves outside the granted root (symlink)`,
    };
  }
  const tree = inForbiddenTree(real);
  if (tree !== undefined)
    return { refused: `${capability}: ${JSON.stringify(guestPath)} resolves into ${tree}` };
  return real;
}

/** A short reason for a Node fs error: its code and what it means. */
export function describeErrno(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  switch (err?.code) {
    case 'ENOENT':
      return 'no such file or directory';
    case 'EACCES':
    case 'EPERM':
      return 'permission denied';
    case 'EISDIR':
      return 'is a directory';
    case 'ENOTDIR':
      return 'a path component is not a directory';
    case 'ELOOP':
      return 'is a symlink (swapped in after the check?)';
    default:
      return err?.message ?? String(e);
  }
}

const OPEN_SAFE = fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK | fs.constants.O_NOCTTY;

/**
 * Open a resolved path without following a final symlink and without blocking on FIFOs, then
 * verify what was actually opened: a regular file with one link whose current path lies inside
 * root. `write` creates a missing file, `rewrite` does not. The caller owns the returned fd.
 */
export function openVerified(
  root: string,
  real: string,
  flags: 'read' | 'write' | 'rewrite',
  guestPath: string,
  capability: string,
): number | PathFailure {
  const mode =
    flags === 'read'
      ? fs.constants.O_RDONLY
      : flags === 'rewrite'
        ? fs.constants.O_WRONLY
        : fs.constants.O_WRONLY | fs.constants.O_CREAT;
  // Opening a device or FIFO can itself have effects (or fail oddly, e.g. ENXIO for a FIFO with
  // no reader), so refuse one seen before the open; the fstat after the open still decides.
  let pre: fs.Stats | undefined;
  try {
    pre = fs.lstatSync(real);
  } catch {
    pre = undefined;
  }
  if (pre && !pre.isFile() && !pre.isDirectory() && !pre.isSymbolicLink()) {
    return {
      refused: `${capability}: ${JSON.stringify(guestPath)} is not a regular file (device, FIFO or socket)`,
    };
  }
  let fd: number;
  try {
    fd = fs.openSync(real, mode | OPEN_SAFE, 0o666);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') {
      return {
        refused: `${capability}: ${JSON.stringify(guestPath)} became a symlink between check and open`,
      };
    }
    return { error: `${capability}: ${JSON.stringify(guestPath)}: ${describeErrno(e)}` };
  }
  const bad = verifyFd(fd, root, real, guestPath, capability);
  if (bad) {
    fs.closeSync(fd);
    return bad;
  }
  return fd;
}

function verifyFd(
  fd: number,
  root: string,
  real: string,
  guestPath: string,
  capability: string,
): PathFailure | null {
  const st = fs.fstatSync(fd);
  if (st.isDirectory()) return { error: `${capability}: ${JSON.stringify(guestPath)} is a directory` };
  if (!st.isFile()) {
    return {
      refused: `${capability}: ${JSON.stringify(guestPath)} is not a regular file (device, FIFO or socket)`,
    };
  }
  if (st.nlink > 1) {
    return {
      refused: `${capability}: ${JSON.stringify(guestPath)} has ${st.nlink} hard links; another name of it may lie outside the granted root`,
    };
  }
  let opened: string | undefined;
  try {
    opened = fs.readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    opened = undefined;
  }
  if (opened !== undefined) {
    if (!isWithin(root, opened) || inForbiddenTree(opened) !== undefined) {
      return {
        refused: `${capability}: ${JSON.stringify(guestPath)} was swapped to a file outside the granted root`,
      };
    }
    return null;
  }
  // Without /proc, fall back to comparing identity with a fresh resolution of the path.
  try {
    const again = fs.statSync(fs.realpathSync(real));
    if (again.dev !== st.dev || again.ino !== st.ino || !isWithin(root, fs.realpathSync(real))) {
      return { refused: `${capability}: ${JSON.stringify(guestPath)} changed during open` };
    }
  } catch (e) {
    return { error: `${capability}: ${JSON.stringify(guestPath)}: ${describeErrno(e)}` };
  }
  return null;
}

/**
 * Create the missing directories of `abs`'s parent one level at a time, re-resolving each so
 * that no step lands outside root.
 * @returns the real path of the parent directory, or a failure.
 */
export function ensureParent(
  root: string,
  abs: string,
  guestPath: string,
  capability: string,
): string | PathFailure {
  const parent = path.dirname(abs);
  const rel = path.relative(root, parent);
  let cur = root;
  for (const part of rel === '' ? [] : rel.split(path.sep)) {
    const next = path.join(cur, part);
    try {
      fs.mkdirSync(next);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') {
        return {
          error: `${capability}: cannot create directory for ${JSON.stringify(guestPath)}: ${describeErrno(e)}`,
        };
      }
    }
    const real = resolveExisting(root, next, guestPath, capability);
    if (typeof real !== 'string') return real;
    if (!fs.statSync(real).isDirectory()) {
      return { error: `${capability}: ${JSON.stringify(guestPath)}: a path component is not a directory` };
    }
    cur = real;
  }
  return cur;
}

/** Grant schema of `root`, shared by the capabilities that confine paths to it (fs, exec). */
export const ROOT_SCHEMA: JsonSchema = { type: 'string', minLength: 1 };

/** The fix printed when `root` is missing or malformed. */
export const ROOT_FIX = 'add root = "/absolute/dir" (the only tree the harness may touch)';

/**
 * Prepare a declared `root`: resolve it against the declaration's folder and refuse one that is,
 * or (following symlinks, when `env.checkFiles`) resolves to, `/` or a place under /proc, /sys or
 * /dev, or that is not an existing directory. The grant keeps the declared (absolute) path; every
 * call resolves it again (see {@link canonicalRoot}), so a root swapped later is caught too.
 */
export function prepareRoot(
  values: Record<string, unknown>,
  env: GrantEnv,
): { grant: Record<string, unknown>; problems: GrantProblem[] } {
  const root = path.resolve(env.dir, values.root as string);
  const exposes = (p: string) => p === '/' || inForbiddenTree(p) !== undefined;
  const problem = (text: string, fix: string): GrantProblem => ({ key: 'root', problem: text, fix });
  const problems: GrantProblem[] = [];
  if (exposes(root)) {
    problems.push(problem(`root ${root} exposes the host`, 'choose a dedicated directory for this harness'));
  } else if (env.checkFiles) {
    let real: string | undefined;
    try {
      real = fs.realpathSync(root);
    } catch {
      real = undefined;
    }
    if (real !== undefined && exposes(real)) {
      problems.push(
        problem(
          `root ${root} resolves to ${real}, which exposes the host`,
          'choose a dedicated directory for this harness, not a symlink to a system tree',
        ),
      );
    } else if (real === undefined || !fs.statSync(real).isDirectory()) {
      problems.push(
        problem(
          `root ${root} is not an existing directory`,
          `create it (mkdir -p ${root}) or correct the path`,
        ),
      );
    }
  }
  return { grant: { root }, problems };
}

/** True when /proc/self/fd can stand in for openat(2) (Linux with /proc mounted). */
const PROC_FD = (() => {
  try {
    return fs.statSync('/proc/self/fd').isDirectory();
  } catch {
    return false;
  }
})();

/** A directory opened and checked to lie inside root; `at(name)` names an entry relative to it. */
export interface CheckedDir {
  fd: number;
  /** its real path when checked */
  real: string;
  /** a path that reaches `name` inside this very directory, whatever happens to its path later */
  at(name: string): string;
  close(): void;
}

function openCheckedDir(
  root: string,
  p: string,
  guestPath: string,
  capability: string,
): CheckedDir | PathFailure {
  let fd: number;
  try {
    fd = fs.openSync(p, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
  } catch (e) {
    return { error: `${capability}: ${JSON.stringify(guestPath)}: ${describeErrno(e)}` };
  }
  let real: string;
  try {
    real = fs.readlinkSync(`/proc/self/fd/${fd}`);
  } catch (e) {
    fs.closeSync(fd);
    return { error: `${capability}: ${JSON.stringify(guestPath)}: ${describeErrno(e)}` };
  }
  if (!isWithin(root, real) || inForbiddenTree(real) !== undefined) {
    fs.closeSync(fd);
    return {
      refused: `${capability}: ${JSON.stringify(guestPath)} resolves outside the granted root (symlink)`,
    };
  }
  return { fd, real, at: (name) => `/proc/self/fd/${fd}/${name}`, close: () => fs.closeSync(fd) };
}

/**
 * Open the parent directory of `abs` (inside canonical `root`), creating missing directories one
 * level at a time. Each level is created and opened relative to the handle of the level above,
 * already checked to lie inside root, so a component swapped for a symlink mid-way can neither
 * make a directory appear outside root nor lead the walk there. Without /proc (not Linux), falls
 * back to path-based creation with a re-check after each step ({@link ensureParent}).
 * @returns the checked parent directory (the caller closes it), or a failure.
 */
export function openParent(
  root: string,
  abs: string,
  guestPath: string,
  capability: string,
): CheckedDir | PathFailure {
  if (!PROC_FD) {
    const real = ensureParent(root, abs, guestPath, capability);
    if (typeof real !== 'string') return real;
    return { fd: -1, real, at: (name) => path.join(real, name), close: () => {} };
  }
  const rel = path.relative(root, path.dirname(abs));
  let dir = openCheckedDir(root, root, guestPath, capability);
  for (const part of rel === '' ? [] : rel.split(path.sep)) {
    if (!('fd' in dir)) return dir;
    const next = dir.at(part);
    try {
      fs.mkdirSync(next);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') {
        dir.close();
        return {
          error: `${capability}: cannot create directory for ${JSON.stringify(guestPath)}: ${describeErrno(e)}`,
        };
      }
    }
    const opened = openCheckedDir(root, next, guestPath, capability);
    dir.close();
    dir = opened;
  }
  return dir;
}

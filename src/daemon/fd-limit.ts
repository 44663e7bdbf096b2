/**
 * The process's open-file limit against --max-connections: each client connection costs a file
 * descriptor, so a cap above what the process may open cannot take effect (the kernel refuses the
 * extra accepts and clients see resets, not bermd's 503). At boot the cap is clamped to the soft
 * limit less a reserve for the daemon's own descriptors.
 */
import { readFileSync } from 'node:fs';

/**
 * Descriptors kept back from client connections: SQLite databases and their WAL files (the
 * store's and its checkpoint thread's), worker threads' message ports, the cache, the journal, the
 * listener, the protocol endpoint. Idle, bermd holds about 45; while its threads start (just after
 * it listens) the files they read while loading take it past 100 for a moment, so the reserve is
 * twice what it holds idle, not what it holds idle.
 */
export const FD_RESERVE = 128;

/**
 * The soft "Max open files" limit of this process, from Linux's /proc/self/limits (read after
 * Node has raised its soft limit to the hard one, so it is the limit in force).
 * @param text the file's contents (default: read /proc/self/limits)
 * @returns the limit, or null when unknown or "unlimited" (no /proc: not Linux)
 */
export function openFileLimit(text?: string): number | null {
  let s = text;
  if (s === undefined) {
    try {
      s = readFileSync('/proc/self/limits', 'utf8');
    } catch {
      return null;
    }
  }
  const m = /^Max open files\s+(\d+|unlimited)\s/m.exec(s);
  if (!m || m[1] === 'unlimited') return null;
  return Number(m[1]);
}

/**
 * Clamp a connection cap to an open-file limit.
 * @param max the cap asked for (--max-connections)
 * @param limit the soft open-file limit, or null when unknown (no clamp)
 * @param reserve descriptors kept for the daemon itself ({@link FD_RESERVE})
 * @returns the cap in force (at least 1), and a one-line warning naming the limit and the fix when
 *   it was lowered
 */
export function clampConnections(
  max: number,
  limit: number | null,
  reserve = FD_RESERVE,
): { value: number; warning: string | null } {
  if (limit === null || max + reserve <= limit) return { value: max, warning: null };
  const value = Math.max(1, limit - reserve);
  return {
    value,
    warning:
      `max-connections lowered from ${max} to ${value}: the open-file limit is ${limit} and ` +
      `${reserve} descriptors are kept for bermd itself; raise it (ulimit -n ${max + reserve} ` +
      `or LimitNOFILE= under systemd) or set --max-connections ${value} to silence this`,
  };
}

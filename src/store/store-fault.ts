/**
 * Faults of a store's medium, as opposed to faults of a request: the disk under the state
 * directory is full, its database is locked by another process past the busy timeout, the disk
 * failed a write, or the shared store's database is unreachable. A request that meets one is not
 * the client's mistake and nothing of it was acknowledged: bermd answers it 503 with Retry-After
 * (the client tries again once the operator freed space or the other process let go), never 400
 * or 500, and the CLI names the cause.
 */

/** What kind of store fault `e` is: a short cause for messages, or null when it is none. */
export function storeFault(e: unknown): string | null {
  if (!(e instanceof Error)) return null;
  const code = (e as { code?: unknown }).code;
  if (typeof code === 'string') {
    // better-sqlite3 reports SQLite's extended result codes by name (SQLITE_IOERR_WRITE, ...)
    if (code === 'ENOSPC' || code === 'EDQUOT' || code === 'SQLITE_FULL') return 'the disk is full';
    if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'))
      return 'the state database is locked by another process';
    if (code === 'EIO' || code.startsWith('SQLITE_IOERR')) return 'the disk failed a read or write';
    if (code === 'EROFS' || code.startsWith('SQLITE_READONLY')) return 'the state directory is read-only';
  }
  // the shared store's error (src/cluster), by name: the runtime does not depend on the cluster
  if (e.name === 'PgStoreError') return 'the shared store is unreachable';
  return null;
}

/**
 * Run `read` until it answers: a store fault (see {@link storeFault}) is met by `onFault` (its
 * cause and the wait, ms) and another try after 250 ms, doubling to 5 s; any other error is thrown.
 * For a boot that must wait for a shared store restarted meanwhile, rather than exit.
 */
export async function untilStoreAnswers<T>(
  read: () => T,
  onFault: (why: string, waitMs: number) => void,
): Promise<T> {
  for (let wait = 250; ; wait = Math.min(2 * wait, 5000)) {
    try {
      return read();
    } catch (e) {
      const fault = storeFault(e);
      if (fault === null) throw e;
      onFault(`${fault}: ${(e as Error).message}`, wait);
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}

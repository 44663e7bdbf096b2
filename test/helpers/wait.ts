// Waiting in tests: a sleep, and a poll of a condition with a generous bound that fails with a
// message naming what it waited for (a loaded 2-core machine can be slow, never silent).

/** Resolve after `ms` milliseconds. */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Resolve once `cond` holds, asking it every `everyMs` milliseconds (the first time at once).
 * @throws Error "timed out after <timeoutMs> ms waiting for <what>" when it still does not hold
 *   after `timeoutMs` milliseconds
 */
export async function until(
  what: string,
  cond: () => Promise<boolean>,
  timeoutMs = 60_000,
  everyMs = 250,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await cond()) return;
    await sleep(everyMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

/**
 * The first value other than undefined that `probe` gives, asking it every `everyMs` milliseconds
 * (the first time at once).
 * @throws Error "timed out after <timeoutMs> ms waiting for <what>" when it gives none within
 *   `timeoutMs` milliseconds
 */
export async function untilDefined<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 60_000,
  everyMs = 100,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() >= end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

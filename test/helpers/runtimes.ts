// Runtimes attached to PostgreSQL stores, as the tests of several "daemons" in one process make
// them: each store gets a BermRuntime of its own, kept in step with the others (PgStore.attach).
import type { Test } from 'tap';
import { BermRuntime, type RuntimeOptions } from '../../src/runtime/index.js';
import type { PgStore } from '../../src/store/pg-store.js';

/**
 * One runtime for each store in `stores` (in that order), created with `options` and that store,
 * and attached to it; all are closed at t's teardown (2 s each for running invocations).
 * @returns the runtimes, in the order of `stores`
 */
export async function attachedRuntimes(
  t: Test,
  stores: PgStore[],
  options: Omit<RuntimeOptions, 'store' | 'state'>,
): Promise<BermRuntime[]> {
  const rts: BermRuntime[] = [];
  t.teardown(async () => {
    await Promise.all(rts.map((r) => r.close(2000)));
  });
  for (const store of stores) {
    const rt = await BermRuntime.create({ ...options, store });
    store.attach(rt);
    rts.push(rt);
  }
  return rts;
}

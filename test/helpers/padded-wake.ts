// A wake of the store-level checkpoint tests: `w<i>` of harness qg, due far in the future, with a
// 200-byte payload so that each arm writes a page or more of WAL.
import type { WakeSpec } from '../../src/runtime/index.js';

/** The wake `w<i>` (see the module comment). */
export function paddedWake(i: number): WakeSpec {
  return {
    id: `w${i}`,
    kind: 'wake',
    harness: 'qg',
    entry: 'on_wake',
    when: 1e12 + i,
    payload: 'x'.repeat(200),
    armedBy: 'test',
    chain: null,
    depth: 0,
    armedAt: 0,
  };
}

// Tests that compile many ELFs on the optimising tier: Binaryen's optimiser is most of their time
// and runs on one thread. optimizeAhead() optimises an ELF in a worker thread (the engine's own
// background optimiser) and stores the result in the engine's cache under the key compile() looks
// up, so the foreground compile of the ELF later is a cache hit: a test file alternates ELFs
// between the worker and its own thread and uses both cores when they are free.
import { readFileSync } from 'node:fs';
import type { Engine } from '../../src/engine/engine.js';
import { BackgroundOptimizer } from '../../src/engine/optimizer.js';

const optimizer = new BackgroundOptimizer();

/**
 * Optimise `elf` (a path or bytes) on a worker thread into `engine`'s cache.
 * @returns a promise settled once the entry is stored; it never rejects (a failed translation is
 *   left for the foreground compile to report).
 */
export function optimizeAhead(engine: Engine, elf: string | Uint8Array): Promise<void> {
  if (engine.cache === null) throw new Error('optimizeAhead: the engine has no cache');
  const bytes = typeof elf === 'string' ? new Uint8Array(readFileSync(elf)) : elf;
  const key = engine.keyFor(bytes, 'optimized');
  if (engine.cache.get(key) !== null) return Promise.resolve();
  return optimizer.hold(
    optimizer.optimize(bytes, engine.options).then(
      ({ wasm }) => {
        engine.cache!.put(key, wasm);
      },
      () => undefined,
    ),
  );
}

/** Stop the worker (call when the file's compiles are done). */
export function stopOptimizingAhead(): Promise<void> {
  return optimizer.close();
}

// A capability whose one call never returns (it blocks its thread for an hour): what a host call
// wedged in a buggy embedder capability looks like to the queue. Imported by a test and, through
// the runtime's workerModules, by every queue worker.
import { capabilityNames, registerCapability } from '../../src/capabilities/index.js';
import { defineCapability } from '../../src/capabilities/types.js';

if (!capabilityNames().includes('blocker')) {
  registerCapability(
    defineCapability({
      name: 'blocker',
      calls: {
        'test.block': () => {
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 3_600_000);
          return { fields: [] };
        },
      },
    }),
  );
}

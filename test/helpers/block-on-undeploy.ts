// A queue worker that is busy, without the pool counting it busy, when a run is posted to it:
// what replaying deployments to a replacement worker, or deploying a large harness, looks like on
// a loaded machine. Imported through the runtime's workerModules by every queue worker: the
// undeployment of a harness named `slow` blocks its worker's thread for 1.5 s as it arrives, so
// the messages posted after it (a run) wait that long before the worker handles them. (Not its
// deployment: the pool waits for a deployment's answer, so that would block before the caller
// goes on; an undeployment is posted and not answered.)
import { parentPort } from 'node:worker_threads';

/** How long the undeployment of `slow` keeps its worker busy, ms. */
export const BLOCK_MS = 1500;

parentPort?.on('message', (m: { type?: string; name?: string }) => {
  if (m.type === 'undeploy' && m.name === 'slow')
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, BLOCK_MS);
});

// A job module for the synchronous bridge (src/sync/bridge.ts) whose first import
// takes 6 s: it stands for a bridge worker that is slow to start (a loaded machine), for the test
// that the call's deadline bounds the start-up too.
await new Promise((resolve) => setTimeout(resolve, 6000));

let runs = 0;

/** How many times a job of this module ran in this worker, this one included. */
export function count(): Promise<number> {
  return Promise.resolve(++runs);
}

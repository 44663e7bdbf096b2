// A queue worker that dies the moment it is handed a run, before it can start the guest: what a
// worker crash (out of memory in a translation, a fatal error) looks like to a run posted to it.
// Imported through the runtime's workerModules by every queue worker. It exits its worker on the
// first run of harness `doomed` only, once per marker file: the marker (BERM_TEST_EXIT_MARKER) is
// created as it exits, so the replacement worker takes the re-delivery.
import * as fs from 'node:fs';
import { parentPort } from 'node:worker_threads';

const marker = process.env.BERM_TEST_EXIT_MARKER;
parentPort?.on('message', (m: { type?: string; harness?: string }) => {
  if (m.type !== 'run' || m.harness !== 'doomed' || !marker) return;
  try {
    fs.writeFileSync(marker, '', { flag: 'wx' });
  } catch {
    return; // a worker already died for it
  }
  // ends this thread at once: the worker's own handler of the run (a promise job) never runs
  process.exit(7);
});

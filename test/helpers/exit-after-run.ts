// A queue worker that dies right after a guest of harness `late` ran, before its outcome reaches
// the queue: a worker lost after its guest started (a crash, or a worker replaced while stuck in a
// host call), as the queue sees it. Imported through the runtime's workerModules by every queue
// worker. It dies for the first BERM_TEST_LATE_EXITS runs (default 1), each claimed by creating
// the file exit-N in BERM_TEST_LATE_DIR, so replacement workers share the count.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parentPort } from 'node:worker_threads';

const dir = process.env.BERM_TEST_LATE_DIR;
const times = Number(process.env.BERM_TEST_LATE_EXITS ?? '1');
const late = new Set<number>();
const port = parentPort;
if (port && dir) {
  port.on('message', (m: { type?: string; harness?: string; id?: number }) => {
    if (m.type === 'run' && m.harness === 'late' && m.id !== undefined) late.add(m.id);
  });
  const post = port.postMessage.bind(port);
  port.postMessage = (m: { type?: string; id?: number }) => {
    if (m?.type === 'done' && m.id !== undefined && late.has(m.id)) {
      for (let i = 1; i <= times; i++) {
        try {
          fs.writeFileSync(path.join(dir, `exit-${i}`), '', { flag: 'wx' });
          process.exit(7);
        } catch {
          // taken: the next slot
        }
      }
    }
    post(m);
  };
}

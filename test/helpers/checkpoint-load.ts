// A write load on a SqliteStore whose WAL is checkpointed by its own thread, for
// test/store-checkpoint.test.ts. Run: node --import=./scripts/ts/register.mjs
// test/helpers/checkpoint-load.ts MODE STATE ACKS FIRST
//   MODE 'load': until killed, wake FIRST, FIRST+1, ... is armed, then claimed five steps later,
//     then finished five steps after that; each step is acknowledged once its call returned (its
//     transaction committed) by a line appended to the file ACKS with a synchronous write:
//     "a <i>" armed, "c <i>" claimed, "f <i>" finished. Small checkpoint settings, so that
//     checkpoints and WAL restarts run all through the load.
//   MODE 'leave': arm and claim a few hundred wakes, then end without closing the store: the
//     process must exit by itself (the checkpoint thread never keeps it alive).
import * as fs from 'node:fs';
import { SqliteStore } from '../../src/runtime/index.js';
import { paddedWake } from './padded-wake.js';

const [mode, state, acks, firstArg] = process.argv.slice(2);
const first = Number(firstArg ?? 0);

const store = SqliteStore.open(state!, {
  checkpoints: 'background',
  checkpointTuning: { intervalMs: 10, restartBytes: 1024 * 1024, keepBytes: 256 * 1024 },
});
const seqs = new Map<number, number>();

if (mode === 'leave') {
  for (let i = 0; i < 300; i++) {
    const r = store.dues.arm(paddedWake(first + i)).record;
    store.dues.claim(r.seq);
  }
  process.stdout.write('left\n');
} else {
  const fd = fs.openSync(acks!, 'a');
  const ack = (what: string, i: number) => fs.writeSync(fd, `${what} ${i}\n`);
  for (let i = first; ; i++) {
    seqs.set(i, store.dues.arm(paddedWake(i)).record.seq);
    ack('a', i);
    const c = i - 5;
    if (c >= first) {
      if (!store.dues.claim(seqs.get(c)!)) throw new Error(`w${c} could not be claimed`);
      ack('c', c);
    }
    const f = i - 10;
    if (f >= first) {
      store.dues.finish(`w${f}`, seqs.get(f)!);
      seqs.delete(f);
      ack('f', f);
    }
    // a serving thread yields between its transactions: the checkpoint thread's messages and
    // timers here stay as they would be
    if (i % 50 === 0) await new Promise((r) => setImmediate(r));
  }
}

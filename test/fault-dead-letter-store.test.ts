// A wake whose journal record cannot be written (a real ENOSPC: the state's journal.jsonl lives on
// a small tmpfs that is full, the due-set on another disk) is delivered again after the backoff,
// and after wakeAttempts deliveries moves to the dead-letter set with reason store-error; nothing
// is acknowledged meanwhile. Once the disk has room, the entry retried runs and is journaled.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t from 'tap';
import { BermRuntime, readJournal, type JournalRecord } from '../src/runtime/index.js';
import { ROOT, TEST_CACHE } from './helpers/fixtures.js';
import { smallDisk } from './helpers/tmpfs.js';
import { until } from './helpers/wait.js';

const QG = new Uint8Array(fs.readFileSync(path.join(ROOT, 'test/data/queue-guest.elf')));

t.test(
  'journal on a full disk: retried, then dead-lettered as store-error; retried later it runs',
  async (t) => {
    const disk = smallDisk(t, 256 * 1024);
    if (!disk) return;
    const state = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-dead-store-'));
    t.teardown(() => fs.rmSync(state, { recursive: true, force: true }));
    const journalFile = path.join(disk.dir, 'journal.jsonl');
    fs.writeFileSync(journalFile, '');
    fs.symlinkSync(journalFile, path.join(state, 'journal.jsonl'));
    const rt = await BermRuntime.create({
      state,
      poolSize: 1,
      cacheDir: TEST_CACHE,
      limits: { wakeAttempts: 3, wakeRetryMs: 200 },
    });
    t.teardown(() => rt.close());
    const logs: string[] = [];
    rt.on('log', (l: string) => logs.push(l));
    const records: JournalRecord[] = [];
    rt.on('invocation', (r: JournalRecord) => records.push(r));
    await rt.deploy('qg', QG, { capabilities: [] });
    rt.start();
    disk.fill();
    rt.arm({ harness: 'qg', id: 'unjournaled', payload: 'hello' });
    await until('in the dead-letter set', async () => rt.deadList().length === 1, 120_000, 100);
    t.match(rt.deadList(), [
      { reason: 'store-error', attempts: 3, wake: { id: 'unjournaled', payload: 'hello', attempt: 3 } },
    ]);
    t.match(rt.deadList()[0]!.lastError, /journal record could not be written.*ENOSPC/);
    t.match(
      records.filter((r) => r.trigger === 'wake').map((r) => r.attempt),
      [1, 2, 3],
      'three deliveries ran (at-least-once), none acknowledged',
    );
    t.equal(
      logs.filter((l) => /delivered again in \d+ ms: its journal record could not be written/.test(l)).length,
      2,
    );
    t.equal(rt.stats().wakesClaimed, 0, 'no claim left');
    t.same(readJournal(journalFile), [], 'nothing reached the journal');

    // room again: the entry retried runs once, journaled
    disk.free();
    t.equal(rt.retryDead('unjournaled').status, 'armed');
    await until(
      'journaled',
      async () => readJournal(journalFile).some((r) => r.trigger === 'wake' && r.outcome === 'ok'),
      60_000,
      100,
    );
    t.match(
      readJournal(journalFile).filter((r) => r.trigger === 'wake'),
      [{ wake: 'unjournaled', attempt: 1, outcome: 'ok' }],
    );
    t.same(rt.deadList(), []);
  },
);

// SQLite's WAL checkpoints off the thread that serves the queue (src/store/wal-checkpointer.ts):
// the runtime's store connection never checkpoints (SQLite's automatic checkpoint, which runs once
// the WAL holds 1,000 pages, would keep the WAL under ~1,000 pages of frames; without any
// checkpoint it grows with every commit), the checkpoint thread keeps the WAL under a stated
// bound through a steady load and gives the space back when idle, close stops the thread before
// the store's own connection closes (SQLite removes the WAL when its last connection closes), the
// thread never keeps a process alive, a failed checkpoint is logged and counted without harm, and
// a process SIGKILLed mid-load leaves a database that opens whole with every acknowledged write.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t, { type Test } from 'tap';
import { BermRuntime, SqliteStore } from '../src/runtime/index.js';
import { openSqlite } from '../src/store/sqlite-driver.js';
import { WalCheckpointer } from '../src/store/wal-checkpointer.js';
import { ROOT, TEST_CACHE } from './helpers/fixtures.js';
import { paddedWake } from './helpers/padded-wake.js';

/** bytes of one WAL frame of a 4 KiB page (the page and a 24-byte frame header) */
const FRAME = 4096 + 24;
/** SQLite's default wal_autocheckpoint, pages */
const AUTO_PAGES = 1000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function tmp(t: Test, name: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `berm-ckpt-${name}-`));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** What the queue's thread commits per wake: an arm, a claim and a finish (three transactions). */
function cycle(store: SqliteStore, from: number, n: number): void {
  for (let i = from; i < from + n; i++) {
    const r = store.dues.arm(paddedWake(i)).record;
    store.dues.claim(r.seq);
    store.dues.finish(r.id, r.seq);
  }
}

/** Wait (at most 20 s) for the checkpoint thread to run: the connection's own checkpoint is then off. */
async function ready(store: SqliteStore): Promise<number> {
  for (let i = 0; i < 400 && store.checkpoints().automatic !== 0; i++) await sleep(50);
  return store.checkpoints().automatic;
}

const walSize = (dir: string) => {
  try {
    return fs.statSync(path.join(dir, 'state.sqlite-wal')).size;
  } catch {
    return 0;
  }
};

t.test("the runtime's store connection never checkpoints; the thread does", async (t) => {
  const dir = tmp(t, 'rt');
  const rt = await BermRuntime.create({ state: dir, poolSize: 1, cacheDir: TEST_CACHE });
  const store = rt.store as SqliteStore;
  t.ok(store.checkpoints().background, 'a checkpoint thread runs');
  t.equal(await ready(store), 0, "PRAGMA wal_autocheckpoint on the queue's connection is 0");
  cycle(store, 0, 2000);
  for (let i = 0; i < 100 && store.checkpoints().background!.frames === 0; i++) await sleep(50);
  t.ok(store.checkpoints().background!.frames > 0, 'the thread copied WAL frames into the database');
  await rt.close(0);
  t.notOk(
    fs.existsSync(path.join(dir, 'state.sqlite-wal')),
    'closed: the WAL is gone (the last connection closed)',
  );
});

t.test(
  'without its thread ticking, the serving connection lets the WAL grow (no checkpoint of its own)',
  async (t) => {
    const dir = tmp(t, 'alone');
    // the thread's first look is an hour away: whatever checkpoints now is the serving connection
    const store = SqliteStore.open(dir, {
      checkpoints: 'background',
      checkpointTuning: { intervalMs: 3_600_000 },
    });
    t.teardown(() => store.close());
    t.equal(await ready(store), 0, 'the thread runs: the connection checkpoints no more');
    cycle(store, 0, 1000);
    const frames = walSize(dir) / FRAME;
    // each wake commits ~15 pages; an automatic checkpoint would have reset the WAL every ~1,000
    t.ok(
      frames > 3 * AUTO_PAGES,
      `the WAL holds ${Math.round(frames)} frames, past any automatic checkpoint`,
    );
    // an independent connection sees them all still to be copied, and copies them
    const other = openSqlite(path.join(dir, 'state.sqlite'));
    const r = (other.pragma('wal_checkpoint(PASSIVE)') as { log: number; checkpointed: number }[])[0]!;
    other.close();
    t.ok(r.log > 3 * AUTO_PAGES, `another connection finds ${r.log} frames in the WAL`);
    t.equal(r.checkpointed, r.log, 'and copies them all (nothing held them)');
  },
);

t.test('a steady load: the WAL stays under its bound, and is given back when idle', async (t) => {
  const dir = tmp(t, 'bound');
  const restartBytes = 2 * 1024 * 1024;
  const keepBytes = 512 * 1024;
  const store = SqliteStore.open(dir, {
    checkpoints: 'background',
    checkpointTuning: { intervalMs: 20, restartBytes, keepBytes },
  });
  t.teardown(() => store.close());
  t.equal(await ready(store), 0, 'the thread runs');
  // up to ~650 wakes a second for 4 s (each ~15 frames: ~150 MiB of WAL without checkpoints)
  let max = 0;
  let n = 0;
  const t0 = Date.now();
  while (Date.now() - t0 < 4000) {
    cycle(store, n, 10);
    n += 10;
    max = Math.max(max, walSize(dir));
    await sleep(15);
  }
  const s = store.checkpoints();
  t.equal(s.automatic, 0, 'the serving connection never checkpoints');
  // the bound: the RESTART threshold, plus what the load appends while a tick's passes run (a
  // loaded machine can hold the thread back for a while: 16 MiB is ~0.5 s of this load)
  const bound = restartBytes + 16 * 1024 * 1024;
  const counters = JSON.stringify(s.background);
  // each commit appends at least one frame: three a wake at the very least
  const least = n * 3 * FRAME;
  t.ok(
    least > bound,
    `the load appended at least ${(least / 2 ** 20).toFixed(0)} MiB of frames (${n} wakes)`,
  );
  t.ok(s.background!.checkpoints > 0, 'the thread checkpointed');
  t.ok(
    max <= bound,
    `the WAL file stayed at most ${(max / 2 ** 20).toFixed(1)} MiB (bound ${bound / 2 ** 20} MiB; ${counters})`,
  );
  t.equal(s.background!.failures, 0, 'no checkpoint failed');
  // idle: a TRUNCATE gives the file back once it is all copied
  for (let i = 0; i < 100 && walSize(dir) > keepBytes; i++) await sleep(20);
  t.ok(
    walSize(dir) <= keepBytes,
    `idle, the WAL file is ${walSize(dir)} bytes (<= ${keepBytes}; ${JSON.stringify(store.checkpoints())})`,
  );
  // what was committed is there: every wake finished, none pending or claimed
  t.equal(store.dues.count(), 0, 'no wake left pending');
  t.equal(store.dues.claimed().length, 0, 'no claim left');
});

t.test('close stops the thread first; left open, the process exits by itself', async (t) => {
  const dir = tmp(t, 'close');
  const store = SqliteStore.open(dir, { checkpoints: 'background', checkpointTuning: { intervalMs: 5 } });
  cycle(store, 0, 500);
  await sleep(50); // the thread has its connection open
  store.close();
  t.notOk(
    fs.existsSync(path.join(dir, 'state.sqlite-wal')),
    "right after close the WAL is gone: the thread's connection had closed before the store's",
  );

  const left = tmp(t, 'left');
  const child = spawn(
    process.execPath,
    ['--import=./scripts/ts/register.mjs', 'test/helpers/checkpoint-load.ts', 'leave', left],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const code = await Promise.race([
    new Promise<number | null>((r) => child.on('exit', (c) => r(c))),
    sleep(60_000).then(() => 'hung' as const),
  ]);
  if (code === 'hung') child.kill('SIGKILL');
  t.equal(code, 0, `the process exited by itself with the store left open (${out.trim()})`);
});

t.test('a failing checkpoint is logged and counted; the other databases go on', async (t) => {
  const dir = tmp(t, 'fail');
  const junk = path.join(dir, 'junk.sqlite');
  fs.writeFileSync(junk, 'this is not a database, and it is long enough to have a header\n'.repeat(100));
  // a good database in WAL mode, written with SQLite's automatic checkpoint off
  const goodFile = path.join(dir, 'good.sqlite');
  const good = openSqlite(goodFile);
  t.teardown(() => good.close());
  good.pragma('journal_mode = WAL');
  good.pragma('wal_autocheckpoint = 0');
  good.exec('CREATE TABLE t (x BLOB)');
  const lines: string[] = [];
  let lost: string | null = null;
  const c = new WalCheckpointer(
    [junk, goodFile],
    { log: (l) => lines.push(l), onReady: () => {}, onLost: (why) => (lost = why) },
    { intervalMs: 10 },
  );
  t.teardown(() => c.close());
  for (let i = 0; i < 250 && lines.length === 0; i++) await sleep(20);
  t.equal(lines.length, 1, 'a line was logged');
  t.match(lines[0], `WAL checkpoint of ${junk} failed: `);
  t.match(lines[0], /not a database/);
  const before = c.stats();
  t.ok(before.failures >= 1, `failures counted (${before.failures})`);
  t.match(before.lastFailure, /not a database/);
  const put = good.prepare('INSERT INTO t VALUES (randomblob(3000))');
  for (let i = 0; i < 300; i++) put.run();
  for (let i = 0; i < 250 && c.stats().frames === 0; i++) await sleep(20);
  t.ok(c.stats().frames > 0, 'the good database is checkpointed beside the failing one');
  await sleep(200);
  t.ok(c.stats().failures > before.failures, 'the failing one is tried again at each tick');
  t.equal(lines.length, 1, 'the same failure is logged once, not at every tick');
  t.equal(lost, null, 'the thread lives on');
});

t.test('SIGKILL mid-load: the database opens whole with every acknowledged write', async (t) => {
  const dir = tmp(t, 'kill');
  const acks = path.join(dir, 'acks');
  const state = path.join(dir, 'state');
  const expected = new Map<number, 'a' | 'c' | 'f'>();
  let first = 0;
  for (let round = 0; round < 3; round++) {
    const child = spawn(
      process.execPath,
      [
        '--import=./scripts/ts/register.mjs',
        'test/helpers/checkpoint-load.ts',
        'load',
        state,
        acks,
        String(first),
      ],
      { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<string>((r) => child.on('exit', (c, s) => r(`${c ?? s}`)));
    // kill once the load has run a while (acks past this round's start), at a moment that varies
    const size0 = fs.existsSync(acks) ? fs.statSync(acks).size : 0;
    const until = Date.now() + 60_000;
    while (Date.now() < until && (fs.existsSync(acks) ? fs.statSync(acks).size : 0) < size0 + 200_000) {
      if (child.exitCode !== null) break;
      await sleep(20);
    }
    await sleep(50 + round * 137);
    child.kill('SIGKILL');
    t.equal(await exited, 'SIGKILL', `round ${round}: killed mid-load ${err.trim()}`);
    for (const line of fs.readFileSync(acks, 'utf8').split('\n')) {
      const m = /^([acf]) (\d+)$/.exec(line);
      if (m) expected.set(Number(m[2]), m[1] as 'a' | 'c' | 'f');
    }
    first = Math.max(...expected.keys()) + 1000;

    const db = openSqlite(path.join(state, 'state.sqlite'), { fileMustExist: true });
    const ok = db.pragma('integrity_check') as { integrity_check: string }[];
    const wakes = new Set((db.prepare('SELECT id FROM wakes').all() as { id: string }[]).map((r) => r.id));
    const claims = new Set((db.prepare('SELECT id FROM claims').all() as { id: string }[]).map((r) => r.id));
    db.close();
    t.same(ok, [{ integrity_check: 'ok' }], `round ${round}: the database is whole`);
    // each acknowledged step is there; one more, committed but not yet acknowledged, may be too
    const wrong: string[] = [];
    for (const [i, step] of expected) {
      const id = `w${i}`;
      const where = wakes.has(id) ? 'a' : claims.has(id) ? 'c' : 'f';
      const allowed = step === 'a' ? ['a', 'c'] : step === 'c' ? ['c', 'f'] : ['f'];
      if (!allowed.includes(where)) wrong.push(`${id}: acknowledged ${step}, found ${where}`);
    }
    t.same(wrong.slice(0, 10), [], `round ${round}: ${expected.size} acknowledged wakes as acknowledged`);
    t.ok(expected.size > 1000 * (round + 1), `round ${round}: a real load (${expected.size} wakes)`);
  }
});

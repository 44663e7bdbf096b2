/**
 * The WAL checkpointer's thread (started by wal-checkpointer.ts): its own better-sqlite3 connection
 * to each watched database, and a loop that checkpoints them every `intervalMs`, so that the
 * connections that serve the queue (`wal_autocheckpoint = 0`) never copy the WAL back into the
 * database or sync it themselves.
 *
 * Each tick, for each database:
 * - a PASSIVE checkpoint: copies what it can of the WAL into the database (syncing the WAL before
 *   and the database after, as SQLite's automatic checkpoint does) and takes no lock a writer
 *   needs, so the writer goes on committing meanwhile. When it copies everything and no commit
 *   came during it, the writer's next transaction starts the WAL again from its beginning;
 * - under a steady write load that never happens (a commit lands during every pass), so once the
 *   WAL holds more than `restartBytes` of frames and is not all copied, the tick runs PASSIVE
 *   passes until one copies everything or at most SMALL_TAIL frames (each pass copies what came
 *   during the one before, so they shorten), then, if frames are left, a RESTART checkpoint: it
 *   holds the writer lock while it copies that small tail and syncs, a few ms, and waits for the
 *   readers to leave the WAL, so the writer's next transaction starts it again from its
 *   beginning. It never waits more than `busyMs` for the lock or for readers (it then gives up,
 *   and the next RESTART or TRUNCATE waits 1 s, doubling up to 16 s while they keep failing: the
 *   writer is blocked while one waits for a reader);
 * - when the WAL has not changed for IDLE_MS, is all copied and its file is larger than
 *   `keepBytes`, a TRUNCATE checkpoint gives the space back.
   A frame is a page and its 24-byte header, so the threshold in frames depends on the page size.
 *
 * The loop sleeps on a shared word (Atomics.wait), so the owner stops it at once and waits for
 * the connections to be closed (control word CLOSED); new databases arrive on a MessagePort read
 * synchronously. Counters are written to a shared Float64Array (see {@link STAT}); a failure is
 * posted to the owner as a message and never ends the loop: the connection is closed and opened
 * again at the next tick.
 */
import * as fs from 'node:fs';
import { parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { openSqlite, type SqliteDatabase } from './sqlite-driver.js';
import { CTL, STAT, type CheckpointWorkerData, type CheckpointWorkerMessage } from './wal-checkpointer.js';

/** A PASSIVE pass that copied at most this many frames leaves a tail a RESTART copies in ms. */
const SMALL_TAIL = 64;
/** At most this many PASSIVE passes before a RESTART. */
const MAX_PASSES = 6;
/** A WAL unchanged for this long (ms) is idle: its file may be truncated. */
const IDLE_MS = 1000;

interface Watched {
  file: string;
  db: SqliteDatabase | null;
  /** what the last checkpoint of this database answered (null: none, or the WAL was reset since) */
  last: CheckpointRow | null;
  /** the WAL frames past which a RESTART resets it (restartBytes in this database's pages) */
  restartFrames: number;
  /** no RESTART or TRUNCATE before this instant (performance.now(), ms): see `busy` */
  restartNotBefore: number;
  backoffMs: number;
  /** when the WAL last changed (performance.now(), ms) */
  changedAt: number;
  failing: boolean;
}

interface CheckpointRow {
  busy: number;
  log: number;
  checkpointed: number;
}

function run(data: CheckpointWorkerData): void {
  const ctl = new Int32Array(data.control);
  const stat = new Float64Array(data.stats);
  const add = (slot: number, n = 1) => void (stat[slot] = stat[slot]! + n);
  const most = (slot: number, v: number) => void (stat[slot] = Math.max(stat[slot]!, v));
  const watch = (file: string): Watched => ({
    file,
    db: null,
    last: null,
    restartFrames: 0,
    restartNotBefore: 0,
    backoffMs: 0,
    changedAt: 0,
    failing: false,
  });
  const watched: Watched[] = data.files.map(watch);

  const fail = (w: Watched, e: unknown) => {
    add(STAT.FAILURES);
    w.failing = true;
    try {
      w.db?.close();
    } catch {
      // closing a connection that failed: nothing more to report
    }
    w.db = null;
    w.last = null;
    const err = e as { message?: unknown; code?: unknown };
    parentPort!.postMessage({
      type: 'failure',
      file: w.file,
      message: String(err?.message ?? e),
      code: typeof err?.code === 'string' ? err.code : null,
    } satisfies CheckpointWorkerMessage);
  };

  // A RESTART or TRUNCATE that met a writer or a reader past busyMs held the writer lock while it
  // waited: the next one waits a while (1 s, doubling up to 16 s), so a long reader elsewhere (a
  // listing in another process) does not stall the writer at every tick
  const busy = (w: Watched) => {
    add(STAT.BUSY);
    w.backoffMs = Math.min(16_000, Math.max(1000, w.backoffMs * 2));
    w.restartNotBefore = performance.now() + w.backoffMs;
  };

  const checkpoint = (db: SqliteDatabase, mode: string): CheckpointRow =>
    (db.pragma(`wal_checkpoint(${mode})`) as CheckpointRow[])[0]!;

  const tick = (w: Watched) => {
    // the owner created the file and set it to WAL: a connection opened here only joins it
    if (w.db === null) {
      const opened = openSqlite(w.file, { fileMustExist: true, timeout: data.busyMs });
      w.db = opened;
      const page = (opened.pragma('page_size') as { page_size: number }[])[0]!.page_size;
      // a frame is a page and its 24-byte header
      w.restartFrames = Math.max(1, Math.floor(data.restartBytes / (page + 24)));
    }
    const db = w.db;
    let r = checkpoint(db, 'PASSIVE');
    if (r.log < 0) return; // not (yet) in WAL mode: nothing to do
    most(STAT.WAL_FRAMES_MAX, r.log);
    // frames copied by a pass: its count of copied frames less the one before it, unless the WAL
    // started again between the two (then all of them; a restart hidden by as many new frames is
    // counted short: the counter is a gauge of the work, not an audit)
    const count = (before: CheckpointRow | null, after: CheckpointRow): number => {
      const n =
        before !== null && after.log >= before.log && after.checkpointed >= before.checkpointed
          ? after.checkpointed - before.checkpointed
          : after.checkpointed;
      if (n > 0) {
        add(STAT.CHECKPOINTS);
        add(STAT.FRAMES, n);
      }
      return n;
    };
    count(w.last, r);
    const now = performance.now();
    if (w.last === null || r.log !== w.last.log) w.changedAt = now;
    w.last = r;
    if (now < w.restartNotBefore) return;
    if (r.log >= w.restartFrames) {
      // A pass answers the frames it saw at its start and how many are copied: "all copied" says
      // nothing of commits during it. A pass that saw no new frame since the one before, with all
      // copied, proves there was no commit between them: the writer's next transaction starts
      // the WAL again by itself.
      let settled = false;
      for (let i = 0; i < MAX_PASSES; i++) {
        const next = checkpoint(db, 'PASSIVE');
        if (next.log < r.log) {
          // the writer started the WAL again by itself
          count(null, next);
          w.last = next;
          return;
        }
        const n = count(r, next);
        settled = next.log === r.log && next.checkpointed === next.log;
        w.last = r = next;
        if (settled || n <= SMALL_TAIL) break;
      }
      if (!settled) {
        const t0 = performance.now();
        const done = checkpoint(db, 'RESTART');
        if (done.busy !== 0) busy(w);
        else {
          count(r, done);
          w.last = done;
          add(STAT.RESTARTS);
          most(STAT.RESTART_MAX_MS, performance.now() - t0);
          w.backoffMs = 0;
        }
        return;
      }
    }
    if (
      now - w.changedAt >= IDLE_MS &&
      r.log > 0 &&
      r.checkpointed === r.log &&
      walBytes(w.file) > data.keepBytes
    ) {
      const done = checkpoint(db, 'TRUNCATE');
      if (done.busy !== 0) busy(w);
      else {
        add(STAT.TRUNCATES);
        w.last = null;
      }
    }
  };

  // after this store, a stop requested before it is seen below: nothing is opened
  Atomics.store(ctl, CTL.STARTED, 1);
  // from here on this thread checkpoints: the owner turns its connections' own checkpoint off
  parentPort!.postMessage({ type: 'ready' } satisfies CheckpointWorkerMessage);
  let signal = Atomics.load(ctl, CTL.SIGNAL);
  for (;;) {
    // sleeps the interval, or until the owner bumps SIGNAL (a stop, a new database)
    Atomics.wait(ctl, CTL.SIGNAL, signal, data.intervalMs);
    signal = Atomics.load(ctl, CTL.SIGNAL);
    if (Atomics.load(ctl, CTL.STOP) !== 0) break;
    for (let m = receiveMessageOnPort(data.port); m; m = receiveMessageOnPort(data.port)) {
      const file = (m.message as { watch: string }).watch;
      if (!watched.some((w) => w.file === file)) watched.push(watch(file));
    }
    for (const w of watched) {
      if (Atomics.load(ctl, CTL.STOP) !== 0) break;
      try {
        tick(w);
        if (w.failing) {
          w.failing = false;
          parentPort!.postMessage({ type: 'recovered', file: w.file } satisfies CheckpointWorkerMessage);
        }
      } catch (e) {
        fail(w, e);
      }
    }
  }
  for (const w of watched) {
    try {
      w.db?.close();
    } catch {
      // closing at the end: the owner's own connection closes the database after this one
    }
  }
  data.port.close();
  Atomics.store(ctl, CTL.CLOSED, 1);
  Atomics.notify(ctl, CTL.CLOSED);
}

/** Size of the WAL file of `file`, bytes (0 when there is none). */
function walBytes(file: string): number {
  try {
    return fs.statSync(`${file}-wal`).size;
  } catch {
    return 0;
  }
}

if (parentPort && (workerData as { control?: unknown } | null)?.control instanceof SharedArrayBuffer) {
  run(workerData as CheckpointWorkerData);
}

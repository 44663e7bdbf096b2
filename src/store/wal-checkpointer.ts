/**
 * SQLite's WAL checkpoints moved off the thread that serves the queue. A connection in WAL mode
 * appends each commit to the `-wal` file; a checkpoint copies those pages back into the database
 * and lets the WAL start again from its beginning. SQLite runs one automatically on the committing
 * connection once the WAL holds 1,000 pages, and it syncs the WAL and the database there: 20-44 ms
 * on the queue's thread about every 109 wakes (bench/README.md, "Wake lateness").
 *
 * A {@link WalCheckpointer} is one worker thread (wal-checkpoint-worker.ts) with a connection of
 * its own to each database it watches; once it runs (`onReady`) the owner sets
 * `wal_autocheckpoint = 0` on its serving connections, so that thread is the only one that
 * checkpoints. Checkpointing from another
 * connection changes nothing of what a commit guarantees: a commit is in the WAL when it returns,
 * as before, and a checkpoint only ever copies committed pages. How the WAL stays bounded under a
 * steady load (PASSIVE passes, then a short RESTART past `restartBytes`) is told in the worker.
 *
 * The worker is unreferenced (it never keeps a process alive) and {@link WalCheckpointer.close}
 * stops it and waits, bounded, for its connections to close, so the owner's connection closes
 * last (SQLite then checkpoints and removes the WAL, as it did). A failed checkpoint is counted
 * and logged (at most once a minute for the same error) and the next tick tries again; a worker
 * that dies or cannot start is reported through `onLost`, whose owner gives its connections their
 * automatic checkpoint back.
 */
import { createRequire } from 'node:module';
import type { MessagePort, Worker } from 'node:worker_threads';

/** Control words of the shared Int32Array. */
export const CTL = {
  /** set by the owner: stop */
  STOP: 0,
  /** set by the worker once its connections are closed */
  CLOSED: 1,
  /** bumped by the owner to wake the worker (a stop, a new database) */
  SIGNAL: 2,
  /** set by the worker when its loop begins (before it opens anything) */
  STARTED: 3,
} as const;
const CTL_WORDS = 4;

/** Slots of the shared Float64Array of counters (written by the worker only). */
export const STAT = {
  /** checkpoints that copied at least one frame (PASSIVE, RESTART or TRUNCATE) */
  CHECKPOINTS: 0,
  /** WAL frames copied into the databases */
  FRAMES: 1,
  /** RESTART checkpoints done (the writer lock taken to copy a tail the PASSIVE passes left) */
  RESTARTS: 2,
  /** TRUNCATE checkpoints done (an idle WAL file emptied) */
  TRUNCATES: 3,
  /** RESTART or TRUNCATE attempts that met a writer or reader past `busyMs` (tried again later) */
  BUSY: 4,
  /** failed checkpoints or opens (each also posted as a message) */
  FAILURES: 5,
  /** the longest RESTART, ms: about the longest this thread held the writer lock */
  RESTART_MAX_MS: 6,
  /** the most frames a WAL held when a tick looked at it */
  WAL_FRAMES_MAX: 7,
} as const;
const STAT_SLOTS = 8;

/** What the owner hands the worker (its workerData). */
export interface CheckpointWorkerData {
  files: string[];
  control: SharedArrayBuffer;
  stats: SharedArrayBuffer;
  port: MessagePort;
  intervalMs: number;
  restartBytes: number;
  keepBytes: number;
  busyMs: number;
}

/**
 * A message of the worker: its loop runs (it checkpoints from now on), a failure on a file, or
 * checkpoints of a file back after failures.
 */
export type CheckpointWorkerMessage =
  | { type: 'ready' }
  | { type: 'failure'; file: string; message: string; code: string | null }
  | { type: 'recovered'; file: string };

/** When and how hard the worker checkpoints (all optional; the defaults suit the runtime's store). */
export interface CheckpointTuning {
  /** ms between two looks at each WAL (default 50) */
  intervalMs?: number;
  /** a WAL holding more than this many bytes of frames is reset by a RESTART (default 32 MiB) */
  restartBytes?: number;
  /** an idle, fully copied WAL file larger than this many bytes is truncated (default 4 MiB) */
  keepBytes?: number;
  /** the longest a RESTART or TRUNCATE waits for the writer lock or for readers, ms (default 50) */
  busyMs?: number;
}

/** What the checkpointer did since it started (see {@link STAT} for each counter). */
export interface CheckpointStats {
  checkpoints: number;
  frames: number;
  restarts: number;
  truncates: number;
  busy: number;
  failures: number;
  restartMaxMs: number;
  walFramesMax: number;
  /** the last failure's message (with its file), or null when none */
  lastFailure: string | null;
}

/** How the owner hears of the checkpointer. */
export interface CheckpointerHooks {
  /** a line for the log: a failure (rate-limited), a recovery */
  log(line: string): void;
  /**
   * the worker's loop runs: from now on it checkpoints, and the owner may turn its connections'
   * automatic checkpoint off (until then they keep it: starting a thread takes a while)
   */
  onReady(): void;
  /** the worker died or could not start: checkpoints stopped (called once) */
  onLost(why: string): void;
}

const DEFAULTS: Required<CheckpointTuning> = {
  intervalMs: 50,
  restartBytes: 32 * 1024 * 1024,
  keepBytes: 4 * 1024 * 1024,
  busyMs: 50,
};
/** How long close waits for the worker to close its connections (a checkpoint may be syncing). */
const CLOSE_WAIT_MS = 10_000;
/** The same failure of a file is logged at most this often, ms. */
const FAILURE_LOG_MS = 60_000;

/**
 * `tuning` with the defaults filled in.
 * @throws RangeError naming the setting when one is not a positive finite number
 */
export function checkpointTuning(tuning: CheckpointTuning = {}): Required<CheckpointTuning> {
  const t = { ...DEFAULTS, ...tuning };
  for (const [k, v] of Object.entries(t)) {
    if (!(typeof v === 'number' && Number.isFinite(v) && v > 0))
      throw new RangeError(`checkpoint ${k} must be a positive number, got ${String(v)}`);
  }
  return t;
}

function workerUrl(): URL {
  // under the TypeScript loader this module is .ts and so is the worker; built, .js
  const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
  return new URL(`./wal-checkpoint-worker${ext}`, import.meta.url);
}

/** One checkpointing thread for a set of SQLite databases in WAL mode (see the module comment). */
export class WalCheckpointer {
  private readonly ctl = new Int32Array(new SharedArrayBuffer(CTL_WORDS * 4));
  private readonly stat = new Float64Array(new SharedArrayBuffer(STAT_SLOTS * 8));
  private readonly port: MessagePort;
  private readonly worker: Worker;
  private closed = false;
  private lost = false;
  private lastFailure: string | null = null;
  /** per file: the last failure logged and when (ms since the epoch) */
  private readonly logged = new Map<string, { message: string; at: number }>();

  /**
   * Start the worker on `files` (each an existing SQLite database in WAL mode).
   * @throws RangeError for a bad `tuning` (see {@link checkpointTuning}); Error when the worker thread cannot be created (the caller keeps SQLite's automatic
   *   checkpoint)
   */
  constructor(
    files: readonly string[],
    private readonly hooks: CheckpointerHooks,
    tuning: CheckpointTuning = {},
  ) {
    const t = checkpointTuning(tuning);
    // loaded here, not at import: a process that never serves a queue never needs it
    const { Worker, MessageChannel } = createRequire(import.meta.url)(
      'node:worker_threads',
    ) as typeof import('node:worker_threads');
    const { port1, port2 } = new MessageChannel();
    this.port = port1;
    const data: CheckpointWorkerData = {
      files: [...files],
      control: this.ctl.buffer as SharedArrayBuffer,
      stats: this.stat.buffer as SharedArrayBuffer,
      port: port2,
      ...t,
    };
    // execArgv passed explicitly: an entry point may append a module loader to process.execArgv;
    // V8's --stack-size is per process and refused by Worker
    this.worker = new Worker(workerUrl(), {
      workerData: data,
      transferList: [port2],
      execArgv: process.execArgv.filter((a) => !a.startsWith('--stack-size')),
    });
    this.worker.on('message', (m: CheckpointWorkerMessage) => this.heard(m));
    this.worker.on('error', (e) => this.gone(`the checkpoint thread failed: ${e.message}`));
    this.worker.on('exit', (code) => this.gone(`the checkpoint thread exited (code ${code})`));
    // after the listeners: attaching one references the worker again
    this.worker.unref();
    this.port.unref();
  }

  /** Checkpoint `file` (an existing database in WAL mode) too, from the next tick. */
  watch(file: string): void {
    if (this.closed || this.lost) return;
    this.port.postMessage({ watch: file });
    Atomics.add(this.ctl, CTL.SIGNAL, 1);
    Atomics.notify(this.ctl, CTL.SIGNAL);
  }

  /** The counters so far. */
  stats(): CheckpointStats {
    const s = this.stat;
    return {
      checkpoints: s[STAT.CHECKPOINTS]!,
      frames: s[STAT.FRAMES]!,
      restarts: s[STAT.RESTARTS]!,
      truncates: s[STAT.TRUNCATES]!,
      busy: s[STAT.BUSY]!,
      failures: s[STAT.FAILURES]!,
      restartMaxMs: s[STAT.RESTART_MAX_MS]!,
      walFramesMax: s[STAT.WAL_FRAMES_MAX]!,
      lastFailure: this.lastFailure,
    };
  }

  /**
   * Stop the worker: it finishes the checkpoint it is in, closes its connections and ends; this
   * waits for that (at most {@link CLOSE_WAIT_MS}) and then terminates the thread. Synchronous, so
   * a store's close() that calls it first closes its own connection last. Idempotent.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    Atomics.store(this.ctl, CTL.STOP, 1);
    Atomics.add(this.ctl, CTL.SIGNAL, 1);
    Atomics.notify(this.ctl, CTL.SIGNAL);
    // a worker that has not begun its loop sees the stop before it opens anything
    if (Atomics.load(this.ctl, CTL.STARTED) === 1 && !this.lost) {
      if (Atomics.wait(this.ctl, CTL.CLOSED, 0, CLOSE_WAIT_MS) === 'timed-out')
        this.hooks.log(
          `WAL checkpoints: the checkpoint thread did not stop within ${CLOSE_WAIT_MS} ms; terminated`,
        );
    }
    this.port.close();
    void this.worker.terminate().catch(() => {});
  }

  private heard(m: CheckpointWorkerMessage): void {
    if (m.type === 'ready') {
      if (!this.closed && !this.lost) this.hooks.onReady();
      return;
    }
    const name = m.file;
    if (m.type === 'recovered') {
      if (this.logged.delete(name)) this.hooks.log(`WAL checkpoints of ${name} succeed again`);
      return;
    }
    const line = `WAL checkpoint of ${name} failed: ${m.message}${m.code ? ` (${m.code})` : ''}`;
    this.lastFailure = line;
    const before = this.logged.get(name);
    const now = Date.now();
    if (before && before.message === m.message && now - before.at < FAILURE_LOG_MS) return;
    this.logged.set(name, { message: m.message, at: now });
    this.hooks.log(`${line}; the WAL grows until one succeeds (tried again every tick)`);
  }

  private gone(why: string): void {
    if (this.closed || this.lost) return;
    this.lost = true;
    this.hooks.onLost(why);
  }
}

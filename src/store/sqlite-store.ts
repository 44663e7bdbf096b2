/**
 * The default {@link RuntimeStore}: one SQLite database (better-sqlite3, WAL) under a state
 * directory for the due-set and deployments, a second one for the storage capability's keys (the
 * file the storage capability opens, so its own transactions stay short), and journal.jsonl.
 *
 * The tables of <state>/state.sqlite (wakes, claims, deployments, dead, reference_imports, the
 * protocol door's harness_subscriptions: subscriptions.ts) and of kv.sqlite (berm_kv) are declared
 * in sqlite-schema.ts.
 * WAL with synchronous=NORMAL: a committed transaction survives the process being killed (it is in
 * the WAL file); only a power loss may drop the last ones.
 *
 * Checkpoints: a store opened with `checkpoints: 'background'` (the runtime's, whose connection
 * serves the queue) turns SQLite's automatic checkpoint off on its connections to state.sqlite and
 * kv.sqlite and leaves checkpointing to a thread of its own (wal-checkpointer.ts); should that
 * thread die, the connections get their automatic checkpoint back. Opened for a moment (berm wake
 * add, a test), a store keeps SQLite's automatic checkpoint on its connection.
 */
import * as path from 'node:path';
import { JsonlJournal } from './journal.js';
import { openSqlite, type SqliteDatabase } from './sqlite-driver.js';
import { createKvSchema, createStateSchema } from './sqlite-schema.js';
import { SqliteSubscriptions } from './subscriptions.js';
import {
  WalCheckpointer,
  checkpointTuning,
  type CheckpointStats,
  type CheckpointTuning,
} from './wal-checkpointer.js';
import { privateDir, privateFile } from '../util/private-files.js';
import type { Authority } from '../contract/index.js';
import type {
  DeploymentRecord,
  DeploymentStore,
  DeadSpec,
  DeadWake,
  DueStore,
  KeyStore,
  RetryDeadResult,
  RuntimeStore,
  WakeListOptions,
  WakeRecord,
  WakeSpec,
} from './store.js';

type Database = SqliteDatabase;

const WAKE_COLUMNS =
  'id, kind, harness, entry, when_ms, payload, armed_by, chain, depth, armed_at, authority';

interface WakeRow {
  seq: number;
  id: string;
  kind: string;
  harness: string;
  entry: string;
  when_ms: number;
  payload: string;
  armed_by: string;
  chain: string | null;
  depth: number;
  armed_at: number;
  /** JSON of the arming invocation's authority, or null (schema 2) */
  authority: string | null;
  attempt: number;
}

function fromRow(r: WakeRow): WakeRecord {
  return {
    id: r.id,
    seq: r.seq,
    kind: r.kind === 'call' ? 'call' : 'wake',
    harness: r.harness,
    entry: r.entry,
    when: r.when_ms,
    payload: r.payload,
    armedBy: r.armed_by,
    chain: r.chain,
    depth: r.depth,
    attempt: r.attempt,
    armedAt: r.armed_at,
    authority: r.authority ? (JSON.parse(r.authority) as Authority) : null,
  };
}

interface DeadRow extends WakeRow {
  reason: string;
  last_error: string;
  attempts: number;
  dead_at: number;
}

function fromDeadRow(r: DeadRow): DeadWake {
  return {
    wake: fromRow(r),
    reason: r.reason === 'store-error' || r.reason === 'interrupted' ? r.reason : 'worker-lost',
    lastError: r.last_error,
    attempts: r.attempts,
    deadAt: r.dead_at,
  };
}

const authorityJson = (a: Authority | null | undefined): string | null =>
  a && (a.agent !== undefined || a.session !== undefined || a.sender !== undefined)
    ? JSON.stringify(a)
    : null;

/** Options of {@link SqliteStore.open}. */
export interface SqliteStoreOptions {
  /** busy timeout of the databases, ms (default 5,000): another process (berm wake add) may write */
  busyTimeoutMs?: number;
  /** journal rotation size and files kept (defaults 64 MiB, 4) */
  journalRotateBytes?: number;
  journalKeep?: number;
  /**
   * Who checkpoints the WAL: 'automatic' (default), SQLite on the connection that commits, once
   * the WAL holds 1,000 pages; 'background', a thread of the store's own, never the connections
   * that serve (see the module comment).
   */
  checkpoints?: 'automatic' | 'background';
  /** when and how hard the background thread checkpoints (tests; the defaults suit the runtime) */
  checkpointTuning?: CheckpointTuning;
  /** where the background checkpoints report a failure until {@link SqliteStore.reportTo} */
  log?: (line: string) => void;
}

/** SQLite's default `wal_autocheckpoint`, pages: what a connection gets back if the thread dies. */
const AUTOCHECKPOINT_PAGES = 1000;

class SqliteDues implements DueStore {
  private readonly s;
  constructor(private readonly db: Database) {
    const p = (sql: string) => db.prepare(sql);
    this.s = {
      del: p('DELETE FROM wakes WHERE id = ?'),
      delOf: p('DELETE FROM wakes WHERE id = ? AND harness = ?'),
      ins: p(`INSERT INTO wakes (${WAKE_COLUMNS}, attempt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)`),
      get: p('SELECT * FROM wakes WHERE id = ?'),
      count: p('SELECT count(*) AS n FROM wakes'),
      countArmedBy: p('SELECT count(*) AS n FROM (SELECT 1 FROM wakes WHERE armed_by = ? LIMIT ?)'),
      countArmedFor: p(
        'SELECT count(*) AS n FROM (SELECT 1 FROM wakes WHERE armed_by = ? AND harness = ? LIMIT ?)',
      ),
      index: p('SELECT when_ms, seq FROM wakes WHERE seq > ? ORDER BY seq').raw(true),
      // both walk the wakes_when index from its start or from a (when, seq) on
      windowFirst: p('SELECT when_ms, seq FROM wakes ORDER BY when_ms, seq LIMIT ?').raw(true),
      windowAfter: p(
        'SELECT when_ms, seq FROM wakes WHERE (when_ms, seq) > (?, ?) ORDER BY when_ms, seq LIMIT ?',
      ).raw(true),
      lastSeq: p('SELECT max(seq) AS n FROM wakes'),
      take: p('DELETE FROM wakes WHERE seq = ? RETURNING *'),
      claimIns: p(
        `INSERT OR REPLACE INTO claims (seq, ${WAKE_COLUMNS}, attempt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      claimed: p('SELECT * FROM claims ORDER BY when_ms, seq'),
      bump: p('UPDATE claims SET attempt = attempt + 1 WHERE id = ? AND seq = ? RETURNING *'),
      finish: p('DELETE FROM claims WHERE id = ? AND seq = ?'),
      unclaim: p('DELETE FROM claims WHERE id = ? AND seq = ? RETURNING *'),
      bury: p(
        `INSERT OR REPLACE INTO dead (seq, ${WAKE_COLUMNS}, attempt, reason, last_error, attempts, dead_at)
         SELECT seq, ${WAKE_COLUMNS}, attempt, ?, ?, ?, ? FROM claims WHERE id = ? AND seq = ?`,
      ),
      deadGet: p('SELECT * FROM dead WHERE id = ?'),
      deadDel: p('DELETE FROM dead WHERE id = ? RETURNING *'),
      deadCounts: p('SELECT harness, count(*) AS n FROM dead GROUP BY harness'),
      reinsert: p(
        `INSERT OR IGNORE INTO wakes (seq, ${WAKE_COLUMNS}, attempt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
    };
  }

  private insert(w: WakeSpec): { record: WakeRecord; replaced: boolean } {
    const replaced = this.s.del.run(w.id).changes > 0;
    const r = this.s.ins.run(
      w.id,
      w.kind,
      w.harness,
      w.entry,
      w.when,
      w.payload,
      w.armedBy,
      w.chain,
      w.depth,
      w.armedAt,
      authorityJson(w.authority),
    );
    return { record: { ...w, seq: Number(r.lastInsertRowid), attempt: 0 }, replaced };
  }

  arm(spec: WakeSpec): { record: WakeRecord; replaced: boolean } {
    return this.db.transaction(() => this.insert(spec))();
  }

  armMany(specs: readonly WakeSpec[]): WakeRecord[] {
    return this.db.transaction(() => specs.map((w) => this.insert(w).record))();
  }

  cancel(id: string, harness?: string): boolean {
    return (harness === undefined ? this.s.del.run(id) : this.s.delOf.run(id, harness)).changes > 0;
  }

  get(id: string): WakeRecord | undefined {
    const r = this.s.get.get(id) as WakeRow | undefined;
    return r ? fromRow(r) : undefined;
  }

  list(options: WakeListOptions = {}): WakeRecord[] {
    const limit = options.limit ?? -1;
    const budget = options.maxBytes ?? Infinity;
    const rows =
      options.harness === undefined
        ? this.db.prepare('SELECT * FROM wakes ORDER BY when_ms, seq LIMIT ?').iterate(limit)
        : this.db
            .prepare('SELECT * FROM wakes WHERE harness = ? ORDER BY when_ms, seq LIMIT ?')
            .iterate(options.harness, limit);
    // rows are read one at a time and the statement is ended at the budget: what lies past it is
    // never read
    const out: WakeRecord[] = [];
    let bytes = 0;
    for (const r of rows as IterableIterator<WakeRow>) {
      out.push(fromRow(r));
      bytes += Buffer.byteLength(r.payload);
      if (bytes >= budget) break;
    }
    return out;
  }

  count(): number {
    return (this.s.count.get() as { n: number }).n;
  }

  countArmedBy(armedBy: string, upTo: number, harness?: string): number {
    if (harness !== undefined) return (this.s.countArmedFor.get(armedBy, harness, upTo) as { n: number }).n;
    return (this.s.countArmedBy.get(armedBy, upTo) as { n: number }).n;
  }

  index(afterSeq: number): { when: Float64Array; seq: Float64Array } {
    let when = new Float64Array(1024);
    let seq = new Float64Array(1024);
    let n = 0;
    for (const row of this.s.index.iterate(afterSeq) as IterableIterator<[number, number]>) {
      if (n === when.length) {
        const w2 = new Float64Array(n * 2);
        w2.set(when);
        when = w2;
        const s2 = new Float64Array(n * 2);
        s2.set(seq);
        seq = s2;
      }
      when[n] = row[0];
      seq[n] = row[1];
      n++;
    }
    return { when: when.subarray(0, n), seq: seq.subarray(0, n) };
  }

  window(after: readonly [number, number] | null, limit: number): { when: Float64Array; seq: Float64Array } {
    const rows = (
      after === null
        ? this.s.windowFirst.iterate(limit)
        : this.s.windowAfter.iterate(after[0], after[1], limit)
    ) as IterableIterator<[number, number]>;
    const when = new Float64Array(limit);
    const seq = new Float64Array(limit);
    let n = 0;
    for (const row of rows) {
      when[n] = row[0];
      seq[n] = row[1];
      n++;
    }
    return { when: when.subarray(0, n), seq: seq.subarray(0, n) };
  }

  lastSeq(): number {
    return (this.s.lastSeq.get() as { n: number | null }).n ?? 0;
  }

  claim(seq: number): WakeRecord | null {
    return this.db.transaction((): WakeRecord | null => {
      const row = this.s.take.get(seq) as WakeRow | undefined;
      if (!row) return null;
      const r = fromRow(row);
      r.attempt += 1;
      this.s.claimIns.run(
        r.seq,
        r.id,
        r.kind,
        r.harness,
        r.entry,
        r.when,
        r.payload,
        r.armedBy,
        r.chain,
        r.depth,
        r.armedAt,
        authorityJson(r.authority),
        r.attempt,
      );
      return r;
    })();
  }

  claimed(): WakeRecord[] {
    return (this.s.claimed.all() as WakeRow[]).map(fromRow);
  }

  reclaim(id: string, seq: number): WakeRecord | null {
    const row = this.s.bump.get(id, seq) as WakeRow | undefined;
    return row ? fromRow(row) : null;
  }

  finish(id: string, seq: number): void {
    this.s.finish.run(id, seq);
  }

  deadLetter(id: string, seq: number, spec: DeadSpec): boolean {
    return this.db.transaction(() => {
      const moved =
        this.s.bury.run(spec.reason, spec.lastError, spec.attempts, spec.deadAt, id, seq).changes > 0;
      if (moved) this.s.finish.run(id, seq);
      return moved;
    })();
  }

  deadList(options: { harness?: string; limit?: number } = {}): DeadWake[] {
    const rows =
      options.harness === undefined
        ? this.db.prepare('SELECT * FROM dead ORDER BY dead_at, seq LIMIT ?').all(options.limit ?? -1)
        : this.db
            .prepare('SELECT * FROM dead WHERE harness = ? ORDER BY dead_at, seq LIMIT ?')
            .all(options.harness, options.limit ?? -1);
    return (rows as DeadRow[]).map(fromDeadRow);
  }

  deadCounts(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const r of this.s.deadCounts.all() as { harness: string; n: number }[]) out[r.harness] = r.n;
    return out;
  }

  retryDead(id: string, when: number): RetryDeadResult {
    // immediate: it reads before it writes (see SqliteTransaction)
    const retry = this.db.transaction((): RetryDeadResult => {
      const row = this.s.deadGet.get(id) as DeadRow | undefined;
      if (!row) return { status: 'missing' };
      if (this.s.get.get(id)) return { status: 'conflict' };
      this.s.deadDel.run(id);
      const r = this.s.ins.run(
        row.id,
        row.kind,
        row.harness,
        row.entry,
        when,
        row.payload,
        row.armed_by,
        row.chain,
        row.depth,
        row.armed_at,
        row.authority,
      );
      const w = fromRow({ ...row, seq: Number(r.lastInsertRowid), when_ms: when, attempt: 0 });
      return { status: 'armed', record: w };
    });
    return retry.immediate();
  }

  dropDead(id: string): DeadWake | null {
    const row = this.s.deadDel.get(id) as DeadRow | undefined;
    return row ? fromDeadRow(row) : null;
  }

  release(id: string, seq: number, when: number): void {
    this.db.transaction(() => {
      const row = this.s.unclaim.get(id, seq) as WakeRow | undefined;
      if (!row) return;
      // the attempt is kept: it counts deliveries started, and this one did not start
      const attempt = Math.max(0, row.attempt - 1);
      this.s.reinsert.run(
        row.seq,
        row.id,
        row.kind,
        row.harness,
        row.entry,
        when,
        row.payload,
        row.armed_by,
        row.chain,
        row.depth,
        row.armed_at,
        row.authority,
        attempt,
      );
    })();
  }
}

/**
 * The deployments table. Its writes commit with `synchronous = FULL` (the WAL synced at the
 * commit): a deploy is acknowledged on its record, so the record must outlive a power loss as the
 * image file written before it does, where the due-set's commits (NORMAL) need only outlive the
 * process. One fsync per deploy or undeploy.
 */
class SqliteDeployments implements DeploymentStore {
  readonly holdsImages = false;
  constructor(private readonly db: Database) {}
  put(d: DeploymentRecord): void {
    this.synced(() =>
      this.db
        .prepare(
          'INSERT OR REPLACE INTO deployments (name, sha256, elf, capabilities, grant_json, deployed_at) VALUES (?, ?, ?, ?, ?, ?)',
        )
        .run(
          d.name,
          d.sha256,
          d.elf === null ? null : Buffer.from(d.elf),
          JSON.stringify(d.capabilities),
          JSON.stringify(d.grant),
          d.deployedAt,
        ),
    );
  }
  remove(name: string): boolean {
    return this.synced(() => this.db.prepare('DELETE FROM deployments WHERE name = ?').run(name).changes > 0);
  }
  /** Run the write `f` (one implicit transaction) committed with synchronous = FULL. */
  private synced<T>(f: () => T): T {
    this.db.pragma('synchronous = FULL');
    try {
      return f();
    } finally {
      this.db.pragma('synchronous = NORMAL');
    }
  }
  get(name: string): DeploymentRecord | undefined {
    const r = this.db.prepare('SELECT * FROM deployments WHERE name = ?').get(name) as
      DeploymentRow | undefined;
    return r ? deployment(r) : undefined;
  }
  list(): DeploymentRecord[] {
    return (this.db.prepare('SELECT * FROM deployments ORDER BY name').all() as DeploymentRow[]).map(
      deployment,
    );
  }
  referenceImports(): Map<string, string> {
    const rows = this.db.prepare('SELECT name, sha256 FROM reference_imports').all() as {
      name: string;
      sha256: string;
    }[];
    return new Map(rows.map((r) => [r.name, r.sha256]));
  }
  recordReferenceImports(imported: ReadonlyMap<string, string>): void {
    if (imported.size === 0) return;
    const put = this.db.prepare('INSERT OR REPLACE INTO reference_imports (name, sha256) VALUES (?, ?)');
    this.synced(() =>
      this.db.transaction(() => {
        for (const [name, sha256] of imported) put.run(name, sha256);
      })(),
    );
  }
}

interface DeploymentRow {
  name: string;
  sha256: string;
  elf: Buffer | null;
  capabilities: string;
  grant_json: string;
  deployed_at: number;
}
function deployment(r: DeploymentRow): DeploymentRecord {
  return {
    name: r.name,
    sha256: r.sha256,
    elf: r.elf === null ? null : new Uint8Array(r.elf),
    capabilities: JSON.parse(r.capabilities) as string[],
    grant: JSON.parse(r.grant_json) as Record<string, unknown>,
    deployedAt: r.deployed_at,
  };
}

class SqliteKeys implements KeyStore {
  private db: Database | null = null;
  /**
   * @param opened called with the connection once it is open and in WAL mode (the store hands it
   *   to its checkpoint thread)
   */
  constructor(
    readonly databaseFile: string,
    private readonly busyTimeoutMs: number,
    private readonly opened: (db: Database) => void = () => {},
  ) {}
  /** The open connection, or null before the first use. */
  get connection(): Database | null {
    return this.db;
  }
  private open(): Database {
    if (this.db) return this.db;
    privateFile(this.databaseFile);
    const db = openSqlite(this.databaseFile, { timeout: this.busyTimeoutMs });
    try {
      db.pragma('journal_mode = WAL');
      // the storage capability's table (src/capabilities/storage): the same file serves both
      createKvSchema(db);
    } catch (e) {
      db.close();
      throw e;
    }
    this.opened(db);
    return (this.db = db);
  }
  get(harness: string, key: Uint8Array): Uint8Array | undefined {
    const r = this.open()
      .prepare('SELECT value FROM berm_kv WHERE harness = ? AND key = ?')
      .get(harness, Buffer.from(key)) as { value: Buffer } | undefined;
    return r ? new Uint8Array(r.value) : undefined;
  }
  set(harness: string, key: Uint8Array, value: Uint8Array): void {
    this.open()
      .prepare(
        'INSERT INTO berm_kv (harness, key, value) VALUES (?, ?, ?) ON CONFLICT DO UPDATE SET value = excluded.value',
      )
      .run(harness, Buffer.from(key), Buffer.from(value));
  }
  delete(harness: string, key: Uint8Array): void {
    this.open().prepare('DELETE FROM berm_kv WHERE harness = ? AND key = ?').run(harness, Buffer.from(key));
  }
  close(): void {
    this.db?.close();
    this.db = null;
  }
}

/** The SQLite backend of {@link RuntimeStore}. */
export class SqliteStore implements RuntimeStore {
  readonly dues: DueStore;
  readonly deployments: DeploymentStore;
  readonly keys: SqliteKeys;
  readonly journal: JsonlJournal;
  readonly subscriptions: SqliteSubscriptions;
  readonly description: string;

  /** the background checkpoint thread, or null (automatic checkpoints) */
  private checkpointer: WalCheckpointer | null = null;
  /** the thread checkpoints (false: automatic checkpoints, or the thread is gone) */
  private background = false;
  private log: (line: string) => void;

  private constructor(
    private readonly db: Database,
    readonly dir: string,
    options: SqliteStoreOptions,
  ) {
    this.log = options.log ?? (() => {});
    const background = options.checkpoints === 'background';
    this.dues = new SqliteDues(db);
    this.deployments = new SqliteDeployments(db);
    this.subscriptions = new SqliteSubscriptions(db, true);
    this.keys = new SqliteKeys(path.join(dir, 'kv.sqlite'), options.busyTimeoutMs ?? 5000, (kv) => {
      if (!this.background) return;
      kv.pragma('wal_autocheckpoint = 0');
      this.checkpointer?.watch(this.keys.databaseFile);
    });
    this.journal = new JsonlJournal(
      path.join(dir, 'journal.jsonl'),
      options.journalRotateBytes ?? 64 * 1024 * 1024,
      options.journalKeep ?? 4,
    );
    this.description = `sqlite ${path.join(dir, 'state.sqlite')}`;
    if (background) this.startCheckpoints(options.checkpointTuning);
  }

  /**
   * Start the checkpoint thread; once it runs, the automatic checkpoint is turned off on the
   * connections (until then, and when the thread cannot start, they keep it; the latter is logged).
   */
  private startCheckpoints(tuning: CheckpointTuning | undefined): void {
    try {
      this.checkpointer = new WalCheckpointer(
        [path.join(this.dir, 'state.sqlite')],
        {
          log: (line) => this.log(line),
          onReady: () => this.checkpointsReady(),
          onLost: (why) => this.checkpointsLost(why),
        },
        tuning,
      );
    } catch (e) {
      this.log(`WAL checkpoints stay on the serving connection: ${(e as Error).message}`);
    }
  }

  /** The checkpoint thread runs: the connections stop checkpointing for themselves. */
  private checkpointsReady(): void {
    this.background = true;
    this.db.pragma('wal_autocheckpoint = 0');
    const kv = this.keys.connection;
    if (kv) {
      kv.pragma('wal_autocheckpoint = 0');
      this.checkpointer?.watch(this.keys.databaseFile);
    }
  }

  /** The checkpoint thread died: the connections checkpoint for themselves again. */
  private checkpointsLost(why: string): void {
    this.background = false;
    this.log(`${why}; WAL checkpoints run on the serving connections again`);
    this.db.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
    this.keys.connection?.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
  }

  /** Send what goes wrong in the background (a failed WAL checkpoint) to `log` from now on. */
  reportTo(log: (line: string) => void): void {
    this.log = log;
  }

  /**
   * Who checkpoints and what the background thread did: `automatic` pages of SQLite's own
   * checkpoint on the serving connection (`PRAGMA wal_autocheckpoint`, 0 when off) and the
   * thread's counters (null without one).
   */
  checkpoints(): { automatic: number; background: CheckpointStats | null } {
    const automatic = Number(
      (this.db.pragma('wal_autocheckpoint') as { wal_autocheckpoint: number }[])[0]?.wal_autocheckpoint,
    );
    return { automatic, background: this.checkpointer?.stats() ?? null };
  }

  /**
   * Open (creating if needed) the state under `dir`.
   * @throws RangeError for a bad `checkpointTuning`; Error when the directory cannot be created,
   *   the database cannot be opened, or its schema is from a newer berm (with the fix).
   */
  static open(dir: string, options: SqliteStoreOptions = {}): SqliteStore {
    checkpointTuning(options.checkpointTuning);
    privateDir(dir);
    const file = path.join(dir, 'state.sqlite');
    privateFile(file);
    const db = openSqlite(file, { timeout: options.busyTimeoutMs ?? 5000 });
    try {
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = NORMAL');
      createStateSchema(db, file);
      return new SqliteStore(db, dir, options);
    } catch (e) {
      db.close();
      throw e;
    }
  }

  /** Stop the checkpoint thread (its connections close first), then close the files. */
  close(): void {
    this.checkpointer?.close();
    this.background = false;
    this.journal.close();
    this.keys.close();
    this.db.close();
  }
}

/**
 * The PostgreSQL backend of {@link RuntimeStore}: several daemons (bermd, `berm worker`) share one due-set,
 * deployments, storage-capability keys, journal and protocol-door subscriptions (docs/scale-out.md).
 *
 * The store interface is synchronous (the queue calls it between guest runs on its own thread);
 * PostgreSQL is not. Each call is therefore a blocking round trip through the synchronous bridge
 * (src/sync/bridge.ts: a worker thread that runs pg-job.ts while the caller waits in Atomics.wait).
 * Everything that need not block runs asynchronously on the caller's event loop: one LISTEN
 * connection (wakes armed and deployments changed by other daemons), and the lease work: every third
 * of the lease, renewal of the claims this process holds in memory (never every row it owns: a claim
 * it lost track of, say a call that timed out but committed, must expire); once per lease period,
 * expiry of claims whose lease ran out, and, when this process has nothing due, a look for overdue
 * wakes that no process holds in its due heap (a claim that rolled back after the others skipped the
 * locked row; a release by a daemon that then died). No periodic query runs faster than that.
 *
 * Delivery stays at-least-once across daemons: a wake is claimed (moved to berm_claims with attempt
 * + 1, under a lease owned by this process) before it runs and forgotten only after its journal
 * record is written; a daemon that dies stops renewing, its leases expire and any daemon puts the
 * claims back as redeliveries, which fire again with attempt + 1.
 *
 * The database going away: claims fail (the wake stays pending in the database and is re-announced
 * to every daemon once the database is back), finished claims and their journal records wait in
 * memory and are written on reconnection (in that order; a write that failed may have committed
 * before its answer was lost, so each record carries a write id from its append on, and the database
 * stores a record of a given id once: the delivery it records is journaled once, with its attempt),
 * arming and deploying throw (the caller refuses the request), {@link PgStore.available} turns false
 * so callers can refuse invocations cleanly.
 */
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { runSync } from '../sync/bridge.js';
import type { KvJob } from './pg-kv.js';
import * as sql from './pg-sql.js';
import { LIVENESS_INTERVAL_MS, holdOwnerLock, takeBackFromGone } from './pg-liveness.js';
import { pgSubscriptions } from './pg-subscriptions.js';
import type { PgJob } from './pg-job.js';
import type {
  DeadSpec,
  DeadWake,
  DeploymentRecord,
  DeploymentStore,
  DueStore,
  Journal,
  JournalRecord,
  KeyStore,
  RetryDeadResult,
  RuntimeStore,
  WakeListOptions,
  WakeRecord,
  WakeSpec,
} from './store.js';

const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
const JOB = new URL(`./pg-job${ext}`, import.meta.url);
const KV_JOB = new URL(`./pg-kv${ext}`, import.meta.url);

/** Options of {@link PgStore.open}. */
export interface PgStoreOptions {
  /** lease of a claimed wake, ms (default 10,000); renewed every third of it */
  leaseMs?: number;
  /** longest wait for one synchronous call, ms (default 10,000) */
  timeoutMs?: number;
  /** this process's name in claims and journal rows (default host:pid:random) */
  owner?: string;
  /** the store's own log lines (database down/up, expired leases taken over) */
  log?: (line: string) => void;
  /** connect timeout at open, ms (default 5,000) */
  connectTimeoutMs?: number;
}

/** The database could not be reached or refused a call; the message says which and why. */
export class PgStoreError extends Error {
  override name = 'PgStoreError';
}

/** `url` with any password replaced by `***`, for messages and logs. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    return u.toString();
  } catch {
    return '(unparsable URL)';
  }
}

/** True when `s` names a PostgreSQL database (`postgres://` or `postgresql://`). */
export function isPostgresStore(s: string): boolean {
  return /^postgres(ql)?:\/\//.test(s);
}

/** What {@link PgStore.follow} needs of the runtime (BermRuntime has it). */
export interface DueFollower {
  /** pick up wakes armed elsewhere (seq above the highest seen) */
  rescan(): number;
  /** the harnesses deployed here (this process claims only their wakes) */
  harnesses(): { name: string }[];
  /** true when nothing is due in the runtime's heap and it could start a wake */
  dueIdle(): boolean;
  /** take (when, seq) entries of pending wakes into the due heap */
  adopt(when: ArrayLike<number>, seq: ArrayLike<number>): void;
  on(event: 'deploy', listener: (d: { name: string }) => void): unknown;
  off(event: 'deploy', listener: (d: { name: string }) => void): unknown;
}

/** What {@link PgStore.attach} needs of the runtime (BermRuntime has it). */
export interface ClusterRuntime extends DueFollower {
  harness(name: string): { sha256: string; capabilities: string[] } | undefined;
  deploy(
    name: string,
    elf: Uint8Array,
    grant: { capabilities: string[]; grant?: Record<string, unknown> },
    opts?: { persist?: boolean },
  ): Promise<unknown>;
  undeploy(name: string): boolean;
}

/** A deployment change announced by another daemon. */
export interface DeploymentChange {
  name: string;
  op: 'put' | 'remove';
  by: string;
}

/**
 * The PostgreSQL {@link RuntimeStore}. Events: 'wakes' (armed elsewhere), 'deployment'
 * (DeploymentChange), 'relisten' (after each (re)connection of the listener, and when the database
 * is back after a failed {@link PgStore.deploymentDigests}: changes announced meanwhile were not
 * delivered, so a follower compares the records with what it serves), 'down' (message), 'up'.
 */
export class PgStore extends EventEmitter implements RuntimeStore {
  readonly dues: DueStore;
  readonly deployments: DeploymentStore;
  readonly keys: KeyStore;
  readonly journal: Journal;
  readonly subscriptions = pgSubscriptions((op, ...args) => this.call('subscriptions', op, ...args));
  readonly description: string;
  readonly owner: string;
  readonly leaseMs: number;
  private readonly timeoutMs: number;
  private listener: pg.Client | null = null;
  private leaseTimer: NodeJS.Timeout | null = null;
  private livenessTimer: NodeJS.Timeout | null = null;
  private livenessBusy = false;
  /** owner lock keys held at the last liveness look (null before the first) */
  private ownerLocks: Set<number> | null = null;
  /** when the next expiry (and look for overdue wakes) is due, ms (Date.now clock) */
  private expireAt = 0;
  /** claims this process holds in memory, "id\0seq" -> [id, seq]: the only leases it renews */
  private readonly held = new Map<string, [string, number]>();
  /** the runtime whose due heap follows the shared due-set (see follow) */
  private follower: DueFollower | null = null;
  private down: string | null = null;
  private resync = false;
  /** a {@link deploymentDigests} read failed: 'relisten' again at markUp */
  private relistenOwed = false;
  private closed = false;
  private leaseBusy = false;
  /**
   * journal records of wakes, written together with their finished claims. Each record has its
   * write id from its append on (sql.JournalRow): a write that failed is repeated with the same
   * ids, and a record whose first write did commit (its answer lost) is not stored again
   */
  private heldJournal: sql.JournalRow[] = [];
  /** journal records and finished claims not yet written (the database was away) */
  private unwrittenJournal: sql.JournalRow[] = [];
  private unwrittenFinish: [string, number][] = [];
  /** names whose next remove() is the local echo of a remote undeploy (already removed there) */
  private readonly echoRemoves = new Set<string>();

  private constructor(
    readonly url: string,
    private readonly pool: pg.Pool,
    private readonly options: PgStoreOptions,
  ) {
    super();
    this.owner = options.owner ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
    this.leaseMs = options.leaseMs ?? 10_000;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.description = `postgres ${redactUrl(url)} (lease ${this.leaseMs} ms, owner ${this.owner})`;
    this.dues = this.makeDues();
    this.deployments = this.makeDeployments();
    this.keys = this.makeKeys();
    this.journal = this.makeJournal();
  }

  /**
   * Connect, create or migrate the schema, LISTEN, and start the lease work.
   * @throws PgStoreError when the database cannot be reached (the message names it, without a
   *   password, and gives the fix); SchemaVersionError when it holds a newer berm's schema
   */
  static async open(url: string, options: PgStoreOptions = {}): Promise<PgStore> {
    if (!isPostgresStore(url)) throw new PgStoreError(`${url} is not a postgres:// URL`);
    const leaseMs = options.leaseMs ?? 10_000;
    if (!Number.isFinite(leaseMs) || leaseMs < 300)
      throw new RangeError(`the lease must be at least 300 ms, got ${leaseMs}`);
    const pool = new pg.Pool({
      connectionString: url,
      max: 2,
      connectionTimeoutMillis: options.connectTimeoutMs ?? 5000,
      // the store never keeps a process alive on its own (its owner decides when to exit)
      allowExitOnIdle: true,
    });
    pool.on('error', () => {});
    const store = new PgStore(url, pool, options);
    try {
      await sql.migrate(pool, store.owner, redactUrl(url));
    } catch (e) {
      await pool.end().catch(() => {});
      if (e instanceof sql.SchemaVersionError) throw e;
      throw new PgStoreError(
        `cannot use PostgreSQL at ${redactUrl(url)}: ${(e as Error).message || String(e)}; ` +
          'fix: start the database or correct --store (postgres://user[:password]@host:port/database)',
      );
    }
    await store.listen().catch(() => {});
    // one timer: a tick that finds the previous one still busy is skipped, and the expiry that
    // was due runs on the next tick (expiry is never starved by renewals)
    store.leaseTimer = setInterval(() => void store.leaseWork(), Math.max(100, store.leaseMs / 3));
    store.leaseTimer.unref();
    store.livenessTimer = setInterval(() => void store.livenessWork(), LIVENESS_INTERVAL_MS);
    store.livenessTimer.unref();
    await store.leaseWork();
    return store;
  }

  /** False while the database is unreachable (since the last failed call, until one succeeds). */
  get available(): boolean {
    return this.down === null;
  }

  /** Why the database is unavailable, or null. */
  get problem(): string | null {
    return this.down;
  }

  /**
   * Keep a runtime in step with the other daemons: wakes armed elsewhere are rescanned; this
   * process claims only wakes of harnesses it has deployed (a wake of a harness still on its way
   * here is left to a daemon that has it, and re-announced when it arrives); and (unless
   * `deployments: false`) a deployment made or removed elsewhere is deployed (compiled here, not
   * persisted again) or undeployed here, changes of one name in order.
   * @returns a function that detaches
   */
  attach(rt: ClusterRuntime, options: { deployments?: boolean } = {}): () => void {
    let chain = Promise.resolve();
    const unfollow = this.follow(rt);
    const onDeployment = (c: DeploymentChange) => {
      chain = chain
        .then(() => this.applyDeployment(rt, c))
        .catch((e: unknown) => this.log(`deployment ${c.name} from ${c.by}: ${(e as Error).message}`));
    };
    // changes announced while the listener was down: each record that differs from what `rt`
    // serves (or each harness without a record) is applied as its announcement would have been
    const onRelisten = () => {
      const by = 'a daemon, while this one was not listening';
      chain = chain
        .then(async () => {
          const recs = await this.deploymentDigests();
          for (const r of recs) {
            const l = rt.harness(r.name);
            if (!l || l.sha256 !== r.sha256 || !sameSet(l.capabilities, r.capabilities))
              onDeployment({ name: r.name, op: 'put', by });
          }
          const names = new Set(recs.map((r) => r.name));
          for (const h of rt.harnesses())
            if (!names.has(h.name)) onDeployment({ name: h.name, op: 'remove', by });
        })
        .catch((e: unknown) => this.log(`deployments not compared yet: ${(e as Error).message}`));
    };
    if (options.deployments ?? true) {
      this.on('deployment', onDeployment);
      this.on('relisten', onRelisten);
    }
    return () => {
      unfollow();
      this.off('deployment', onDeployment);
      this.off('relisten', onRelisten);
    };
  }

  /**
   * Every deployment record's name, digest and capabilities, without image bytes (one query), for
   * a follower to compare with what it serves on 'relisten'.
   * @throws PgStoreError when the database cannot answer (the store is then marked unavailable)
   */
  async deploymentDigests(): Promise<sql.PgDeploymentDigest[]> {
    try {
      return await sql.listDeploymentDigests(this.pool);
    } catch (e) {
      const why = (e as Error).message || String(e);
      this.relistenOwed = true;
      this.markDown(why);
      throw new PgStoreError(`PostgreSQL ${redactUrl(this.url)}: deployment digests: ${why}`);
    }
  }

  /**
   * Keep `rt`'s due heap in step with the shared due-set: wakes armed or redelivered elsewhere are
   * rescanned on notification; once per lease period, when `rt` has nothing due, overdue wakes
   * that no process may hold are adopted into its heap; claims are limited to `rt`'s harnesses
   * (a wake of a harness still on its way here is left to a daemon that has it, and re-announced
   * when it is deployed here). One runtime at a time.
   * @returns a function that detaches
   */
  follow(rt: DueFollower): () => void {
    const onWakes = () => rt.rescan();
    const onDeploy = (d: { name: string }) => void this.announce(d.name);
    this.follower = rt;
    this.on('wakes', onWakes);
    rt.on('deploy', onDeploy);
    return () => {
      if (this.follower === rt) this.follower = null;
      this.off('wakes', onWakes);
      rt.off('deploy', onDeploy);
    };
  }

  /**
   * A harness was deployed here: overdue wakes of it that every daemon skipped (none had it) get
   * a fresh seq, so this daemon's index takes them.
   */
  private async announce(harness: string): Promise<void> {
    try {
      await sql.reannounce(this.pool, Date.now(), harness);
    } catch (e) {
      this.markDown((e as Error).message);
    }
  }

  private async applyDeployment(rt: ClusterRuntime, c: DeploymentChange): Promise<void> {
    const d = this.deployments.get(c.name);
    const local = rt.harness(c.name);
    if (!d) {
      if (local) {
        this.echoRemoves.add(c.name);
        try {
          rt.undeploy(c.name);
        } finally {
          this.echoRemoves.delete(c.name);
        }
      }
      return;
    }
    if (local && local.sha256 === d.sha256 && sameSet(local.capabilities, d.capabilities)) return;
    // the shared store holds every record's bytes (holdsImages)
    if (d.elf === null) throw new PgStoreError(`deployment ${d.name} has no image in the shared store`);
    await rt.deploy(d.name, d.elf, { capabilities: d.capabilities, grant: d.grant }, { persist: false });
  }

  private log(line: string): void {
    this.options.log?.(line);
  }

  private markDown(why: string): void {
    if (this.down === null) {
      this.down = why;
      this.resync = true;
      this.log(`PostgreSQL unavailable: ${why}`);
      this.emit('down', why);
    }
  }

  private markUp(): void {
    if (this.down !== null) {
      this.down = null;
      this.log('PostgreSQL reachable again');
      this.emit('up');
      if (this.relistenOwed) {
        this.relistenOwed = false;
        this.emit('relisten');
      }
    }
  }

  /** One blocking call through the bridge. @throws PgStoreError */
  private call<T>(op: PgJob['op'], ...args: unknown[]): T {
    const job: PgJob = { url: this.url, op, args };
    const r = runSync<T>(JOB, 'run', job, this.timeoutMs);
    if (!r.ok) {
      this.markDown(r.error);
      throw new PgStoreError(`PostgreSQL ${redactUrl(this.url)}: ${op}: ${r.error}`);
    }
    return r.value;
  }

  private async listen(): Promise<void> {
    if (this.closed || this.listener) return;
    const c = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 5000 });
    const drop = () => {
      if (this.listener === c) this.listener = null;
      void c.end().catch(() => {});
    };
    c.on('error', drop);
    c.on('end', drop);
    let pending = false;
    c.on('notification', (n) => {
      if (n.channel === sql.WAKES_CHANNEL) {
        // many armings in a burst: one rescan per turn of the event loop
        if (pending) return;
        pending = true;
        setImmediate(() => {
          pending = false;
          if (!this.closed) this.emit('wakes');
        });
      } else if (n.channel === sql.DEPLOYMENTS_CHANNEL && n.payload) {
        try {
          const ch = JSON.parse(n.payload) as DeploymentChange;
          if (ch.by !== this.owner) this.emit('deployment', ch);
        } catch {
          // not ours
        }
      }
    });
    try {
      await c.connect();
      await c.query(`LISTEN ${sql.WAKES_CHANNEL}; LISTEN ${sql.DEPLOYMENTS_CHANNEL}`);
      // this process's liveness for the others (pg-liveness.ts): held for as long as the session
      // lives; nothing is claimed before it is held
      if (!(await holdOwnerLock(c, this.owner)))
        this.log(`owner lock of ${this.owner} is held by another session: its claims rely on their lease`);
    } catch (e) {
      drop();
      throw e;
    }
    // idle listening never keeps the process alive (unref only now: an unref'd socket under an
    // await would let the event loop end mid-query)
    (c as unknown as { connection?: { stream?: { unref?: () => void } } }).connection?.stream?.unref?.();
    this.listener = c;
    // notifications sent while no session of this process listened were never delivered to it
    // (PostgreSQL queues them only for sessions listening at commit): look for new armings, and
    // let the followers of deployments compare the records with what they serve
    this.emit('wakes');
    this.emit('relisten');
  }

  /** Put back the claims of daemons that died (their session lock is gone); see pg-liveness.ts. */
  private async livenessWork(): Promise<void> {
    if (this.closed || this.livenessBusy || this.down !== null || !this.listener) return;
    this.livenessBusy = true;
    try {
      const r = await takeBackFromGone(this.pool);
      if (r.moved > 0) this.log(`took back ${r.moved} wake(s) of ${r.owners.join(', ')}, gone (redelivered)`);
      const before = this.ownerLocks;
      this.ownerLocks = r.held;
      const f = this.follower;
      if (f !== null && before !== null && [...before].some((k) => !r.held.has(k))) {
        // a daemon is gone: rows its last claim statement had locked are pending again, and
        // dropped from every heap that skipped them
        const o = await sql.overdue(
          this.pool,
          Date.now(),
          1000,
          f.harnesses().map((h) => h.name),
        );
        if (o.seq.length > 0) f.adopt(o.when, o.seq);
      }
    } catch {
      // the lease work notices an outage and says so
    } finally {
      this.livenessBusy = false;
    }
  }

  /**
   * One tick of the lease work: write what waited for the database; renew the leases of the
   * claims held in memory; once per lease period, put expired claims back and, when the follower
   * has nothing due, adopt overdue wakes no process may hold; after an outage, re-announce overdue
   * wakes and listen again.
   */
  private async leaseWork(): Promise<void> {
    if (this.closed || this.leaseBusy) return;
    this.leaseBusy = true;
    try {
      if (this.unwrittenJournal.length > 0 || this.unwrittenFinish.length > 0) {
        // copies: a wake that finishes while these writes are awaited appends its record and
        // claim to the live lists (the database still counts as away until markUp), and must
        // stay there for the next tick, neither cut off by the slices below nor its claim
        // finished before its record is written
        const recs = this.unwrittenJournal.slice();
        const done = this.unwrittenFinish.slice();
        await sql.appendJournal(this.pool, this.owner, recs);
        this.unwrittenJournal = this.unwrittenJournal.slice(recs.length);
        await sql.finish(this.pool, done);
        this.unwrittenFinish = this.unwrittenFinish.slice(done.length);
        for (const [id, seq] of done) this.held.delete(`${id}\0${seq}`);
      }
      await sql.renew(this.pool, this.owner, this.leaseMs, [...this.held.values()]);
      if (Date.now() >= this.expireAt) {
        this.expireAt = Date.now() + this.leaseMs;
        const n = await sql.expire(this.pool);
        if (n > 0) this.log(`took back ${n} wake(s) whose lease expired (redelivered)`);
        const f = this.follower;
        if (f?.dueIdle()) {
          const names = f.harnesses().map((h) => h.name);
          const o = await sql.overdue(this.pool, Date.now() - this.leaseMs, 1000, names);
          if (o.seq.length > 0) f.adopt(o.when, o.seq);
        }
      }
      if (this.resync) {
        const n = await sql.reannounce(this.pool, Date.now());
        this.resync = false;
        if (n > 0) this.log(`re-announced ${n} overdue wake(s) after the outage`);
      }
      if (!this.listener) await this.listen();
      this.markUp();
    } catch (e) {
      this.markDown((e as Error).message || String(e));
    } finally {
      this.leaseBusy = false;
    }
  }

  private makeDues(): DueStore {
    const leaseMs = () => this.leaseMs;
    // The pending count (the queue checks it on every arming, for its maxPendingWakes limit and
    // its gauge) is read from the database at most once a second and kept exact for this daemon's
    // own changes in between; other daemons' changes show within a second. A limit shared by
    // several daemons is approximate anyway: they arm concurrently.
    let counted = { n: 0, at: -Infinity };
    let deadCounted: Record<string, number> = {};
    const adjust = (d: number) => {
      counted = { n: Math.max(0, counted.n + d), at: counted.at };
    };
    return {
      arm: (spec: WakeSpec) => {
        const r = this.call<{ records: WakeRecord[]; replaced: string[] }>('arm', [spec]);
        if (r.replaced.length === 0) adjust(1);
        return { record: r.records[0]!, replaced: r.replaced.length > 0 };
      },
      armMany: (specs: readonly WakeSpec[]) => {
        const out: WakeRecord[] = [];
        for (let i = 0; i < specs.length; i += 5000) {
          const r = this.call<{ records: WakeRecord[]; replaced: string[] }>('arm', specs.slice(i, i + 5000));
          adjust(new Set(specs.slice(i, i + 5000).map((x) => x.id)).size - r.replaced.length);
          out.push(...r.records);
        }
        return out;
      },
      cancel: (id: string, harness?: string) => {
        const gone = this.call<boolean>('cancel', id, harness);
        if (gone) adjust(-1);
        return gone;
      },
      get: (id: string) => this.call<WakeRecord | null>('get', id) ?? undefined,
      list: (options?: WakeListOptions) => this.call<WakeRecord[]>('list', options ?? {}),
      count: () => {
        if (Date.now() - counted.at >= 1000) {
          try {
            counted = { n: this.call<number>('count'), at: Date.now() };
          } catch {
            // the last count (approximate anyway): a rescan runs on a notification that came in
            // just before the database went away, from an event handler, where a throw would
            // take the daemon down; asked again at the next call
          }
        }
        return counted.n;
      },
      countArmedBy: (armedBy: string, upTo: number, harness?: string) =>
        harness === undefined
          ? this.call<number>('countArmedBy', armedBy, upTo)
          : this.call<number>('countArmedBy', armedBy, upTo, harness),
      index: (afterSeq: number) => {
        try {
          return this.call<{ when: Float64Array; seq: Float64Array }>('index', afterSeq);
        } catch {
          // the next notification or the re-announcement after the outage brings them
          return { when: new Float64Array(0), seq: new Float64Array(0) };
        }
      },
      // a fault reaches the wake scheduler, which reads the window again after its wait
      window: (after: readonly [number, number] | null, limit: number) =>
        this.call<{ when: Float64Array; seq: Float64Array }>('window', after, limit),
      lastSeq: () => this.call<number>('lastSeq'),
      claim: (seq: number) => {
        // nothing is claimed while this process's owner lock is not held (its listener is down):
        // the others would take the claim back at once
        if (!this.listener) return null;
        try {
          const w = this.call<WakeRecord | null>(
            'claim',
            seq,
            this.owner,
            leaseMs(),
            this.follower?.harnesses().map((h) => h.name) ?? null,
          );
          if (w) {
            adjust(-1);
            this.held.set(`${w.id}\0${w.seq}`, [w.id, w.seq]);
          }
          return w;
        } catch {
          // Still pending in the database (re-announced to every daemon when it is back), or
          // claimed by a statement that committed after the call gave up: not held here, so its
          // lease is not renewed and it is redelivered when it expires.
          return null;
        }
      },
      claimDue: (now: number, limit: number, harnesses: readonly string[], from?: [number, number]) => {
        if (!this.listener) return [];
        try {
          const ws = this.call<WakeRecord[]>(
            'claimDue',
            now,
            this.owner,
            leaseMs(),
            harnesses,
            limit,
            from ?? [-Infinity, 0],
          );
          adjust(-ws.length);
          for (const w of ws) this.held.set(`${w.id}\0${w.seq}`, [w.id, w.seq]);
          return ws;
        } catch {
          // as claim: pending (re-announced when the database is back) or left to expire
          return [];
        }
      },
      // A predecessor's claims are not ours (a new process is a new owner): they come back through
      // lease expiry to whichever daemon takes them first.
      claimed: () => [],
      reclaim: (id: string, seq: number) => {
        const key = `${id}\0${seq}`;
        try {
          const w = this.call<WakeRecord | null>('reclaim', id, seq, this.owner, leaseMs());
          if (w) this.held.set(key, [id, seq]);
          else this.held.delete(key);
          return w;
        } catch {
          // no longer renewed: expires and is redelivered
          this.held.delete(key);
          return null;
        }
      },
      finish: (id: string, seq: number) => {
        const recs = this.heldJournal;
        this.heldJournal = [];
        if (this.down === null && this.unwrittenFinish.length === 0) {
          try {
            this.call('flush', this.owner, recs, [[id, seq]]);
            this.held.delete(`${id}\0${seq}`);
            return;
          } catch {
            // kept below and still held; written on reconnection (the lease is renewed meanwhile,
            // or it expires and the wake is redelivered: at-least-once)
          }
        }
        this.unwrittenJournal.push(...recs);
        this.unwrittenFinish.push([id, seq]);
      },
      deadLetter: (id: string, seq: number, spec: DeadSpec) => {
        // the wake journal records held for their claims go with the move, as with finish
        const recs = this.heldJournal;
        this.heldJournal = [];
        // not held any more either way: moved, or (the call failed) no longer renewed, so the
        // claim expires and is delivered again, its attempt past the limit: dead-lettered then
        this.held.delete(`${id}\0${seq}`);
        try {
          return this.call<boolean>('deadLetter', this.owner, recs, id, seq, spec);
        } catch (e) {
          this.unwrittenJournal.push(...recs);
          throw e;
        }
      },
      deadList: (options?: { harness?: string; limit?: number }) =>
        this.call<DeadWake[]>('deadList', options ?? {}),
      deadCounts: () => {
        try {
          deadCounted = this.call<Record<string, number>>('deadCounts');
        } catch {
          // the last counts: a metrics scrape while the database is away must not fail
        }
        return deadCounted;
      },
      retryDead: (id: string, when: number) => this.call<RetryDeadResult>('retryDead', id, when),
      dropDead: (id: string) => this.call<DeadWake | null>('dropDead', id),
      release: (id: string, seq: number, when: number) => {
        // not held any more either way: released, or (the call failed) left to expire and be
        // redelivered
        this.held.delete(`${id}\0${seq}`);
        try {
          this.call('release', id, seq, when);
        } catch {
          // see above
        }
      },
    };
  }

  private makeJournal(): Journal {
    return {
      append: (record: JournalRecord) => {
        const rec: sql.JournalRow = { wid: randomUUID(), rec: record };
        if (record.wake !== undefined && record.trigger !== 'drop') {
          // a wake's record is written with its finished claim (one round trip; never after it);
          // a dropped dead-letter entry has no claim: its record is written now
          this.heldJournal.push(rec);
          return;
        }
        // a call's record is written before the call is answered, or the append throws and the
        // call is not acknowledged. Records still waiting from an outage do not hold it back:
        // only a finished claim must follow its wake's record, and a call has none.
        const recs = [...this.heldJournal, rec];
        this.heldJournal = [];
        let why = this.down;
        if (why === null) {
          try {
            this.call('appendJournal', this.owner, recs);
            return;
          } catch (e) {
            why = (e as Error).message;
          }
        }
        // kept: written when the database is back, if this process lives until then
        this.unwrittenJournal.push(...recs);
        throw new PgStoreError(`PostgreSQL is unreachable (${why})`);
      },
      close: () => {},
    };
  }

  private makeDeployments(): DeploymentStore {
    return {
      holdsImages: true,
      put: (d: DeploymentRecord) => {
        if (d.elf === null)
          throw new PgStoreError(
            `deployment ${d.name}: the shared store needs the image's bytes (the other daemons deploy from them)`,
          );
        this.call('putDeployment', d, this.owner);
      },
      remove: (name: string) => {
        if (this.echoRemoves.has(name)) return false;
        return this.call<boolean>('removeDeployment', name, this.owner);
      },
      get: (name: string) => this.call<DeploymentRecord | null>('getDeployment', name) ?? undefined,
      list: () => this.call<DeploymentRecord[]>('listDeployments'),
      referenceImports: () => new Map(this.call<[string, string][]>('listReferenceImports')),
      recordReferenceImports: (imported: ReadonlyMap<string, string>) => {
        if (imported.size > 0) this.call('putReferenceImports', [...imported]);
      },
    };
  }

  private makeKeys(): KeyStore {
    const kv = (job: KvJob): Uint8Array | null | { quotaAfter: number } => {
      const r = runSync<Uint8Array | null | { quotaAfter: number }>(KV_JOB, 'kv', job, this.timeoutMs);
      if (!r.ok) {
        this.markDown(r.error);
        throw new PgStoreError(`PostgreSQL ${redactUrl(this.url)}: keys: ${r.error}`);
      }
      return r.value;
    };
    return {
      databaseFile: this.url,
      get: (harness, key) => {
        const v = kv({ url: this.url, op: 'get', harness, key });
        return v instanceof Uint8Array ? v : undefined;
      },
      set: (harness, key, value) => {
        kv({ url: this.url, op: 'set', harness, key, value, quota: Number.MAX_SAFE_INTEGER });
      },
      delete: (harness, key) => {
        kv({ url: this.url, op: 'delete', harness, key });
      },
    };
  }

  /**
   * Write what is held, stop the lease work and the listener, close the connections. Claims of
   * wakes still running stay in the database and are redelivered after their lease expires.
   */
  close(): void {
    if (this.closed) return;
    const recs = [...this.unwrittenJournal, ...this.heldJournal];
    const done = this.unwrittenFinish;
    if (recs.length > 0 || done.length > 0) {
      try {
        this.call('flush', this.owner, recs, done);
      } catch (e) {
        this.log(
          `could not write ${recs.length} journal record(s) at close: ${(e as Error).message}; their wakes will be redelivered`,
        );
      }
    }
    this.closed = true;
    if (this.leaseTimer) clearInterval(this.leaseTimer);
    if (this.livenessTimer) clearInterval(this.livenessTimer);
    void this.listener?.end().catch(() => {});
    this.listener = null;
    void this.pool.end().catch(() => {});
  }
}

/** Whether `a` and `b` hold the same strings (in any order). */
function sameSet(a: readonly string[], b: readonly string[]): boolean {
  return JSON.stringify([...a].sort()) === JSON.stringify([...b].sort());
}

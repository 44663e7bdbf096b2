/**
 * The runtime's core: one queue through which every guest start passes, whatever started it, with
 * three triggers —
 *   call   a tool was invoked (has a reply),
 *   wake   a due instant of the due-set (the harness's exported `on_wake`),
 *   notify a subscribed event (the harness's exported `on_notify`, fire-and-forget) —
 * a worker pool that runs them, the limits that decide when they may start, the due-set, the
 * journal and a harness registry that can change at run time.
 *
 * Threads: this object lives on the accepting thread and never runs a guest or a translation;
 * workers do (pool.ts). Guest host calls that touch the due-set come back here synchronously
 * (protocol.ts), so the due-set has one writer.
 *
 * Delivery of wakes is at-least-once (docs/runtime-queue.md): a wake is claimed in the store (its
 * attempt counted) before it runs and forgotten only after its outcome is journaled, so a process
 * killed in between re-fires it at the next start with attempt + 1.
 */
import { EventEmitter } from 'node:events';
import { createHash, randomUUID } from 'node:crypto';
import { cpus } from 'node:os';
import * as path from 'node:path';
import type { CapabilityLimits, CapabilityReply, Grant } from '../capabilities/types.js';
import { ok } from '../capabilities/types.js';
import { capabilityNames } from '../capabilities/index.js';
import type { Declarations } from '../config/declarations.js';
import { readImage } from '../engine/image.js';
import type { Manifest, ToolDecl } from '../harness/manifest.js';
import { DueHeap } from './dueset.js';
import {
  checkLimits,
  defaultLimits,
  LimitError,
  TokenBucket,
  type LimitSource,
  type RuntimeLimits,
} from './limits.js';
import { attachConnections } from './connections.js';
import { WorkerPool, type Compiled } from './pool.js';
import type { Authority, RuntimeStats } from '../contract/index.js';
import type { ChainSpec, HostRequest, RunResult, TrapInfo } from './protocol.js';
import { SqliteStore } from './sqlite-store.js';
import type { JournalRecord, RuntimeStore, WakeListOptions, WakeRecord, WakeSpec } from './store.js';

/** Entry a wake runs. */
export const ON_WAKE = 'on_wake';
/** Entry a notification runs. */
export const ON_NOTIFY = 'on_notify';

/** The trigger that started an invocation (`event`: a WebSocket connection's, ./connections.ts). */
export type Trigger = 'call' | 'wake' | 'notify' | 'event';

/** Facts about one finished invocation, on every outcome. */
export interface InvocationInfo {
  trigger: Trigger;
  harness: string;
  entry: string;
  chain: string;
  depth: number;
  /** ms since epoch */
  start: number;
  /** ms the run took (queue wait excluded) */
  ms: number;
  /** ms it waited in the queue, and for its worker to finish earlier work */
  waitMs: number;
  /** fuel drawn by the chain during this run */
  fuel: number;
}

/**
 * What an invocation came to.
 * - ok / failed: the guest's berm.done / berm.fail (failed is the tool's own failure, for a model)
 * - trapped: the guest trapped (trap name, message, pc, symbol)
 * - refused: a limit of the queue refused it; nothing ran
 * - error: it could not run: unknown harness or tool, bad arguments, a harness that broke the
 *   ABI, or its worker was lost (stuck in a host call past its deadline); or (`store-unavailable`)
 *   it ran but its journal record could not be written, so its result is not acknowledged (the
 *   record is kept in memory and written when the store is back, if the process lives)
 */
export type Outcome = (
  | { status: 'ok'; result: string; logs: string[] }
  | { status: 'failed'; message: string; logs: string[] }
  | { status: 'trapped'; trap: TrapInfo; logs: string[] }
  | { status: 'refused'; error: LimitError }
  | {
      status: 'error';
      code:
        | 'unknown-harness'
        | 'unknown-tool'
        | 'bad-args'
        | 'harness'
        | 'worker-lost'
        | 'internal'
        | 'store-unavailable';
      message: string;
      logs: string[];
    }
) & { info: InvocationInfo | null };

/** Options of {@link BermRuntime.invoke}. */
export interface InvokeOptions {
  /** each berm.log line as it happens (streamed from the worker) */
  onLog?: (line: string) => void;
  /** who the invocation acts for; inherited by its chain and the work it enqueues */
  authority?: Authority;
  /** the trigger it is journaled under (default call; `event` for a connection's events) */
  trigger?: 'call' | 'event';
}

/** A harness in the registry. */
export interface DeployedHarness {
  name: string;
  /** lowercase hex sha256 of the ELF */
  sha256: string;
  capabilities: string[];
  grant: Grant;
  manifest: Manifest;
  tools: ToolDecl[];
  /** exports on_wake / on_notify (the export table is the registration) */
  onWake: boolean;
  onNotify: boolean;
  /**
   * how the module was obtained (cache hit, timings); replaced by the optimised tier's once that
   * was swapped in (a module first compiled on the baseline tier)
   */
  compile: Compiled['info'];
  deployedAt: number;
}

/** A refusal to arm a wake: bad input, nothing armed. */
export class ArmError extends Error {
  override name = 'ArmError';
}

/** Options of {@link BermRuntime.create}. */
export interface RuntimeOptions {
  /** state directory of the SQLite store (default store); ignored when `store` is given */
  state?: string;
  /** a storage backend (default: SqliteStore.open(state)) */
  store?: RuntimeStore;
  /** workers (default: the number of cores) */
  poolSize?: number;
  /** overrides of the queue's limits */
  limits?: Partial<RuntimeLimits>;
  /** where each overridden limit came from, for the boot log (default 'option') */
  limitSources?: Partial<Record<keyof RuntimeLimits, LimitSource>>;
  /** overrides of the capabilities' limits (maxCallDepth is always the queue's chainDepth) */
  capabilityLimits?: Partial<CapabilityLimits>;
  /** engine options of the workers */
  memorySize?: number;
  optimizeLevel?: number;
  /** Wasm cache directory (default: <state>/cache when a state dir is given, else none) */
  cacheDir?: string | null;
  /** the runtime's own log lines (spills, replaced workers); default: none */
  log?: (line: string) => void;
  /**
   * Modules (file URLs or specifiers) every worker imports before it takes work: a module that
   * registers capabilities (registerCapability) must run in the workers too, since each thread
   * has its own registry. The protocol door's registration module is one.
   */
  workerModules?: (string | URL)[];
  /**
   * longest a guest waits for this thread to answer a host call (schedule, services), ms (default
   * 30,000; the thread answers in microseconds unless something blocks it); past it, or past the
   * invocation's chain deadline if that comes first, the call answers an error
   */
  hostReplyTimeoutMs?: number;
}

/**
 * A service on the queue's thread that guests reach synchronously through
 * CapabilityContext.service (e.g. the protocol door's event bus). Must not throw; runs on the
 * queue's thread, so it must be quick.
 * @param harness the calling harness; @param chain its chain (pass it on to notify for depth and gas)
 */
export type QueueService = (harness: string, chain: ChainSpec, request: unknown) => CapabilityReply;

interface Job {
  trigger: Trigger;
  harness: string;
  kind: 'tool' | 'export';
  entry: string;
  args: string | Uint8Array;
  chain: ChainSpec;
  /**
   * the chain starts here: its deadline is timeoutMs after the guest's start in its worker (not
   * after the launch: the worker may first finish earlier work)
   */
  fresh: boolean;
  enqueuedAt: number;
  resolve: (o: Outcome) => void;
  onLog?: (line: string) => void;
  wake?: WakeRecord;
  scheduleKey?: string;
  /**
   * The invocation's instant (ms since the epoch) when it was fixed before the launch: the `now`
   * of a wake's record. Otherwise the launch takes Date.now(). The guest's delays count from it.
   */
  now?: number;
  /** builds the arguments at launch from the invocation's instant (a notify record's `now`) */
  argsAt?: (now: number) => string;
}

/** The largest setTimeout delay (about 24.8 days); longer waits re-arm the timer. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/**
 * Most due wakes one drain of a local store sets aside for a harness at its limit (each costs a
 * claim and a release, two SQLite transactions, once): a drain stays in the milliseconds, and
 * a longer run of held wakes at the head is worked through by the drains that follow.
 */
const SET_ASIDE_PER_DRAIN = 512;

/** The queue, its workers, its due-set and its harness registry. */
export class BermRuntime extends EventEmitter {
  readonly limits: Readonly<RuntimeLimits>;
  readonly limitSources: Readonly<Record<keyof RuntimeLimits, LimitSource>>;
  private readonly registry = new Map<string, DeployedHarness>();
  private readonly pool: WorkerPool;
  private readonly queue: Job[] = [];
  private readonly running = new Map<SharedArrayBuffer, Job>();
  private readonly perHarness = new Map<string, number>();
  private readonly buckets = new Map<string, TokenBucket>();
  /**
   * schedule keys with an occurrence running: the chain id it runs in, and the occurrence deferred
   * behind it
   */
  private readonly schedules = new Map<string, { chain: string; deferred: WakeRecord | null }>();
  private heap = new DueHeap();
  /**
   * Local stores only: due entries set aside because their harness was at its concurrency or rate
   * limit, one heap per harness. A drain takes from a harness's heap only while that harness may
   * start, so wakes of a held harness are claimed and released once, not on every drain, and
   * never stand in front of other harnesses' due wakes in the main heap. A heap is dropped when
   * its last entry is taken, so every heap here is non-empty.
   */
  private held = new Map<string, DueHeap>();
  private maxSeq = 0;
  /** pending wakes in the store (kept here: counting rows per arm would be O(n)) */
  private pendingCount = 0;
  /**
   * Per arming harness: an upper bound of its pending wakes (a count from the store, plus the
   * wakes it armed since), when that count was taken, and whether none of its wakes has left the
   * due-set here since (fired or cancelled): see {@link checkArmQuota}
   */
  private readonly armedCounts = new Map<string, { n: number; at: number; settled: boolean }>();
  /** due wakes up to this instant have been counted as spilled once */
  private spillMark = -Infinity;
  /**
   * When the last spill count was taken (counts come at most every 50 ms). Kept apart from
   * `spillMark`: a drain that finds nothing due moves the mark but counts nothing, so it must not
   * hold back the count of the drain right after it (a timer that fires a millisecond before its
   * instant, as Date.now() judges it, runs exactly such a drain).
   */
  private spillCountedAt = -Infinity;
  private redeliver: WakeRecord[] = [];
  private timer: NodeJS.Timeout | null = null;
  private timerAt = Infinity;
  /**
   * Due work (the heap's due entries, re-deliveries) that the last drain could start none of
   * waits until this instant: the earliest a rate token frees, or Infinity when only a finishing
   * invocation can free room (it dispatches by itself). 0: no such wait. Cleared when wakes are
   * armed or adopted, so a new wake of a harness that may start is not held back.
   */
  private notBefore = 0;
  private closed = false;
  /** close() ran out of its drain time and interrupted what still ran (those wakes stay claimed) */
  private interrupting = false;
  private started = false;
  private dispatching = false;
  /** wakes started since the runtime was created (a drain that starts none may sleep) */
  private wakesStarted = 0;
  private pending = 0;
  private counters = {
    invocations: {} as Record<string, number>,
    spills: 0,
    overrunSkips: 0,
    redeliveries: 0,
    cached: 0,
    translated: 0,
  };
  private lastSpillLog = 0;
  private readonly services = new Map<string, QueueService>();
  /** the ws capability's connections, a trigger of this queue (./connections.ts) */
  private readonly connections;

  private constructor(
    readonly store: RuntimeStore,
    private readonly options: RuntimeOptions,
    limits: RuntimeLimits,
    sources: Record<keyof RuntimeLimits, LimitSource>,
    poolSize: number,
  ) {
    super();
    this.limits = Object.freeze(limits);
    this.limitSources = Object.freeze(sources);
    const capabilityLimits = { ...options.capabilityLimits, maxCallDepth: limits.chainDepth };
    this.pool = new WorkerPool({
      size: poolSize,
      config: {
        ...(options.memorySize !== undefined ? { memorySize: options.memorySize } : {}),
        ...(options.optimizeLevel !== undefined ? { optimizeLevel: options.optimizeLevel } : {}),
        cacheDir: options.cacheDir ?? null,
        capabilityLimits,
        defaultDatabase: store.keys.databaseFile,
        modules: (options.workerModules ?? []).map(String),
        ...(options.hostReplyTimeoutMs !== undefined
          ? { hostReplyTimeoutMs: options.hostReplyTimeoutMs }
          : {}),
      },
      onHost: (req) => this.onHost(req),
      onReplace: (why) => this.log(`worker replaced: ${why}`),
      onIdle: () => this.dispatch(),
      onOptimized: (from, info) => {
        // what a harness's instances now run: the optimised tier
        for (const d of this.registry.values()) if (d.compile.key === from) d.compile = info;
      },
    });
    this.connections = attachConnections(this, limits, (line) => this.log(line), options.state);
  }

  /**
   * Open the store, start the workers and load the due-set (no guest runs; wakes fire once
   * {@link start} is called).
   * @throws RangeError for bad limits or pool size; whatever opening the store throws.
   */
  static async create(options: RuntimeOptions): Promise<BermRuntime> {
    const poolSize = options.poolSize ?? Math.max(1, cpus().length);
    if (!Number.isSafeInteger(poolSize) || poolSize < 1)
      throw new RangeError(`pool size must be a positive integer, got ${poolSize}`);
    const limits = { ...defaultLimits(poolSize), ...options.limits };
    checkLimits(limits);
    const sources = {} as Record<keyof RuntimeLimits, LimitSource>;
    for (const k of Object.keys(limits) as (keyof RuntimeLimits)[]) {
      sources[k] = options.limits?.[k] !== undefined ? (options.limitSources?.[k] ?? 'option') : 'default';
    }
    let store = options.store;
    if (!store) {
      if (options.state === undefined) throw new RangeError('a state directory or a store is required');
      store = SqliteStore.open(options.state, {
        journalRotateBytes: limits.journalRotateBytes,
        journalKeep: limits.journalKeep,
      });
    }
    const opts = { ...options };
    if (opts.cacheDir === undefined && options.state !== undefined)
      opts.cacheDir = path.join(options.state, 'cache');
    const rt = new BermRuntime(store, opts, limits, sources, poolSize);
    rt.loadDueSet();
    return rt;
  }

  // ---------------------------------------------------------------- registry

  /**
   * Deploy (or replace) a harness: compile in a worker, check its manifest, publish to every
   * worker, persist the deployment. Re-deploying the same bytes and grant is cheap (disk cache).
   * @param grant granted capability names and their arguments (from the operator, never the harness)
   * @throws ArmError for a bad name or an unknown capability; ElfError / ManifestError /
   *   HarnessError (by name) for a bad image.
   */
  async deploy(
    name: string,
    elf: Uint8Array,
    grant: { capabilities: string[]; grant?: Grant },
    opts: { persist?: boolean } = {},
  ): Promise<DeployedHarness> {
    if (!/^[A-Za-z0-9_-]+$/.test(name))
      throw new ArmError(
        `harness name ${JSON.stringify(name)} must be letters, digits, '_' or '-' (no dots)`,
      );
    const names = capabilityNames();
    for (const c of grant.capabilities) {
      if (!names.includes(c))
        throw new ArmError(`unknown capability ${JSON.stringify(c)}; use one of ${names.join(', ')}`);
    }
    readImage(elf); // a malformed image is refused here, before a worker is bothered
    const compiled = await this.pool.compile(elf);
    if (compiled.info.cached) this.counters.cached++;
    else this.counters.translated++;
    const capabilities = [...new Set(grant.capabilities)].sort();
    const g = grant.grant ?? {};
    this.pool.deploy(name, elf, compiled, capabilities, g);
    const d: DeployedHarness = {
      name,
      sha256: createHash('sha256').update(elf).digest('hex'),
      capabilities,
      grant: g,
      manifest: compiled.manifest,
      tools: compiled.manifest.tools,
      onWake: compiled.exports.includes(ON_WAKE),
      onNotify: compiled.exports.includes(ON_NOTIFY),
      compile: compiled.info,
      deployedAt: Date.now(),
    };
    this.registry.set(name, d);
    if (opts.persist ?? true) {
      this.store.deployments.put({
        name,
        sha256: d.sha256,
        elf,
        capabilities,
        grant: g as Record<string, unknown>,
        deployedAt: d.deployedAt,
      });
    }
    this.emit('deploy', d);
    return d;
  }

  /** Remove a harness; its pending wakes stay in the due-set (they fail if it never returns). */
  undeploy(name: string): boolean {
    const had = this.registry.delete(name);
    this.pool.undeploy(name);
    this.store.deployments.remove(name);
    if (had) this.emit('undeploy', name);
    return had;
  }

  /**
   * Deploy every accepted harness of a declaration file with exactly its grant (not persisted as
   * deployments: the file is their source). Refused entries are skipped (they are in decls.errors).
   * @throws what {@link deploy} throws for the first harness that cannot be deployed.
   */
  async loadDeclarations(decls: Declarations): Promise<DeployedHarness[]> {
    const out: DeployedHarness[] = [];
    for (const d of decls.harnesses) {
      if (!d.elf) throw new ArmError(`harness ${d.name}: the declaration was parsed without reading its ELF`);
      out.push(
        await this.deploy(
          d.name,
          d.elf,
          { capabilities: d.capabilities, grant: d.grant },
          { persist: false },
        ),
      );
    }
    return out;
  }

  /** Re-deploy what the store holds (a daemon's restart). No guest runs. */
  async restoreDeployments(): Promise<DeployedHarness[]> {
    const out: DeployedHarness[] = [];
    for (const d of this.store.deployments.list()) {
      out.push(
        await this.deploy(
          d.name,
          d.elf,
          { capabilities: d.capabilities, grant: d.grant as Grant },
          { persist: false },
        ),
      );
    }
    return out;
  }

  /** Every deployed harness, by name. */
  harnesses(): DeployedHarness[] {
    return [...this.registry.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  /** A deployed harness, or undefined. */
  harness(name: string): DeployedHarness | undefined {
    return this.registry.get(name);
  }

  // ---------------------------------------------------------------- triggers

  /**
   * Invoke a tool through the queue.
   * @param args the arguments as JSON text (checked against the tool's schema) or raw bytes
   * @returns the outcome; never rejects (bad input is an `error` outcome, a limit a `refused` one)
   */
  invoke(
    harness: string,
    tool: string,
    args: string | Uint8Array,
    opts: InvokeOptions = {},
  ): Promise<Outcome> {
    const h = this.registry.get(harness);
    if (!h) return Promise.resolve(this.notFound(harness));
    if (!h.tools.some((t) => t.name === tool)) {
      const known = h.tools.map((t) => t.name).join(', ') || 'none';
      return Promise.resolve(
        errorOutcome('unknown-tool', `harness ${harness} has no tool named ${tool} (tools: ${known})`),
      );
    }
    return this.submit({
      trigger: opts.trigger ?? 'call',
      harness,
      kind: 'tool',
      entry: tool,
      args,
      chain: this.freshChain(opts.authority),
      fresh: true,
      ...(opts.onLog ? { onLog: opts.onLog } : {}),
    });
  }

  /**
   * Enqueue an on_notify trigger with the record the shared contract defines
   * (`{id, source, payload, now, attempt}`).
   * @returns the outcome once it ran (callers may ignore it: fire-and-forget)
   */
  notify(
    harness: string,
    record: { id: string; source: string; payload: string },
    opts: InvokeOptions & { chain?: ChainSpec } = {},
  ): Promise<Outcome> {
    const h = this.registry.get(harness);
    if (!h) return Promise.resolve(this.notFound(harness));
    if (!h.onNotify)
      return Promise.resolve(
        errorOutcome('harness', `harness ${harness} does not export ${ON_NOTIFY}; it cannot receive events`),
      );
    const chain = opts.chain ? this.childChain(opts.chain) : this.freshChain(opts.authority);
    if (chain instanceof LimitError) return Promise.resolve({ status: 'refused', error: chain, info: null });
    // the record's now is the launch instant (a trigger may wait in the queue first), the same
    // instant the guest's schedule delays count from
    const argsAt = (now: number) =>
      JSON.stringify({ id: record.id, source: record.source, payload: record.payload, now, attempt: 1 });
    return this.submit({
      trigger: 'notify',
      harness,
      kind: 'export',
      entry: ON_NOTIFY,
      args: '',
      argsAt,
      chain,
      fresh: true,
      ...(opts.onLog ? { onLog: opts.onLog } : {}),
    });
  }

  private notFound(harness: string): Outcome {
    const known = [...this.registry.keys()].sort().join(', ') || 'none';
    return errorOutcome('unknown-harness', `no harness named ${harness} is deployed (deployed: ${known})`);
  }

  private freshChain(authority?: Authority): ChainSpec {
    const l = this.limits;
    return {
      id: randomUUID(),
      depth: 0,
      deadline: 0,
      fuelLeft: Number.isFinite(l.fuel) ? l.fuel : Number.MAX_SAFE_INTEGER,
      fuelBudget: Number.isFinite(l.fuel) ? l.fuel : Number.MAX_SAFE_INTEGER,
      invocationsLeft: l.chainInvocations,
      maxDepth: l.chainDepth,
      ...(authority ? { authority } : {}),
    };
  }

  /** The chain of work enqueued from inside `parent`: one deeper, with what it has left. */
  private childChain(parent: ChainSpec): ChainSpec | LimitError {
    if (parent.depth + 1 > this.limits.chainDepth) {
      return new LimitError(
        'chainDepth',
        this.limits.chainDepth,
        `work enqueued at depth ${parent.depth + 1} of chain ${parent.id}`,
      );
    }
    return {
      ...parent,
      depth: parent.depth + 1,
      deadline: 0,
      invocationsLeft: Math.max(0, parent.invocationsLeft - 1),
    };
  }

  private submit(j: Omit<Job, 'enqueuedAt' | 'resolve'>): Promise<Outcome> {
    if (this.closed)
      return Promise.resolve(refused(new LimitError('closed', 'closed', 'the runtime is shutting down')));
    if (this.queue.length >= this.limits.queueDepth) {
      return Promise.resolve(
        refused(
          new LimitError(
            'queueDepth',
            this.limits.queueDepth,
            `${this.queue.length} triggers are already waiting`,
          ),
        ),
      );
    }
    if (!this.bucket(j.harness).take(Date.now())) {
      return Promise.resolve(
        refused(
          new LimitError(
            'harnessRate',
            this.limits.harnessRate,
            `harness ${j.harness} started more than ${this.limits.harnessRate}/s (burst ${this.limits.harnessBurst})`,
          ),
        ),
      );
    }
    return new Promise((resolve) => {
      this.queue.push({ ...j, enqueuedAt: Date.now(), resolve });
      this.dispatch();
    });
  }

  private bucket(harness: string): TokenBucket {
    let b = this.buckets.get(harness);
    if (!b) {
      b = new TokenBucket(this.limits.harnessRate, this.limits.harnessBurst, Date.now());
      this.buckets.set(harness, b);
    }
    return b;
  }

  private canStart(harness: string): boolean {
    return (
      this.running.size < this.limits.concurrency &&
      this.pool.idle() > 0 &&
      (this.perHarness.get(harness) ?? 0) < this.limits.harnessConcurrency
    );
  }

  /** Start what may start: queued triggers first (FIFO, skipping harnesses at their limit), then due wakes. */
  private dispatch(): void {
    if (this.dispatching) return;
    this.dispatching = true;
    try {
      for (
        let i = 0;
        i < this.queue.length && this.running.size < this.limits.concurrency && this.pool.idle() > 0;
      ) {
        const j = this.queue[i]!;
        if (this.canStart(j.harness)) {
          this.queue.splice(i, 1);
          this.launch(j);
        } else i++;
      }
      if (this.started && !this.closed) this.drainDue();
    } finally {
      this.dispatching = false;
    }
  }

  private launch(j: Job): void {
    const interrupt = new SharedArrayBuffer(4);
    const startedAt = j.now ?? Date.now();
    this.running.set(interrupt, j);
    this.perHarness.set(j.harness, (this.perHarness.get(j.harness) ?? 0) + 1);
    const t0 = performance.now();
    this.pending++;
    void this.pool
      .run(
        {
          harness: j.harness,
          kind: j.kind,
          entry: j.entry,
          args: j.argsAt ? j.argsAt(startedAt) : j.args,
          chain: j.chain,
          ...(j.fresh ? { timeoutMs: this.limits.timeoutMs } : {}),
          now: startedAt,
          interrupt,
          ...(j.onLog ? { onLog: j.onLog } : {}),
        },
        this.limits.graceMs,
      )
      .then((r) => {
        this.running.delete(interrupt);
        this.perHarness.set(j.harness, (this.perHarness.get(j.harness) ?? 1) - 1);
        if (r.lost && !r.started && j.wake) {
          this.redeliverUnstarted(j, r.message);
          this.pending--;
          this.emit('idle-check');
          this.dispatch();
          return;
        }
        const info: InvocationInfo = {
          trigger: j.trigger,
          harness: j.harness,
          entry: j.entry,
          chain: j.chain.id,
          depth: j.chain.depth,
          start: startedAt,
          // the guest's run, from its start in the worker; the wait for the worker is queue wait
          ms: performance.now() - t0 - r.waitMs,
          waitMs: startedAt - j.enqueuedAt + r.waitMs,
          fuel: r.lost ? 0 : r.fuelUsed,
        };
        const outcome: Outcome = r.lost
          ? { status: 'error', code: 'worker-lost', message: r.message, logs: [], info }
          : fromRun(r.result, r.logs, info);
        const answer = this.finish(j, outcome);
        this.pending--;
        j.resolve(answer);
        this.emit('idle-check');
        this.dispatch();
      });
  }

  /**
   * A wake delivery whose worker was lost before it started the guest (the worker crashed or was
   * replaced while the run waited in its messages): nothing of it ran, so it is not an outcome of
   * the guest and nothing is journaled. Its claim stays, and it is delivered again with attempt +
   * 1 (counted in `redeliveries`), as after a crash of the process; while shutting down, the
   * claim is left for the next start.
   */
  private redeliverUnstarted(j: Job, why: string): void {
    const w = j.wake!;
    this.log(
      `wake ${w.id} of ${j.harness} (attempt ${w.attempt}) is delivered again: its worker was lost before the guest started (${why})`,
    );
    const deferred = j.scheduleKey !== undefined ? this.schedules.get(j.scheduleKey)?.deferred : undefined;
    if (j.scheduleKey !== undefined) this.schedules.delete(j.scheduleKey);
    if (this.closed) return;
    this.redeliver.push(w);
    if (deferred) this.redeliver.push(deferred);
    this.armTimer();
  }

  /**
   * Journal an ended invocation and forget its wake's claim. Returns what its caller is answered:
   * `o`, or, when the journal record could not be written, an error `store-unavailable` (nothing is
   * acknowledged that is not durable; a wake keeps its claim and is delivered again).
   */
  private finish(j: Job, o: Outcome): Outcome {
    const key = `${j.trigger}:${o.status}`;
    this.counters.invocations[key] = (this.counters.invocations[key] ?? 0) + 1;
    const info = o.info!;
    const rec: JournalRecord = {
      trigger: j.trigger,
      harness: j.harness,
      entry: j.entry,
      chain: info.chain,
      depth: info.depth,
      start: info.start,
      ms: Math.round(info.ms * 1000) / 1000,
      outcome: o.status,
      fuel: info.fuel,
    };
    if (j.wake) {
      rec.wake = j.wake.id;
      rec.attempt = j.wake.attempt;
      rec.scheduledAt = j.wake.when;
    }
    const detail =
      o.status === 'failed'
        ? o.message
        : o.status === 'trapped'
          ? `${o.trap.name}: ${o.trap.message}`
          : o.status === 'error'
            ? o.message
            : o.status === 'refused'
              ? o.error.message
              : undefined;
    if (detail !== undefined) rec.detail = detail.length > 500 ? detail.slice(0, 500) + '...' : detail;
    // only the interrupt of close() keeps the claim: a wake whose own deadline passed during the
    // drain has run to its end like any other, and is finished
    const shutdownInterrupt = this.interrupting && o.status === 'trapped' && o.trap.name === 'Interrupted';
    // journal first, then forget the claim: a kill in between re-delivers (at-least-once)
    let answer = o;
    let journaled = true;
    try {
      this.store.journal.append(rec);
    } catch (e) {
      journaled = false;
      this.log(`journal record of ${j.harness}.${j.entry} not written: ${(e as Error).message}`);
      answer = {
        status: 'error',
        code: 'store-unavailable',
        message: `it ran, but its journal record could not be written (${(e as Error).message}); the result is not acknowledged: retry when the store is back`,
        logs: 'logs' in o ? o.logs : [],
        info: o.info,
      };
    }
    if (j.wake && !shutdownInterrupt && journaled) this.store.dues.finish(j.wake.id, j.wake.seq);
    this.emit('invocation', rec, o);
    if (j.scheduleKey !== undefined) {
      const deferred = this.schedules.get(j.scheduleKey)?.deferred;
      this.schedules.delete(j.scheduleKey);
      if (deferred) this.redeliver.push(deferred);
    }
    return answer;
  }

  // ---------------------------------------------------------------- due-set

  private loadDueSet(): void {
    const claimed = this.store.dues.claimed();
    for (const c of claimed) this.redeliver.push(c);
    const { when, seq } = this.store.dues.index(0);
    this.heap = DueHeap.from(when, seq);
    this.held.clear();
    this.pendingCount = seq.length;
    for (let i = 0; i < seq.length; i++) if (seq[i]! > this.maxSeq) this.maxSeq = seq[i]!;
  }

  /**
   * Start firing due wakes (overdue ones and claimed-but-unfinished ones first). Call it once the
   * harnesses are deployed: a wake whose harness is not deployed when it fires is journaled as an
   * error and dropped. Calls and notifications run without it.
   */
  /** Whether {@link start} was called and {@link close} was not: wakes are delivered. */
  get delivering(): boolean {
    return this.started && !this.closed;
  }

  start(): void {
    if (this.started || this.closed) return;
    this.started = true;
    this.armTimer();
    this.dispatch();
  }

  /**
   * Pick up wakes armed by another process on the same store (`berm wake add` while `berm worker`
   * runs signals it). Cancellations need no rescan: a cancelled wake's claim fails when it is due.
   */
  rescan(): number {
    const { when, seq } = this.store.dues.index(this.maxSeq);
    for (let i = 0; i < seq.length; i++) {
      this.heap.push(when[i]!, seq[i]!);
      if (seq[i]! > this.maxSeq) this.maxSeq = seq[i]!;
    }
    // another process may also have cancelled some: take the store's word for the count
    this.pendingCount = this.store.dues.count();
    this.notBefore = 0;
    this.armTimer();
    return seq.length;
  }

  /**
   * True when this process has started firing, nothing is due in its heap and it could start a
   * wake now: a shared store (several processes on one due-set) then offers it overdue wakes
   * that no process may hold in memory (see {@link adopt}).
   */
  dueIdle(): boolean {
    return (
      this.started &&
      !this.closed &&
      this.redeliver.length === 0 &&
      this.heap.peekWhen() > Date.now() &&
      this.capacity() > 0
    );
  }

  /**
   * Take (when, seq) entries of pending armings into the due heap (a shared store's look for
   * overdue wakes no process holds). An entry already in the heap, or whose arming is gone, costs
   * one failed claim when it comes up; nothing else changes.
   */
  adopt(when: ArrayLike<number>, seq: ArrayLike<number>): void {
    for (let i = 0; i < seq.length; i++) this.heap.push(when[i]!, seq[i]!);
    this.notBefore = 0;
    this.armTimer();
  }

  private armTimer(): void {
    if (this.closed || !this.started) return;
    const now = Date.now();
    let at = this.redeliver.length > 0 ? now : Math.min(this.heap.peekWhen(), this.heldAt(now));
    // due work that could not start sleeps until a limit frees (not a zero-delay timer per turn)
    if (at < this.notBefore) at = this.notBefore;
    if (at === this.timerAt && this.timer) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.timerAt = at;
    if (at === Infinity) return;
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, at - Date.now()));
    this.timer = setTimeout(() => {
      this.timer = null;
      this.timerAt = Infinity;
      this.dispatch();
      this.armTimer();
    }, delay);
    this.timer.unref();
  }

  /**
   * When due work that could not start now may: Infinity when the pool or the concurrency limit is
   * full, or when every harness in `blocked` (those whose due wakes a limit held back) is at its
   * own concurrency: a finishing invocation dispatches. Else the earliest instant one of them gets
   * a rate token, at least 50 ms ahead, so due entries that start nothing for another reason
   * (claimed by another process, cancelled) are looked at again soon, without a busy loop.
   */
  private blockedUntil(now: number, blocked: ReadonlySet<string>): number {
    if (this.capacity() <= 0) return Infinity;
    let wait = blocked.size === 0 ? 0 : Infinity;
    for (const h of blocked) {
      if (this.canStart(h)) wait = Math.min(wait, this.bucket(h).waitMs(now));
    }
    return now + Math.max(50, wait);
  }

  /**
   * The earliest instant a set-aside wake (see `held`) may start: for each harness holding some
   * that is below its concurrency, its earliest entry's due instant or its next rate token,
   * whichever is later. A harness at its concurrency is left out: its finishing invocation
   * dispatches. Infinity when there is none.
   */
  private heldAt(now: number): number {
    let at = Infinity;
    for (const [h, heap] of this.held) {
      if (!this.canStart(h)) continue;
      at = Math.min(at, Math.max(heap.peekWhen(), now + this.bucket(h).waitMs(now)));
    }
    return at;
  }

  /**
   * Why due wakes were left for a later drain, for the spill log line: "pool full (...)" when no
   * wake may start at all (the concurrency limit or no idle worker), and the per-harness limits
   * holding wakes back, each harness named with its limit (`h (harnessRate)`,
   * `h (harnessConcurrency)`): those blocked in this drain, else every harness at a limit now.
   * `now` is the drain's instant, the one its decisions were made at: a rate token that came due
   * while the drain ran (a slow store, a timer that fired a millisecond early) does not erase
   * the limit that held the wakes back.
   */
  private spillReason(blocked: ReadonlySet<string>, now: number): string {
    const parts: string[] = [];
    if (this.capacity() <= 0)
      parts.push(`pool full: ${this.running.size} running, ${this.pool.idle()} workers idle`);
    const held: string[] = [];
    for (const h of blocked.size > 0 ? blocked : this.registry.keys()) {
      if ((this.perHarness.get(h) ?? 0) >= this.limits.harnessConcurrency)
        held.push(`${h} (harnessConcurrency)`);
      else if (this.bucket(h).waitMs(now) > 0) held.push(`${h} (harnessRate)`);
    }
    if (held.length > 0) parts.push(`held by per-harness limits: ${held.join(', ')}`);
    return parts.join('; ') || 'not started in this drain';
  }

  /** Free capacity for wakes right now. */
  private capacity(): number {
    return Math.min(this.limits.concurrency - this.running.size, this.pool.idle());
  }

  /** Start due wakes while there is capacity; count and log what spills to the next drain. */
  private drainDue(): void {
    const now = Date.now();
    const setAside: [number, number][] = [];
    const startedBefore = this.wakesStarted;
    // harnesses whose due wakes were held back by a limit in this drain
    const blocked = new Set<string>();
    while (this.redeliver.length > 0 && this.capacity() > 0) {
      const w = this.redeliver.shift()!;
      const again = this.store.dues.reclaim(w.id, w.seq);
      if (!again) continue;
      this.counters.redeliveries++;
      this.startWake(again, now);
    }
    const claimDue = this.store.dues.claimDue?.bind(this.store.dues);
    // A shared store: take what is due, as many as there is room for, in one round trip; the heap
    // only says when to look. When fewer come back than asked, nothing else is due and free, so
    // the due entries left are stale (claimed elsewhere, cancelled, replaced) or being claimed by
    // another process right now: dropped.
    // Only harnesses that may start now (below their concurrency, with a rate token) are asked
    // for, so one harness at its limit does not hold back the others' wakes.
    while (claimDue && this.heap.peekWhen() <= now && this.capacity() > 0) {
      const open = [...this.registry.keys()].filter(
        (h) => this.canStart(h) && this.bucket(h).waitMs(now) === 0,
      );
      const want = this.capacity();
      const shut = this.registry.size - open.length;
      for (const h of this.registry.keys()) if (!open.includes(h)) blocked.add(h);
      if (open.length === 0) break;
      const got = claimDue(now, want, open, [this.heap.peekWhen(), this.heap.peekSeq()]);
      // entries up to the last row claimed are claimed now, elsewhere, or being claimed elsewhere
      // (an armed row before it that was free would have come back first)
      const last = got[got.length - 1];
      while (
        last &&
        (this.heap.peekWhen() < last.when ||
          (this.heap.peekWhen() === last.when && this.heap.peekSeq() <= last.seq))
      )
        this.heap.pop();
      let held = false;
      for (const w of got) {
        this.pendingCount--;
        if (!this.canStart(w.harness) || !this.bucket(w.harness).take(now)) {
          // a harness reached its limit within this batch: back to pending for a later drain
          this.store.dues.release(w.id, w.seq, w.when);
          this.pendingCount++;
          setAside.push([w.when, w.seq]);
          blocked.add(w.harness);
          held = true;
          continue;
        }
        this.startWake(w, now);
      }
      if (got.length < want) {
        while (this.heap.peekWhen() <= now) this.heap.pop();
        // wakes of a harness at its limit may still be due: look again when one can start (a
        // rate token, else a short wait for a running one to finish); seq -1 names no arming
        if (shut > 0) {
          const wait = Math.min(
            ...[...this.registry.keys()]
              .filter((h) => !open.includes(h))
              .map((h) => Math.max(50, this.bucket(h).waitMs(now))),
          );
          this.heap.push(now + wait, -1);
        }
        break;
      }
      if (held) break;
    }
    // A local store: the earliest due entry, from the main heap or from the set-aside heap of a
    // harness that may start now; an entry whose harness is at its limit moves to that harness's
    // heap (claimed and released once), so it does not stand in front of other harnesses' wakes.
    // At most SET_ASIDE_PER_DRAIN move per drain, so a drain stays cheap; the next drain goes on.
    let movedAside = 0;
    while (!claimDue && this.capacity() > 0) {
      let from: DueHeap | null = this.heap.peekWhen() <= now ? this.heap : null;
      let fromHarness: string | null = null; // null: the main heap
      for (const [h, heap] of this.held) {
        if (heap.peekWhen() > now) continue;
        if (!this.canStart(h) || this.bucket(h).waitMs(now) > 0) continue;
        if (
          from === null ||
          heap.peekWhen() < from.peekWhen() ||
          (heap.peekWhen() === from.peekWhen() && heap.peekSeq() < from.peekSeq())
        ) {
          from = heap;
          fromHarness = h;
        }
      }
      if (from === null) break;
      const when = from.peekWhen();
      const seq = from.peekSeq();
      from.pop();
      if (fromHarness !== null && from.size === 0) this.held.delete(fromHarness);
      const w = this.store.dues.claim(seq);
      if (!w) continue; // cancelled or replaced
      this.pendingCount--;
      if (!this.canStart(w.harness) || !this.bucket(w.harness).take(now)) {
        // the harness is at its concurrency or rate limit: back to pending, in its own heap
        this.store.dues.release(w.id, w.seq, w.when);
        this.pendingCount++;
        let aside = this.held.get(w.harness);
        if (!aside) this.held.set(w.harness, (aside = new DueHeap(16)));
        aside.push(when, seq);
        blocked.add(w.harness);
        if (++movedAside >= SET_ASIDE_PER_DRAIN) break;
        continue;
      }
      this.startWake(w, now);
    }
    for (const [when, seq] of setAside) this.heap.push(when, seq);
    // each due wake left behind is counted once (those that fell due since the last count), at
    // most every 50 ms: the count walks the due part of the heap
    let spilled = 0;
    if (this.heap.peekWhen() > now) this.spillMark = now;
    else if (now - this.spillCountedAt >= 50) {
      spilled = this.heap.countDue(now, this.spillMark);
      this.spillMark = now;
      this.spillCountedAt = now;
    }
    this.notBefore =
      this.wakesStarted === startedBefore && (this.redeliver.length > 0 || this.heap.peekWhen() <= now)
        ? // ...but an entry falling due later still fires on time
          Math.min(this.blockedUntil(now, blocked), this.heap.earliestAfter(now))
        : 0;
    if (spilled > 0) {
      this.counters.spills += spilled;
      const oldest = this.heap.peekWhen();
      this.emit('spill', { count: spilled, lateMs: now - oldest });
      if (now - this.lastSpillLog >= 1000) {
        this.lastSpillLog = now;
        this.log(
          `spilled ${spilled} due wakes to the next drain (${this.spillReason(blocked, now)}); the oldest is ${now - oldest} ms late`,
        );
      }
    }
    this.armTimer();
  }

  /** One of the wakes `armedBy` armed left the due-set here: its kept count is recounted at the limit. */
  private unsettle(armedBy: string): void {
    const c = this.armedCounts.get(armedBy);
    if (c) c.settled = false;
  }

  private startWake(w: WakeRecord, now: number): void {
    this.wakesStarted++;
    this.unsettle(w.armedBy);
    const h = this.registry.get(w.harness);
    const chain: ChainSpec = {
      ...this.freshChain(w.authority ?? undefined),
      depth: w.depth,
      ...(w.chain && w.kind === 'call' ? { id: w.chain } : {}),
    };
    const key = `${w.harness}\0${w.id}`;
    const job: Omit<Job, 'resolve' | 'enqueuedAt'> = {
      trigger: 'wake',
      harness: w.harness,
      kind: w.kind === 'wake' ? 'export' : 'tool',
      entry: w.entry,
      args:
        w.kind === 'wake'
          ? JSON.stringify({ id: w.id, scheduled_at: w.when, now, attempt: w.attempt, payload: w.payload })
          : w.payload,
      chain,
      fresh: true,
      wake: w,
      scheduleKey: key,
      now,
    };
    const fail = (code: 'unknown-harness' | 'harness', message: string) => {
      const o: Outcome = { status: 'error', code, message, logs: [], info: this.noRunInfo(job, now) };
      this.finish({ ...job, enqueuedAt: now, resolve: () => {} }, o);
    };
    if (!h) return fail('unknown-harness', `no harness named ${w.harness} is deployed; the wake is dropped`);
    if (w.kind === 'wake' && !h.onWake)
      return fail('harness', `harness ${w.harness} does not export ${ON_WAKE}`);
    const running = this.schedules.get(key);
    if (running) {
      // an occurrence the running one armed itself (a recurring schedule re-arms first, and its
      // next instant may already be due: docs/wakes.md) is the schedule's continuation: dropping
      // it would end the schedule, so it waits for the running one, whatever overrun says
      if (this.limits.overrun === 'defer' || w.chain === running.chain) {
        running.deferred = w; // runs when the previous occurrence finishes (the latest replaces)
        return;
      }
      this.counters.overrunSkips++;
      const rec: JournalRecord = {
        trigger: 'skip',
        harness: w.harness,
        entry: w.entry,
        chain: chain.id,
        depth: w.depth,
        wake: w.id,
        attempt: w.attempt,
        scheduledAt: w.when,
        start: now,
        ms: 0,
        outcome: 'refused',
        detail: `refused by limit overrun = skip: the previous occurrence of ${w.id} is still running`,
        fuel: 0,
      };
      this.store.journal.append(rec);
      this.store.dues.finish(w.id, w.seq);
      this.emit('invocation', rec, null);
      return;
    }
    this.schedules.set(key, { chain: chain.id, deferred: null });
    this.emit('wake', {
      id: w.id,
      harness: w.harness,
      scheduledAt: w.when,
      firedAt: now,
      lateMs: now - w.when,
      attempt: w.attempt,
    });
    this.launch({ ...job, enqueuedAt: now, resolve: () => {} });
  }

  private noRunInfo(j: Omit<Job, 'resolve' | 'enqueuedAt'>, now: number): InvocationInfo {
    return {
      trigger: j.trigger,
      harness: j.harness,
      entry: j.entry,
      chain: j.chain.id,
      depth: j.chain.depth,
      start: now,
      ms: 0,
      waitMs: 0,
      fuel: 0,
    };
  }

  /**
   * Arm a wake of `harness`'s on_wake (from outside a guest or from the schedule capability).
   * @param spec delayMs from now, or at (ms since epoch); payload (UTF-8 text); id (default: a new
   *   UUID); armedBy ('api' by default)
   * @returns the stored record
   * @throws ArmError for an unknown harness, one without on_wake, a non-finite or negative
   *   instant, a bad id; LimitError for a payload or delay over the limit or a full due-set.
   *   Nothing is armed when it throws.
   */
  arm(spec: ArmSpec): WakeRecord {
    const w = wakeSpec(spec, this.registry.get(spec.harness), [...this.registry.keys()], this.limits);
    if (spec.guest) {
      // wake ids are one namespace across the due-set's harnesses: a guest's re-arm replaces
      // only a wake of its own on_wake, never another harness's
      const held = this.store.dues.get(w.id);
      if (held && !ownsWake(held, spec.harness))
        throw new ArmError(
          `wake id ${JSON.stringify(w.id)} is taken by a wake this harness does not own; choose another id`,
        );
      // a re-arm replaces its own wake: only a new one counts against the harness's quota
      if (!held) {
        this.checkArmQuota(w.armedBy);
        const record = this.put(w);
        this.armedCounts.get(w.armedBy)!.n++;
        return record;
      }
    }
    return this.put(w);
  }

  /**
   * The harnessPendingWakes limit: refuse a new wake armed by harness `by` when `by` already has
   * that many pending. The store is counted (a bounded index range, ~1 ms at 10,000) only when the
   * kept upper bound is a second old (with a shared store other daemons fire, cancel and arm too),
   * or would reach the limit after one of `by`'s wakes fired or was cancelled here: so arming below
   * the limit costs no count, and neither does a refusal. A guest at its limit that kept calling
   * berm.wake.arm had every refused call count 10,000 index entries on the queue's thread, a
   * thousand times the cost of an arm, in front of every other harness's work.
   * @throws LimitError harnessPendingWakes
   */
  private checkArmQuota(by: string): void {
    const max = this.limits.harnessPendingWakes;
    const now = Date.now();
    let c = this.armedCounts.get(by);
    if (!c || (c.n + 1 > max && !c.settled) || now - c.at >= 1000) {
      c = { n: this.store.dues.countArmedBy(by, max), at: now, settled: true };
      this.armedCounts.set(by, c);
    }
    if (c.n >= max)
      throw new LimitError(
        'harnessPendingWakes',
        max,
        `harness ${by} has ${max} wakes pending that it armed; cancel some (berm.wake.cancel) or let them fire first`,
      );
  }

  /**
   * Call `harness.tool(args)` after a delay (berm.call.after), or at the instant `at` (ms since
   * the Unix epoch; a past one is due at once) when given; at most one pending per arming
   * harness: re-arming replaces it. Inherits the arming chain (depth + 1).
   * @throws ArmError / LimitError as {@link arm}; LimitError chainDepth when too deep.
   */
  callAfter(spec: {
    by: string;
    delayMs: number;
    at?: number;
    harness: string;
    tool: string;
    args: string;
    chain?: ChainSpec;
  }): WakeRecord {
    const h = this.registry.get(spec.harness);
    if (!h) throw new ArmError(`no harness named ${spec.harness} is deployed`);
    if (!h.tools.some((t) => t.name === spec.tool))
      throw new ArmError(`harness ${spec.harness} has no tool named ${spec.tool}`);
    const when = instant(spec.delayMs, spec.at, this.limits);
    checkPayload(spec.args, this.limits);
    const held = this.store.dues.get(`${CALL_AFTER_PREFIX}${spec.by}`);
    if (held && !ownsWake(held, spec.by))
      throw new ArmError(`the wake id ${held.id} is taken by a wake ${spec.by} did not arm`);
    const depth = (spec.chain?.depth ?? -1) + 1;
    if (depth > this.limits.chainDepth)
      throw new LimitError('chainDepth', this.limits.chainDepth, `berm.call.after at depth ${depth}`);
    if (!held) {
      this.checkArmQuota(spec.by);
      this.armedCounts.get(spec.by)!.n++;
    }
    return this.put({
      id: `${CALL_AFTER_PREFIX}${spec.by}`,
      kind: 'call',
      harness: spec.harness,
      entry: spec.tool,
      when,
      payload: spec.args,
      armedBy: spec.by,
      chain: spec.chain?.id ?? null,
      depth,
      armedAt: Date.now(),
      authority: spec.chain?.authority ?? null,
    });
  }

  private put(spec: WakeSpec): WakeRecord {
    if (this.pendingCount >= this.limits.maxPendingWakes && !this.store.dues.get(spec.id))
      throw new LimitError('maxPendingWakes', this.limits.maxPendingWakes, 'the due-set is full');
    const { record, replaced } = this.store.dues.arm(spec);
    if (!replaced) this.pendingCount++;
    if (record.seq > this.maxSeq) this.maxSeq = record.seq;
    this.heap.push(record.when, record.seq);
    this.notBefore = 0;
    this.armTimer();
    this.emit('armed', record);
    return record;
  }

  /**
   * Cancel a pending wake. Without `harness` (the operator: API, CLI) any wake of that id; with it
   * (a guest's berm.wake.cancel) only one `harness` owns: a wake of its own on_wake, or the
   * berm.call.after it armed (stored under the harness it calls).
   * @returns whether one was cancelled.
   */
  cancel(id: string, harness?: string): boolean {
    let done: boolean;
    const held = this.store.dues.get(id);
    if (harness === undefined) done = this.store.dues.cancel(id);
    else {
      done = held !== undefined && ownsWake(held, harness) && this.store.dues.cancel(id, held.harness);
      if (done) this.unsettle(held!.armedBy);
    }
    if (done) {
      this.pendingCount--;
      this.emit('cancelled', { id, harness: held?.harness ?? '' });
    }
    return done;
  }

  /** Pending wakes, earliest first, as DueStore.list bounds them. */
  list(options: WakeListOptions = {}): WakeRecord[] {
    return this.store.dues.list(options);
  }

  /**
   * Register (or replace) a service that guests' capabilities reach by name through
   * CapabilityContext.service.
   */
  registerService(name: string, service: QueueService): void {
    this.services.set(name, service);
  }

  /** The schedule capability's calls and service requests, coming from a worker. */
  private onHost(req: HostRequest): CapabilityReply {
    const r = req.req as Record<string, unknown>;
    if (req.op === 'service') {
      const service = this.services.get(r.name as string);
      if (!service) return { error: `no service named ${String(r.name)} runs on the queue` };
      return service(req.harness, req.chain, r.request);
    }
    try {
      switch (req.op) {
        case 'arm': {
          const w = this.arm({
            harness: req.harness,
            // an absolute instant stays one (the schedule capability sends the invocation's
            // instant + delay): converting it back to a delay would move it by the time between
            // the start of the invocation and this call; the delay is still checked against
            // maxDelayMs (instant)
            ...(r.at !== undefined ? { at: r.at as number } : {}),
            delayMs: r.delayMs as number,
            payload: r.payload as string,
            ...(typeof r.id === 'string' ? { id: r.id } : {}),
            armedBy: req.harness,
            guest: true,
            chain: req.chain,
          });
          return ok(w.id);
        }
        case 'cancel':
          return ok(this.cancel(r.id as string, req.harness) ? '1' : '0');
        case 'callAfter': {
          const w = this.callAfter({
            by: req.harness,
            delayMs: r.delayMs as number,
            ...(r.at !== undefined ? { at: r.at as number } : {}),
            harness: r.harness as string,
            tool: r.tool as string,
            args: r.args as string,
            chain: req.chain,
          });
          return ok(w.id);
        }
      }
    } catch (e) {
      const name =
        req.op === 'arm' ? 'berm.wake.arm' : req.op === 'cancel' ? 'berm.wake.cancel' : 'berm.call.after';
      return { refused: `${name}: ${(e as Error).message}` };
    }
  }

  // ---------------------------------------------------------------- observability, shutdown

  /** Counters and gauges (see {@link RuntimeStats}). */
  stats(): RuntimeStats {
    return {
      queueDepth: this.queue.length,
      inFlight: this.running.size,
      workers: this.pool.size,
      idleWorkers: this.pool.idle(),
      invocations: { ...this.counters.invocations },
      wakesPending: this.pendingCount,
      wakesClaimed: this.running.size + this.redeliver.length,
      spills: this.counters.spills,
      overrunSkips: this.counters.overrunSkips,
      redeliveries: this.counters.redeliveries,
      translations: { cached: this.counters.cached, translated: this.counters.translated },
      workersReplaced: this.pool.replaced,
    };
  }

  private log(line: string): void {
    this.options.log?.(line);
    this.emit('log', line);
  }

  /**
   * Stop accepting, refuse what is queued, let in-flight work finish for up to `drainMs` (default
   * the limit), then interrupt what still runs (a wake interrupted this way stays claimed and is
   * re-delivered at the next start), terminate the workers and close the store.
   */
  async close(drainMs = this.limits.drainMs): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.connections.shutdown();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    for (const j of this.queue.splice(0))
      j.resolve(refused(new LimitError('closed', 'closed', 'the runtime shut down before it started')));
    const drained = new Promise<void>((resolve) => {
      const check = () => {
        if (this.pending === 0) {
          this.off('idle-check', check);
          resolve();
        }
      };
      this.on('idle-check', check);
      check();
    });
    let t: NodeJS.Timeout | undefined;
    const bound = new Promise<'timeout'>((resolve) => (t = setTimeout(() => resolve('timeout'), drainMs)));
    if ((await Promise.race([drained, bound])) === 'timeout') {
      this.interrupting = true;
      this.pool.interruptAll(this.running.keys());
      const t2 = new Promise<void>((resolve) => setTimeout(resolve, this.limits.graceMs));
      await Promise.race([drained, t2]);
    }
    clearTimeout(t);
    await this.pool.close();
    this.store.close();
  }
}

function errorOutcome(code: Extract<Outcome, { status: 'error' }>['code'], message: string): Outcome {
  return { status: 'error', code, message, logs: [], info: null };
}

function refused(error: LimitError): Outcome {
  return { status: 'refused', error, info: null };
}

function fromRun(r: RunResult, logs: string[], info: InvocationInfo): Outcome {
  switch (r.status) {
    case 'ok':
      return { status: 'ok', result: r.result, logs, info };
    case 'failed':
      return { status: 'failed', message: r.message, logs, info };
    case 'trapped':
      return { status: 'trapped', trap: r.trap, logs, info };
    case 'error':
      return { status: 'error', code: r.code, message: r.message, logs, info };
  }
}

/** What {@link BermRuntime.arm} takes. */
export interface ArmSpec {
  harness: string;
  /**
   * ms from now (default 0). With `at` as well: the delay that `at` came from (an instant plus
   * this delay: the schedule capability's arm), checked against maxDelayMs as a delay
   */
  delayMs?: number;
  /** due instant, ms since epoch (a past one is due at once) */
  at?: number;
  /** UTF-8 text handed to on_wake (default '') */
  payload?: string;
  /** wake id (default a new UUID); re-arming an id replaces the pending wake */
  id?: string;
  /** 'api', 'cli' or the arming harness (default 'api') */
  armedBy?: string;
  /**
   * armed by `harness` itself through a capability (berm.wake.arm, the protocol door): an
   * existing wake of the same id is replaced only when `harness` owns it (its own on_wake's);
   * otherwise ArmError. Without it (the operator) any wake of that id is replaced.
   */
  guest?: boolean;
  chain?: ChainSpec;
  /** who the wake acts for (default: the arming chain's authority); persisted with the wake */
  authority?: Authority;
}

/**
 * Check an arming request against the target harness and the limits and build what to store.
 * Shared by the runtime and by arming from outside a running queue (berm wake add).
 * @param target the harness as known (undefined: not deployed or declared)
 * @param known names of the known harnesses, for the error message
 * @throws ArmError / LimitError (see {@link BermRuntime.arm})
 */
export function wakeSpec(
  spec: ArmSpec,
  target: { onWake: boolean } | undefined,
  known: string[],
  limits: Pick<RuntimeLimits, 'maxDelayMs' | 'maxPayloadBytes'>,
): WakeSpec {
  if (!target)
    throw new ArmError(
      `no harness named ${spec.harness} is deployed (deployed: ${[...known].sort().join(', ') || 'none'})`,
    );
  if (!target.onWake)
    throw new ArmError(`harness ${spec.harness} does not export ${ON_WAKE}; it cannot be woken`);
  const when = instant(spec.delayMs, spec.at, limits);
  const payload = spec.payload ?? '';
  checkPayload(payload, limits);
  const id = spec.id ?? `w-${randomUUID()}`;
  checkId(id);
  return {
    id,
    kind: 'wake',
    harness: spec.harness,
    entry: ON_WAKE,
    when,
    payload,
    armedBy: spec.armedBy ?? 'api',
    chain: spec.chain?.id ?? null,
    // a schedule is not a chain: each occurrence starts a fresh one (else a recurring wake would
    // hit the depth limit after a few occurrences)
    depth: 0,
    armedAt: Date.now(),
    // ...but it acts for whoever armed it (persisted with the wake)
    authority: spec.authority ?? spec.chain?.authority ?? null,
  };
}

/**
 * The due instant (ms since the epoch, rounded) of a wake armed with `delayMs` from now, or at `at`.
 * Both given: due at `at`, which is an earlier instant plus `delayMs` (the schedule capability
 * counts a guest's delay from its invocation's instant, docs/wakes.md); the delay itself is then
 * checked too, so a guest that ran for a while cannot arm further ahead than maxDelayMs.
 * @throws ArmError for a delay that is not finite or negative, or an instant that is not finite;
 *   LimitError maxDelayMs for a delay, or a due instant from now, over the limit
 */
function instant(
  delayMs: number | undefined,
  at: number | undefined,
  limits: Pick<RuntimeLimits, 'maxDelayMs'>,
): number {
  const now = Date.now();
  let when: number | undefined;
  if (at !== undefined) {
    if (typeof at !== 'number' || !Number.isFinite(at))
      throw new ArmError(`the instant ${at} is not a finite number of ms since the epoch`);
    when = at;
  }
  if (delayMs !== undefined || when === undefined) {
    const d = delayMs ?? 0;
    if (typeof d !== 'number' || !Number.isFinite(d)) throw new ArmError(`delay ${d} ms is not finite`);
    if (d < 0) throw new ArmError(`delay ${d} ms is negative`);
    if (d > limits.maxDelayMs) throw new LimitError('maxDelayMs', limits.maxDelayMs, `the delay is ${d} ms`);
    when ??= now + d;
  }
  if (when - now > limits.maxDelayMs)
    throw new LimitError(
      'maxDelayMs',
      limits.maxDelayMs,
      `the wake would be due in ${Math.round(when - now)} ms`,
    );
  return Math.round(when);
}

function checkPayload(payload: string, limits: Pick<RuntimeLimits, 'maxPayloadBytes'>): void {
  const n = Buffer.byteLength(payload, 'utf8');
  if (n > limits.maxPayloadBytes)
    throw new LimitError('maxPayloadBytes', limits.maxPayloadBytes, `the payload is ${n} bytes`);
}

function checkId(id: string): void {
  // control characters: C0, DEL and C1 (Unicode Cc); an id is printed as it is (berm wake ls)
  if (id === '' || Buffer.byteLength(id) > 256 || /\p{Cc}/u.test(id))
    throw new ArmError(
      `wake id ${JSON.stringify(id.slice(0, 40))} must be 1..256 bytes without control characters`,
    );
  if (id.startsWith(CALL_AFTER_PREFIX))
    throw new ArmError(
      `wake id ${JSON.stringify(id.slice(0, 40))} is reserved for berm.call.after (ids ${CALL_AFTER_PREFIX}<harness>)`,
    );
}

/** The id of a harness's pending berm.call.after is this prefix and the arming harness's name. */
const CALL_AFTER_PREFIX = 'after:';

/**
 * Whether `harness` owns a pending wake, so that its guest may replace or cancel it: a wake of its
 * own on_wake (whoever armed it), or the berm.call.after it armed (stored under its target).
 */
function ownsWake(w: Pick<WakeRecord, 'kind' | 'harness' | 'armedBy'>, harness: string): boolean {
  return w.kind === 'wake' ? w.harness === harness : w.armedBy === harness;
}

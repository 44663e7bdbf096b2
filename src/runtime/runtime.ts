/**
 * The runtime's core: one queue through which every guest start passes, whatever started it, with
 * three triggers —
 *   call   a tool was invoked (has a reply),
 *   wake   a due instant of the due-set (the harness's exported `on_wake`),
 *   notify a subscribed event (the harness's exported `on_notify`, fire-and-forget) —
 * a worker pool that runs them, the limits that decide when they may start, the due-set, the
 * journal and a harness registry that can change at run time.
 *
 * BermRuntime is the façade over the components that do each job:
 *   runtime-options.ts the options checked, the defaults filled in, the store opened
 *   registry.ts        the deployed harnesses
 *   dispatcher.ts      the queue, what runs, the limits on starting, journaling outcomes
 *   wake-scheduler.ts  the due heap, its timer and the drains that claim due wakes
 *   wake-delivery.ts   starting claimed wakes, one occurrence per schedule, settling claims
 *   arming.ts          arming and cancelling wakes against the limits
 *   dead-letter.ts     the dead-letter set: moving spent claims there, dropping entries
 *   host-calls.ts      guests' host calls back to this thread, and the queue's services
 *
 * Threads: this object lives on the accepting thread and never runs a guest or a translation;
 * workers do (pool.ts). Guest host calls that touch the due-set come back here synchronously
 * (worker-messages.ts), so the due-set has one writer.
 *
 * Delivery of wakes is at-least-once (docs/runtime-queue.md): a wake is claimed in the store (its
 * attempt counted) before it runs and forgotten only after its outcome is journaled, so a process
 * killed in between re-fires it at the next start with attempt + 1.
 */
import { EventEmitter } from 'node:events';
import type { Grant } from '../capabilities/types.js';
import type { Declarations } from '../config/declarations.js';
import type { RuntimeStats } from '../contract/index.js';
import { WakeArming, type ArmSpec, type CallAfterSpec } from './arming.js';
import { attachConnections } from './connections.js';
import { dropDeadEntry } from './dead-letter.js';
import { Dispatcher } from './dispatcher.js';
import { HostCalls, type QueueService } from './host-calls.js';
import { LimitError, type LimitSource, type RuntimeLimits } from './limits.js';
import { ON_NOTIFY, errorOutcome, type Counters, type InvokeOptions, type Outcome } from './outcome.js';
import { WorkerPool } from './pool.js';
import type { ChainSpec } from './worker-messages.js';
import { HarnessRegistry, type DeployedHarness } from './registry.js';
import { resolveOptions, workerConfig, type RuntimeOptions } from './runtime-options.js';
import type { DeadWake, RetryDeadResult, RuntimeStore, WakeListOptions, WakeRecord } from '../store/store.js';
import { storeFault } from '../store/store-fault.js';
import { WakeScheduler } from './wake-scheduler.js';

/** How long due wakes wait after a drain met a store fault before the next try, ms. */
const STORE_FAULT_RETRY_MS = 1000;

/** The queue, its workers, its due-set and its harness registry. */
export class BermRuntime extends EventEmitter {
  readonly limits: Readonly<RuntimeLimits>;
  readonly limitSources: Readonly<Record<keyof RuntimeLimits, LimitSource>>;
  private readonly pool: WorkerPool;
  private readonly registry: HarnessRegistry;
  private readonly dispatcher: Dispatcher;
  private readonly scheduler: WakeScheduler;
  private readonly arming: WakeArming;
  private readonly counters: Counters = {
    invocations: {},
    spills: 0,
    overrunSkips: 0,
    redeliveries: 0,
    deadLettered: 0,
    cancelled: { queued: 0, running: 0 },
    cached: 0,
    translated: 0,
  };
  /** the host calls guests make back to this thread, and the services they reach */
  private readonly hostCalls: HostCalls;
  /** when the last store fault of a drain was logged (ms since the epoch) */
  private lastStoreFaultLog = -Infinity;
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
    const emit = (event: string, ...args: unknown[]) => void this.emit(event, ...args);
    const log = (line: string) => this.log(line);
    this.pool = new WorkerPool({
      size: poolSize,
      config: workerConfig(options, store, limits, poolSize),
      onHost: (req) => this.hostCalls.handle(req),
      onReplace: (why) => this.log(`worker replaced: ${why}`),
      onIdle: () => this.dispatcher.dispatch(),
      // what a harness's instances now run: the optimised tier
      onOptimized: (from, info) => this.registry.optimized(from, info),
    });
    this.registry = new HarnessRegistry(this.pool, store, this.counters, emit);
    this.dispatcher = new Dispatcher(this.limits, this.pool, store, this.counters, {
      drainDue: () => this.drainDue(),
      unstarted: (j, why, delayMs) => this.scheduler.delivery.unstarted(j, why, delayMs),
      settle: (j, o, journalError) => this.scheduler.delivery.settle(j, o, journalError),
      finished: (j) => this.scheduler.delivery.finished(j),
      emit,
      log,
    });
    this.scheduler = new WakeScheduler({
      limits: this.limits,
      store,
      pool: this.pool,
      counters: this.counters,
      dispatcher: this.dispatcher,
      registry: this.registry,
      emit,
      log,
      left: (armedBy) => this.arming.unsettle(armedBy),
      ...(options.dueWindow !== undefined ? { window: options.dueWindow } : {}),
    });
    this.arming = new WakeArming(this.limits, store, this.registry, () => this.scheduler, emit);
    this.hostCalls = new HostCalls(this.arming);
    this.connections = attachConnections(this, limits, log, options.state);
    // a failed WAL checkpoint of the store's own thread, for instance
    store.reportTo?.(log);
  }

  /**
   * Open the store, start the workers and load the due-set (no guest runs; wakes fire once
   * {@link start} is called).
   * @throws RangeError for bad limits or pool size; whatever opening the store throws.
   */
  static async create(options: RuntimeOptions): Promise<BermRuntime> {
    const r = resolveOptions(options);
    const rt = new BermRuntime(r.store, r.options, r.limits, r.sources, r.poolSize);
    rt.scheduler.load();
    return rt;
  }

  // ---------------------------------------------------------------- registry (registry.ts)

  /**
   * Deploy (or replace) a harness: compile in a worker, check its manifest, publish to every
   * worker, persist the deployment (unless `persist` is false). See HarnessRegistry.deploy.
   * @throws ArmError for a bad name or an unknown capability; ElfError / ManifestError /
   *   HarnessError (by name) for a bad image.
   */
  deploy(
    name: string,
    elf: Uint8Array,
    grant: { capabilities: string[]; grant?: Grant },
    opts: { persist?: boolean } = {},
  ): Promise<DeployedHarness> {
    return this.registry.deploy(name, elf, grant, opts);
  }

  /**
   * Remove a harness; its pending wakes stay in the due-set (they fail if it never returns). Its
   * record is removed from the store unless `persist` is false.
   */
  undeploy(name: string, opts: { persist?: boolean } = {}): boolean {
    return this.registry.undeploy(name, opts);
  }

  /**
   * Deploy every accepted harness of a declaration file with exactly its grant (not persisted).
   * @throws what {@link deploy} throws for the first harness that cannot be deployed.
   */
  loadDeclarations(decls: Declarations): Promise<DeployedHarness[]> {
    return this.registry.loadDeclarations(decls);
  }

  /** Re-deploy what the store holds (a daemon's restart). No guest runs. */
  restoreDeployments(): Promise<DeployedHarness[]> {
    return this.registry.restoreDeployments();
  }

  /** Every deployed harness, by name. */
  harnesses(): DeployedHarness[] {
    return this.registry.list();
  }

  /** A deployed harness, or undefined. */
  harness(name: string): DeployedHarness | undefined {
    return this.registry.get(name);
  }

  // ---------------------------------------------------------------- triggers (dispatcher.ts)

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
    if (!h) return Promise.resolve(this.registry.notFound(harness));
    if (!h.tools.some((t) => t.name === tool)) {
      const known = h.tools.map((t) => t.name).join(', ') || 'none';
      return Promise.resolve(
        errorOutcome('unknown-tool', `harness ${harness} has no tool named ${tool} (tools: ${known})`),
      );
    }
    return this.dispatcher.submit({
      trigger: opts.trigger ?? 'call',
      harness,
      kind: 'tool',
      entry: tool,
      args,
      chain: this.dispatcher.freshChain(opts.authority),
      fresh: true,
      onLog: opts.onLog,
      signal: opts.signal,
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
    if (!h) return Promise.resolve(this.registry.notFound(harness));
    if (!h.onNotify)
      return Promise.resolve(
        errorOutcome('harness', `harness ${harness} does not export ${ON_NOTIFY}; it cannot receive events`),
      );
    const chain = opts.chain
      ? this.dispatcher.childChain(opts.chain)
      : this.dispatcher.freshChain(opts.authority);
    if (chain instanceof LimitError) return Promise.resolve({ status: 'refused', error: chain, info: null });
    // the record's now is the launch instant (a trigger may wait in the queue first), the same
    // instant the guest's schedule delays count from
    const argsAt = (now: number) =>
      JSON.stringify({ id: record.id, source: record.source, payload: record.payload, now, attempt: 1 });
    return this.dispatcher.submit({
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

  // ---------------------------------------------------------------- due-set (wake-scheduler.ts, arming.ts)

  /** Whether {@link start} was called and {@link close} was not: wakes are delivered. */
  get delivering(): boolean {
    return this.scheduler.delivering;
  }

  /**
   * Start firing due wakes (overdue ones and claimed-but-unfinished ones first). Call it once the
   * harnesses are deployed: a wake whose harness is not deployed when it fires is journaled as an
   * error and dropped. Calls and notifications run without it.
   */
  start(): void {
    if (this.scheduler.start()) this.dispatcher.dispatch();
  }

  /**
   * Pick up wakes armed by another process on the same store (`berm wake add` while `berm worker`
   * runs signals it). Cancellations need no rescan: a cancelled wake's claim fails when it is due.
   * @returns how many armings were taken in
   */
  rescan(): number {
    return this.scheduler.rescan();
  }

  /**
   * True when this process has started firing, nothing is due in its heap and it could start a
   * wake now: a shared store (several processes on one due-set) then offers it overdue wakes
   * that no process may hold in memory (see {@link adopt}).
   */
  dueIdle(): boolean {
    return this.scheduler.dueIdle();
  }

  /**
   * Take (when, seq) entries of pending armings into the due heap (a shared store's look for
   * overdue wakes no process holds). An entry already in the heap, or whose arming is gone, costs
   * one failed claim when it comes up; nothing else changes.
   */
  adopt(when: ArrayLike<number>, seq: ArrayLike<number>): void {
    this.scheduler.adopt(when, seq);
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
    return this.arming.arm(spec);
  }

  /**
   * Call `harness.tool(args)` after a delay (berm.call.after), or at the instant `at` (ms since
   * the Unix epoch; a past one is due at once) when given; at most one pending per arming
   * harness: re-arming replaces it. Inherits the arming chain (depth + 1).
   * @throws ArmError / LimitError as {@link arm}; LimitError chainDepth when too deep.
   */
  callAfter(spec: CallAfterSpec): WakeRecord {
    return this.arming.callAfter(spec);
  }

  /**
   * Cancel a pending wake. Without `harness` (the operator: API, CLI) any wake of that id; with it
   * (a guest's berm.wake.cancel) only one `harness` owns: a wake of its own on_wake, or the
   * berm.call.after it armed (stored under the harness it calls).
   * @returns whether one was cancelled.
   */
  cancel(id: string, harness?: string): boolean {
    return this.arming.cancel(id, harness);
  }

  /** Pending wakes, earliest first, as DueStore.list bounds them. */
  list(options: WakeListOptions = {}): WakeRecord[] {
    return this.arming.list(options);
  }

  // ---------------------------------------------------------------- the dead-letter set

  /** Dead-letter entries, oldest first (DueStore.deadList). */
  deadList(options: { harness?: string; limit?: number } = {}): DeadWake[] {
    return this.store.dues.deadList(options);
  }

  /** Dead-letter entries per harness. */
  deadCounts(): Record<string, number> {
    return this.store.dues.deadCounts();
  }

  /**
   * Arm dead-letter entry `id` again, due now with its attempts reset; it leaves the set.
   * @returns what the store did (`conflict`: a pending wake holds the id, nothing changed)
   */
  retryDead(id: string): RetryDeadResult {
    const r = this.store.dues.retryDead(id, Date.now());
    if (r.status === 'armed') {
      this.scheduler.armed(r.record, false);
      this.log(`dead-letter entry ${id} of ${r.record.harness} armed again`);
    }
    return r;
  }

  /**
   * Remove dead-letter entry `id`, journaled (trigger `drop`).
   * @returns the entry, or null when there is none
   */
  dropDead(id: string): DeadWake | null {
    const r = dropDeadEntry(this.store, id, (l) => this.log(l));
    if (!r) return null;
    this.emit('invocation', r.record, null);
    return r.dead;
  }

  /**
   * Register (or replace) a service that guests' capabilities reach by name through
   * CapabilityContext.service.
   */
  registerService(name: string, service: QueueService): void {
    this.hostCalls.register(name, service);
  }

  // ---------------------------------------------------------------- observability, shutdown

  /** Counters and gauges (see {@link RuntimeStats}). */
  stats(): RuntimeStats {
    return {
      queueDepth: this.dispatcher.queued,
      inFlight: this.dispatcher.running.size,
      workers: this.pool.size,
      idleWorkers: this.pool.idle(),
      invocations: { ...this.counters.invocations },
      wakesPending: this.scheduler.pendingCount,
      wakesClaimed: this.dispatcher.running.size + this.scheduler.redeliver.length,
      spills: this.counters.spills,
      overrunSkips: this.counters.overrunSkips,
      redeliveries: this.counters.redeliveries,
      deadLettered: this.counters.deadLettered,
      cancelled: { ...this.counters.cancelled },
      translations: { cached: this.counters.cached, translated: this.counters.translated },
      workersReplaced: this.pool.replaced,
    };
  }

  /**
   * Drain the due-set. A store fault (a full disk, a database locked by another process past its
   * busy timeout) leaves the due wakes where they are, logs (at most once per
   * {@link STORE_FAULT_RETRY_MS}) and tries again after that wait; the process keeps serving.
   */
  private drainDue(): void {
    try {
      this.scheduler.drainDue();
    } catch (e) {
      const fault = storeFault(e);
      if (fault === null) throw e;
      const now = Date.now();
      if (Math.abs(now - this.lastStoreFaultLog) >= STORE_FAULT_RETRY_MS) {
        this.lastStoreFaultLog = now;
        this.log(
          `due wakes wait: ${fault} (${(e as Error).message}); trying again in ${STORE_FAULT_RETRY_MS} ms`,
        );
      }
      this.scheduler.storeFaulted(STORE_FAULT_RETRY_MS);
    }
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
    const q = this.dispatcher;
    if (q.closed) return;
    q.closed = true;
    this.connections.shutdown();
    this.scheduler.stop();
    q.refuseQueued();
    const drained = new Promise<void>((resolve) => {
      const check = () => {
        if (q.pending === 0) {
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
      q.interrupting = true;
      this.pool.interruptAll();
      const t2 = new Promise<void>((resolve) => setTimeout(resolve, this.limits.graceMs));
      await Promise.race([drained, t2]);
    }
    clearTimeout(t);
    await this.pool.close();
    this.store.close();
  }
}

export { ArmError, wakeSpec, type ArmSpec } from './arming.js';
export type { DeployedHarness } from './registry.js';
export {
  ON_NOTIFY,
  ON_WAKE,
  type CancelSignal,
  type InvocationInfo,
  type InvokeOptions,
  type Outcome,
  type Trigger,
} from './outcome.js';
export type { QueueService } from './host-calls.js';
export type { RuntimeOptions } from './runtime-options.js';

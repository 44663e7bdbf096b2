/**
 * The worker pool: N worker_threads, each running one invocation at a time, so guest execution
 * and translation never run on the thread that accepts work. Deployments are broadcast to every
 * worker (the ELF bytes and the compiled WebAssembly.Module, which V8 shares between threads) and
 * replayed to a replacement worker.
 *
 * A watchdog over the runs, counted from the moment a worker starts the guest (a run posted to a
 * worker waits behind what the worker is still doing: that time is not the guest's). The worker
 * writes that moment and the chain's deadline into its run state (shared memory, see
 * worker-messages.ts RunState) instead of posting a message, and one sweep every
 * {@link SWEEP_MS} ms, running only while some run is in a worker, reads them: past the deadline
 * (plus a little of the grace) the run's interrupt flag is raised (a guest in translated code
 * stops within a fuel slice, and it checks its own deadline at every poll before that); if the
 * worker is still busy `graceMs` after the deadline it is stuck in a host call, so it is
 * terminated and replaced and that run fails with a clear error — the pool keeps its size and
 * nothing else is lost. A short run thus costs the pool's thread one message each way and no
 * timer.
 *
 * Each worker has one interrupt flag, cleared by the pool before it posts a run: the pool's
 * thread raises it only while that run is the worker's, so a raise never reaches a later run.
 */
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import type { Grant } from '../capabilities/types.js';
import type { CompileInfo } from '../engine/engine.js';
import type { Manifest } from '../harness/manifest.js';
import {
  RUN_DEADLINE,
  RUN_FUEL,
  RUN_STARTED,
  RUN_STARTED_AT,
  RUN_STATE_BYTES,
  runState,
  type FromWorker,
  type HostReply,
  type HostReplyMessage,
  type HostRequest,
  type RunResult,
  type RunState,
  type ToWorker,
  type WorkerConfig,
} from './worker-messages.js';

/** Period of the watchdog's sweep over the runs in the workers, ms. */
export const SWEEP_MS = 20;

/**
 * The worker's entry module: pool-worker.ts beside this file under a TypeScript loader,
 * pool-worker.js when built. Kept in one place so a build that moves files changes only this.
 */
export function workerEntry(): URL {
  const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
  return new URL(`./pool-worker${ext}`, import.meta.url);
}

/** A deploy the workers could not put in place (no memory for its instance); nothing changed. */
export class DeployRefused extends Error {
  override name = 'DeployRefused';
}

/** A compiled harness as the pool hands it out. */
export interface Compiled {
  module: WebAssembly.Module;
  info: CompileInfo;
  manifest: Manifest;
  exports: string[];
}

/**
 * A run's outcome from the pool: the worker's, or `lost` when the worker had to be replaced;
 * `started` whether the worker had started the guest by then. `waitMs`: ms between posting the
 * run and the worker's report that it starts it (the worker finishing earlier work), as the
 * pool's thread saw them.
 */
export type PoolResult =
  | {
      lost: false;
      result: RunResult;
      logs: string[];
      fuelUsed: number;
      invocations: number;
      waitMs: number;
    }
  | {
      lost: true;
      message: string;
      started: boolean;
      waitMs: number;
      /** the fuel the guest had taken when its worker was lost (to the engine's fuel slice) */
      fuelUsed: number;
    };

/** One run handed to the pool. */
export interface PoolJob {
  harness: string;
  kind: 'tool' | 'export';
  entry: string;
  args: string | Uint8Array;
  chain: Extract<ToWorker, { type: 'run' }>['chain'];
  /** the invocation's instant, ms since the epoch (see ToWorker 'run') */
  now: number;
  /**
   * the chain's time budget, ms, counted from the guest's start in the worker (a chain that
   * starts with this run); absent: `chain.deadline` is the deadline
   */
  timeoutMs?: number;
  onLog?: (line: string) => void;
}

/** A run handed to a worker: its interrupt flag (Int32 at 0) and its outcome. */
export interface PoolRun {
  /** raise (Atomics.store 1) to stop the run at its guest's next poll; valid until `done` settles */
  interrupt: Int32Array;
  done: Promise<PoolResult>;
}

interface Slot {
  worker: Worker;
  port: MessagePort;
  flag: Int32Array;
  /** the worker's interrupt flag (WorkerConfig interrupt) */
  interrupt: Int32Array;
  /** what the worker tells of the run it holds (WorkerConfig runState) */
  state: RunState;
  job: {
    id: number;
    resolve: (r: PoolResult) => void;
    onLog?: (line: string) => void;
    graceMs: number;
    /** when the run was posted, ms since the epoch (performance.timeOrigin + performance.now()) */
    posted: number;
    /** the watchdog raised the interrupt at the deadline */
    raised: boolean;
  } | null;
  compiles: Map<number, { resolve: (c: Compiled) => void; reject: (e: Error) => void }>;
  /** deploys posted to this worker and not yet answered: told the worker's error, or null */
  deploys: Map<number, (error: string | null) => void>;
  dead: boolean;
  /** the worker has loaded its modules (a run's deadline must not tick while it starts up) */
  ready: boolean;
}

/** Options of {@link WorkerPool}. */
export interface PoolOptions {
  size: number;
  config: Omit<WorkerConfig, 'hostFlag' | 'replyPort' | 'interrupt' | 'runState'>;
  /** answers a guest's host call that needs the queue (called on the main thread) */
  onHost: (req: HostRequest) => HostReply;
  /** told when a worker is replaced (for the log and counters) */
  onReplace?: (why: string) => void;
  /**
   * called whenever a worker becomes idle (started up, done translating, lost and replaced),
   * except when a run ends in it (done, or its worker lost): that run's caller is answered instead
   * (its promise), and it starts what may start next once it has counted the run as ended. An
   * onIdle there would come first (the answer reaches the caller a microtask later) and find the
   * worker free while the caller still counts its run as running.
   */
  onIdle: () => void;
  /**
   * told when the optimised tier of a baseline-tier module (cache key `from`) reached the workers
   * (`info` describes it)
   */
  onOptimized?: (from: string, info: CompileInfo) => void;
}

/**
 * Whether a worker may be handed a run now: alive, started up, running nothing and translating
 * nothing. A run posted to a worker that is translating would wait for the whole translation
 * (seconds for a large harness on a loaded machine) while another worker may be idle; it stays in
 * the queue (or the due-set) instead, where its wait is seen (queue depth, spills, lateness).
 */
function free(s: Slot): boolean {
  return s.job === null && !s.dead && s.ready && s.compiles.size === 0;
}

/** A fixed-size pool of queue workers. */
export class WorkerPool {
  private readonly slots: Slot[] = [];
  private readonly deployments = new Map<string, Extract<ToWorker, { type: 'deploy' }>>();
  private nextId = 1;
  private closed = false;
  /** the watchdog's sweep, while some run is in a worker */
  private sweeper: NodeJS.Timeout | null = null;
  /** workers replaced after a stuck host call or a crash */
  replaced = 0;

  constructor(private readonly opts: PoolOptions) {
    for (let i = 0; i < opts.size; i++) this.slots.push(this.spawn());
  }

  get size(): number {
    return this.slots.length;
  }

  /** Workers free to start an invocation now (see {@link free}). */
  idle(): number {
    let n = 0;
    for (const s of this.slots) if (free(s)) n++;
    return n;
  }

  private spawn(): Slot {
    const hostFlag = new SharedArrayBuffer(4);
    const interrupt = new SharedArrayBuffer(4);
    const state = new SharedArrayBuffer(RUN_STATE_BYTES);
    const { port1, port2 } = new MessageChannel();
    // execArgv is passed explicitly: bin/berm.js appends its TypeScript loader to process.execArgv
    // at run time, and a worker sees such additions only when given the array; V8 flags such as
    // --stack-size are per process and refused by Worker (the pool's workers get their own below).
    const worker = new Worker(workerEntry(), {
      workerData: {
        ...this.opts.config,
        hostFlag,
        replyPort: port2,
        interrupt,
        runState: state,
      } satisfies WorkerConfig,
      transferList: [port2],
      execArgv: process.execArgv.filter((a) => !a.startsWith('--stack-size')),
      resourceLimits: { stackSizeMb: 16 },
    });
    worker.unref();
    port1.unref();
    const slot: Slot = {
      worker,
      port: port1,
      flag: new Int32Array(hostFlag),
      interrupt: new Int32Array(interrupt),
      state: runState(state),
      job: null,
      compiles: new Map(),
      deploys: new Map(),
      dead: false,
      ready: false,
    };
    worker.on('message', (m: FromWorker) => this.onMessage(slot, m));
    worker.on('error', (e) => this.lose(slot, `the worker crashed: ${e.message}`));
    worker.on('exit', (code) => this.lose(slot, `the worker exited with code ${code}`));
    for (const d of this.deployments.values()) worker.postMessage(d);
    return slot;
  }

  private onMessage(slot: Slot, m: FromWorker): void {
    switch (m.type) {
      case 'ready':
        slot.ready = true;
        this.opts.onIdle();
        return;
      case 'deployed': {
        const answer = slot.deploys.get(m.id);
        slot.deploys.delete(m.id);
        answer?.(m.error);
        return;
      }
      case 'compiled': {
        const c = slot.compiles.get(m.id);
        if (!c) return;
        slot.compiles.delete(m.id);
        if (m.ok) c.resolve({ module: m.module, info: m.info, manifest: m.manifest, exports: m.exports });
        else {
          const e = new Error(m.error);
          e.name = m.errorName;
          c.reject(e);
        }
        // the worker may take runs again
        if (free(slot)) this.opts.onIdle();
        return;
      }
      case 'log':
        if (slot.job?.id === m.id) slot.job.onLog?.(m.line);
        return;
      case 'optimized': {
        // replacement workers get the optimised tier with the deployment; live ones swap it in
        for (const d of this.deployments.values()) {
          if (d.info.key !== m.from) continue;
          d.module = m.module;
          d.info = m.info;
        }
        const up: ToWorker = { type: 'upgrade', from: m.from, module: m.module, info: m.info };
        for (const s of this.slots) if (!s.dead) s.worker.postMessage(up);
        this.opts.onOptimized?.(m.from, m.info);
        return;
      }
      case 'host': {
        let reply: HostReply;
        try {
          reply = this.opts.onHost(m);
        } catch (e) {
          reply = { error: `${m.op}: ${(e as Error).message}` };
        }
        slot.port.postMessage({ seq: m.seq, reply } satisfies HostReplyMessage);
        Atomics.store(slot.flag, 0, 1);
        Atomics.notify(slot.flag, 0);
        return;
      }
      case 'done': {
        const job = slot.job;
        if (!job || job.id !== m.id) return;
        const waitMs = Math.max(0, slot.state.words[RUN_STARTED_AT]! - job.posted);
        this.finish(slot);
        job.resolve({
          lost: false,
          result: m.result,
          logs: m.logs,
          fuelUsed: m.fuelUsed,
          invocations: m.invocations,
          waitMs,
        });
        return;
      }
    }
  }

  private finish(slot: Slot): void {
    slot.job = null;
    slot.worker.unref();
  }

  /** A worker died or was killed: fail what it held and put a fresh one in its place. */
  private lose(slot: Slot, why: string): void {
    if (slot.dead) return;
    slot.dead = true;
    const job = slot.job;
    if (job) this.finish(slot);
    for (const c of slot.compiles.values()) c.reject(new Error(`compile failed: ${why}`));
    slot.compiles.clear();
    // its replacement replays the deployments: a deploy is not refused for a lost worker
    for (const answer of slot.deploys.values()) answer(null);
    slot.deploys.clear();
    slot.port.close();
    const i = this.slots.indexOf(slot);
    if (!this.closed && i >= 0) {
      this.replaced++;
      this.slots[i] = this.spawn();
      this.opts.onReplace?.(why);
    }
    if (job) {
      const started = Atomics.load(slot.state.ids, RUN_STARTED) === job.id;
      job.resolve({
        lost: true,
        message: why,
        started,
        waitMs: Math.max(0, (started ? slot.state.words[RUN_STARTED_AT]! : epochNow()) - job.posted),
        fuelUsed: started ? slot.state.words[RUN_FUEL]! : 0,
      });
    }
    // a run that ended here is answered to its caller, which starts what may start (see onIdle)
    if (!this.closed && !job) this.opts.onIdle();
  }

  /** Translate (or load from the disk cache) an ELF in a worker. @throws what compiling threw. */
  compile(elf: Uint8Array): Promise<Compiled> {
    // an idle worker with the fewest compiles queued (several deploys at once, e.g. a daemon
    // restoring its deployments, spread over the workers), else the one with the fewest queued
    const live = this.slots.filter((s) => !s.dead);
    const idle = live.filter((s) => s.job === null);
    const slot = (idle.length > 0 ? idle : live).reduce((a, b) =>
      b.compiles.size < a.compiles.size ? b : a,
    );
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      slot.compiles.set(id, { resolve, reject });
      slot.worker.postMessage({ type: 'compile', id, elf } satisfies ToWorker);
    });
  }

  /**
   * Make a compiled harness available in every worker (and in replacements), once one of them (an
   * idle one when there is one) has made an instance of it (the others have it before their next
   * call, as a worker takes its messages in order): the
   * memory and address space an instance needs are the process's, so one worker's instance shows
   * that the others can make theirs (their first call does; a worker keeps a bounded number of
   * instances, engine/slot-keeper.ts, so deployments do not use up the address space). When the
   * instance cannot be made (V8 cannot allocate its memory), the name goes back to what it was
   * before in every worker (the previous deployment, or none) and the deploy is refused.
   * @throws DeployRefused naming the worker's error; the pool is then as it was
   */
  async deploy(
    name: string,
    elf: Uint8Array,
    c: Compiled,
    capabilities: string[],
    grant: Grant,
  ): Promise<void> {
    const msg: Extract<ToWorker, { type: 'deploy' }> = {
      type: 'deploy',
      name,
      elf,
      module: c.module,
      info: c.info,
      capabilities,
      grant,
    };
    const before = this.deployments.get(name);
    this.deployments.set(name, msg);
    const live = this.slots.filter((s) => !s.dead);
    // an idle worker, in turn (the instances made at deploy are spread over the workers)
    const turn = this.nextId % live.length;
    const order = [...live.slice(turn), ...live.slice(0, turn)];
    const warm = order.find((s) => s.job === null) ?? order[0];
    // every worker is sent the deployment; the answer waited for is the one of the worker making
    // the instance: the others take it in order before any later message (pool-worker.ts runs its
    // messages one after another), so a worker busy with a long call does not hold the deploy
    const answers = live.map(
      (s) =>
        new Promise<string | null>((resolve) => {
          const id = this.nextId++;
          s.deploys.set(id, resolve);
          s.worker.postMessage({ ...msg, id, warm: s === warm } satisfies ToWorker);
        }),
    );
    const error = (await answers[live.indexOf(warm!)]!) ?? undefined;
    if (error === undefined) return;
    // another deploy of the name may have been posted meanwhile: only this one's is taken back
    if (this.deployments.get(name) === msg) {
      if (before === undefined) this.undeploy(name);
      else {
        this.deployments.set(name, before);
        for (const s of this.slots) s.worker.postMessage(before);
      }
    }
    throw new DeployRefused(
      `harness ${name} cannot be served: a worker could not make its instance (${error}); ` +
        `${this.deployments.size} harnesses are deployed on ${this.slots.length} workers`,
    );
  }

  undeploy(name: string): void {
    this.deployments.delete(name);
    for (const s of this.slots) s.worker.postMessage({ type: 'undeploy', name } satisfies ToWorker);
  }

  /**
   * Run a job on an idle worker. The caller must have checked {@link idle}.
   * @param graceMs how long past the chain's deadline a busy worker is left before it is replaced
   * @throws Error when no worker is idle.
   */
  run(job: PoolJob, graceMs: number): PoolRun {
    const slot = this.slots.find(free);
    if (!slot) throw new Error('no idle worker');
    const id = this.nextId++;
    // cleared before the post: a raise for the worker's previous run (its caller went away as it
    // ended) must not stop this one
    Atomics.store(slot.interrupt, 0, 0);
    const done = new Promise<PoolResult>((resolve) => {
      slot.job = {
        id,
        resolve,
        ...(job.onLog ? { onLog: job.onLog } : {}),
        graceMs,
        posted: epochNow(),
        raised: false,
      };
    });
    // a busy worker keeps the process alive until its run ends
    slot.worker.ref();
    slot.worker.postMessage({
      type: 'run',
      id,
      harness: job.harness,
      kind: job.kind,
      entry: job.entry,
      args: job.args,
      chain: job.chain,
      ...(job.timeoutMs !== undefined ? { timeoutMs: job.timeoutMs } : {}),
      now: job.now,
      streamLogs: job.onLog !== undefined,
    } satisfies ToWorker);
    if (this.sweeper === null) {
      this.sweeper = setInterval(() => this.sweep(), SWEEP_MS);
      this.sweeper.unref();
    }
    return { interrupt: slot.interrupt, done };
  }

  /**
   * The watchdog: for each run whose guest has started, raise its interrupt once the chain's
   * deadline is min(100, grace/2) ms past (the guest checks its deadline at every poll: this
   * catches one that stopped polling), and replace its worker once the deadline is `graceMs` past
   * (stuck in a host call). Stops itself when no run is in a worker.
   */
  private sweep(): void {
    let busy = false;
    const now = Date.now();
    for (const slot of this.slots) {
      const job = slot.job;
      if (job === null) continue;
      busy = true;
      if (Atomics.load(slot.state.ids, RUN_STARTED) !== job.id) continue;
      const deadline = slot.state.words[RUN_DEADLINE]!;
      if (!job.raised && now >= deadline + Math.min(100, job.graceMs / 2)) {
        job.raised = true;
        Atomics.store(slot.interrupt, 0, 1);
      }
      if (now >= deadline + job.graceMs) {
        void slot.worker.terminate();
        this.lose(
          slot,
          `the invocation was still running ${job.graceMs} ms after its deadline (stuck in a host call?); its worker was terminated and replaced`,
        );
      }
    }
    if (!busy && this.sweeper !== null) {
      clearInterval(this.sweeper);
      this.sweeper = null;
    }
  }

  /** Raise the interrupt of every run in a worker (shutdown past the drain bound). */
  interruptAll(): void {
    for (const s of this.slots) if (s.job !== null) Atomics.store(s.interrupt, 0, 1);
  }

  /** Terminate every worker. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.sweeper !== null) clearInterval(this.sweeper);
    this.sweeper = null;
    await Promise.all(
      this.slots.map(async (s) => {
        s.dead = true;
        s.port.close();
        await s.worker.terminate();
      }),
    );
  }
}

/** Now, ms since the epoch, to the sub-millisecond (comparable across the pool's threads). */
function epochNow(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * Entry point of a queue worker thread (see pool.ts): compiles harnesses when asked, holds the
 * deployed ones, and runs one invocation at a time. Guest host calls that need the queue (the
 * schedule capability) block on the synchronous path described in worker-messages.ts.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { Engine } from '../engine/engine.js';
import { Harness } from '../harness/harness.js';
import type { CapabilityReply, ScheduleHost } from '../capabilities/types.js';
import { Executor, type ChainState } from './executor.js';
import {
  RUN_DEADLINE,
  RUN_FUEL,
  RUN_STARTED,
  RUN_STARTED_AT,
  runState,
  type FromWorker,
  type HostReplyMessage,
  type HostRequest,
  type ToWorker,
  type WorkerConfig,
} from './worker-messages.js';

const config = workerData as WorkerConfig;
const port = parentPort!;
const flag = new Int32Array(config.hostFlag);
const state = runState(config.runState);

/**
 * A chain's fuel account whose every change is also written where the pool reads it (the run
 * state's fuel word), so a lost worker's run is still accounted. One class, so the engine's reads
 * of `left` stay monomorphic.
 */
class SharedFuel {
  private remaining: number;
  constructor(
    private readonly before: number,
    readonly budget: number,
  ) {
    this.remaining = before;
  }
  get left(): number {
    return this.remaining;
  }
  set left(v: number) {
    this.remaining = v;
    state.words[RUN_FUEL] = this.before - v;
  }
}

/** Longest a guest waits for the queue to answer a host call; the main thread answers in microseconds. */
const HOST_REPLY_TIMEOUT_MS = config.hostReplyTimeoutMs ?? 30_000;

function post(msg: FromWorker): void {
  port.postMessage(msg);
}

/** Number of the last host request posted (see HostRequest.seq). */
let hostSeq = 0;

/**
 * Ask the main thread synchronously (see worker-messages.ts). A reply whose seq is not this request's
 * answers one whose caller gave up (timed out): it is dropped, never taken as this one's answer
 * (else every later call of this worker, whatever harness it runs, would get the previous one's).
 * The wait ends at the chain's deadline too, like every other wait of a host call: past it the
 * invocation is over (its next poll ends it), and a worker still waiting grace ms later would be
 * terminated and replaced by the pool. As with the timeout, the queue may still do what was asked.
 */
function ask(op: HostRequest['op'], harness: string, chain: ChainState, req: unknown): CapabilityReply {
  const seq = ++hostSeq;
  post({ type: 'host', seq, op, harness, chain: chain.spec, req });
  const asked = Date.now();
  const byTimeout = asked + HOST_REPLY_TIMEOUT_MS;
  const deadline = Math.min(byTimeout, chain.spec.deadline);
  for (;;) {
    // cleared before the port is read: a reply posted after the read sets it again (the main
    // thread posts, then sets the flag), so the wait below cannot miss it
    Atomics.store(flag, 0, 0);
    for (let m = receiveMessageOnPort(config.replyPort); m; m = receiveMessageOnPort(config.replyPort)) {
      const r = m.message as HostReplyMessage;
      if (r.seq === seq) return r.reply;
    }
    const now = Date.now();
    const left = deadline - now;
    if (left <= 0) {
      return deadline < byTimeout
        ? {
            error: `the call's deadline passed while waiting for the queue to answer ${op} (waited ${now - asked} ms)`,
          }
        : { error: `the queue did not answer ${op} within ${HOST_REPLY_TIMEOUT_MS} ms` };
    }
    Atomics.wait(flag, 0, 0, left);
  }
}

function serviceFor(harness: string, chain: ChainState): (name: string, request: unknown) => CapabilityReply {
  return (name, request) => ask('service', harness, chain, { name, request });
}

function scheduleFor(harness: string, chain: ChainState): ScheduleHost {
  return {
    arm: (req) => ask('arm', harness, chain, req),
    cancel: (id) => ask('cancel', harness, chain, { id }),
    callAfter: (req) => ask('callAfter', harness, chain, req),
  };
}

/**
 * A full collection of this thread's heap. Dropped instance slots hold their memory's pages until
 * V8 collects them, and nothing else starts a collection in a worker that has stopped taking
 * calls; `gc` is exposed to a new context only (the flag is read when a context is made), so this
 * thread's own globals stay as they were.
 */
function collectGarbage(): () => void {
  // left set: another worker starting at the same time reads it too (the flags are the process's)
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

const engine = new Engine({
  keep: {
    ...(config.instanceMemory !== undefined ? { maxBytes: config.instanceMemory } : {}),
    ...(config.instanceSlots !== undefined ? { maxSlots: config.instanceSlots } : {}),
  },
  reclaim: collectGarbage(),
  ...(config.memorySize !== undefined ? { memorySize: config.memorySize } : {}),
  ...(config.optimizeLevel !== undefined ? { optimizeLevel: config.optimizeLevel } : {}),
  cacheDir: config.cacheDir,
  // compiled modules are posted to the other workers, which need them whole (Engine.moduleFor)
  lazy: false,
});
const executor = new Executor(
  engine,
  config.capabilityLimits,
  { scheduleFor, serviceFor },
  config.defaultDatabase,
);

async function handle(msg: ToWorker): Promise<void> {
  switch (msg.type) {
    case 'compile': {
      try {
        const module = await engine.compile(msg.elf);
        const h = Harness.fromModule(module);
        post({
          type: 'compiled',
          id: msg.id,
          ok: true,
          module: module.wasm,
          info: module.info,
          manifest: h.manifest,
          exports: module.exports(),
        });
        if (module.info.tier === 'baseline') {
          // the engine optimises it in the background; every worker's copy is swapped then
          const from = module.info.key;
          void module.optimized.then((ok) => {
            if (ok && module.info.tier === 'optimized')
              post({ type: 'optimized', from, module: module.wasm, info: module.info });
          });
        }
      } catch (e) {
        const err = e instanceof Error ? e : new Error(String(e));
        post({ type: 'compiled', id: msg.id, ok: false, error: err.message, errorName: err.name });
      }
      return;
    }
    case 'deploy': {
      let error: string | null = null;
      try {
        await executor.deploy(
          msg.name,
          msg.elf,
          { wasm: msg.module, info: msg.info },
          msg.capabilities,
          msg.grant,
          msg.warm === true,
        );
      } catch (e) {
        error = e instanceof Error ? e.message : String(e);
        // a replayed deployment (a replacement worker) has no one to answer
        if (msg.id === undefined) throw e;
      }
      if (msg.id !== undefined) post({ type: 'deployed', id: msg.id, error });
      return;
    }
    case 'undeploy':
      executor.undeploy(msg.name);
      return;
    case 'upgrade':
      executor.upgrade(msg.from, msg.module, msg.info);
      return;
    case 'run': {
      // the chain's time counts from here, not from when the run was posted: this worker may have
      // been busy with earlier messages (a translation, a deployment) meanwhile
      const spec =
        msg.timeoutMs === undefined ? msg.chain : { ...msg.chain, deadline: Date.now() + msg.timeoutMs };
      // the pool learns the start from the run state, not from a message (its watchdog sweeps it)
      state.words[RUN_FUEL] = 0;
      state.words[RUN_DEADLINE] = spec.deadline;
      state.words[RUN_STARTED_AT] = performance.timeOrigin + performance.now();
      Atomics.store(state.ids, RUN_STARTED, msg.id);
      const chain = Executor.chain(spec, config.interrupt, new SharedFuel(spec.fuelLeft, spec.fuelBudget));
      const fuelBefore = chain.fuel.left;
      const onLog = msg.streamLogs ? (line: string) => post({ type: 'log', id: msg.id, line }) : undefined;
      const { result, logs } = executor.run(
        chain,
        msg.harness,
        msg.kind,
        msg.entry,
        msg.args,
        onLog,
        msg.now,
      );
      // an unbounded budget is handed over as Number.MAX_SAFE_INTEGER, so this is always finite
      const fuelUsed = fuelBefore - chain.fuel.left;
      post({ type: 'done', id: msg.id, result, logs, fuelUsed, invocations: chain.started });
      return;
    }
  }
}

// Messages are handled strictly in order: a deploy posted before a run is in place when it runs.
let chainOfWork: Promise<void> = Promise.resolve();
port.on('message', (msg: ToWorker) => {
  chainOfWork = chainOfWork.then(() =>
    handle(msg).catch((e: unknown) => {
      process.stderr.write(`berm worker: ${(e as Error)?.stack ?? String(e)}\n`);
    }),
  );
});
// modules that register capabilities (an embedder's, the protocol door's) must be in this
// thread's registry before the first deploy links them
for (const m of config.modules) await import(m);
post({ type: 'ready' });

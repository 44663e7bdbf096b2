/**
 * Messages between the queue (main thread) and its workers. Everything crosses by structured
 * clone; WebAssembly.Module crosses too (V8 shares the compiled code between threads of one
 * process), so a harness is translated once and instantiated in every worker.
 *
 * The worker -> main path of guest host calls that need the queue's state (berm.wake.arm,
 * berm.wake.cancel, berm.call.after): the guest is blocked in its ecall, so the worker posts a
 * {@link HostRequest} on its parentPort and blocks in Atomics.wait on its own shared flag word; the
 * main thread (which never runs a guest, so it answers within its event-loop latency) posts the
 * reply on the worker's private MessagePort, then sets the flag and notifies; the worker wakes and
 * takes the reply synchronously with receiveMessageOnPort. The due-set and its SQLite database
 * therefore have exactly one writer per process: the main thread.
 */
import type { Authority } from '../contract/index.js';
import type { CapabilityLimits, CapabilityReply, Grant } from '../capabilities/types.js';
import type { CompileInfo } from '../engine/engine.js';
import type { Manifest } from '../harness/manifest.js';

/** Configuration every worker starts with (workerData). */
export interface WorkerConfig {
  /** engine options */
  memorySize?: number;
  optimizeLevel?: number;
  cacheDir: string | null;
  /** overrides of the capabilities' limits; maxCallDepth is the queue's chainDepth */
  capabilityLimits: Partial<CapabilityLimits>;
  /** the storage capability's database for grants that name none */
  defaultDatabase: string | null;
  /** module URLs each worker imports before it takes work (e.g. modules registering capabilities) */
  modules: string[];
  /** shared flag word of the synchronous host-call path */
  hostFlag: SharedArrayBuffer;
  /**
   * the interrupt flag (Int32 at 0) of whatever run this worker holds, shared by the run's whole
   * chain: the pool clears it before it posts a run and raises it to stop the run (a deadline, a
   * caller gone, the shutdown); the worker only reads it
   */
  interrupt: SharedArrayBuffer;
  /** the run-state words this worker writes as it starts and runs a guest ({@link RunState}) */
  runState: SharedArrayBuffer;
  /** the worker's end of its reply channel (transferred) */
  replyPort: import('node:worker_threads').MessagePort;
  /** longest a guest waits for the queue to answer a host call, ms (default 30,000) */
  hostReplyTimeoutMs?: number;
  /**
   * resident bytes of the instance slots this worker keeps between invocations, over all its
   * harnesses (its share of --max-instance-memory; engine/slot-keeper.ts); default the engine's
   */
  instanceMemory?: number;
  /** instance slots this worker keeps, at most (its share of the address space; slot-keeper.ts) */
  instanceSlots?: number;
}

/** The chain an invocation belongs to, as handed to a worker. Budgets are what is left. */
export interface ChainSpec {
  id: string;
  /** depth of this invocation (0 = top level) */
  depth: number;
  /** absolute deadline, ms since epoch */
  deadline: number;
  /** fuel left for the whole chain (Infinity = unbounded) */
  fuelLeft: number;
  /** the chain's original fuel budget, for OutOfFuel's message */
  fuelBudget: number;
  /** invocations the chain may still start, this one included */
  invocationsLeft: number;
  /** deepest depth allowed */
  maxDepth: number;
  authority?: Authority;
}

/** main -> worker */
export type ToWorker =
  | { type: 'compile'; id: number; elf: Uint8Array }
  | {
      type: 'deploy';
      name: string;
      elf: Uint8Array;
      module: WebAssembly.Module;
      info: CompileInfo;
      capabilities: string[];
      grant: Grant;
      /** answered with 'deployed' of this id when given (a replayed deployment has none) */
      id?: number;
      /**
       * make an instance now (its memory allocated), so that the deploy is answered only once
       * one can be made and the first call here does not pay for it
       */
      warm?: boolean;
    }
  | { type: 'undeploy'; name: string }
  /**
   * the optimised tier of the module whose baseline tier had cache key `from`: instances of the
   * harnesses deployed with that module are made from it from now on (GuestModule.upgrade)
   */
  | { type: 'upgrade'; from: string; module: WebAssembly.Module; info: CompileInfo }
  | {
      type: 'run';
      id: number;
      harness: string;
      /** tool: a declared tool (arguments checked against its schema when text); export: on_wake / on_notify */
      kind: 'tool' | 'export';
      entry: string;
      args: string | Uint8Array;
      chain: ChainSpec;
      /**
       * the chain's budget of time, ms, when the chain starts with this run: the worker fixes the
       * chain's deadline when it starts the guest (its clock then + timeoutMs), so time the run
       * spent waiting behind other work of the worker (a translation, deployments replayed to a
       * replacement) is not taken from the guest. Absent: `chain.deadline` holds.
       */
      timeoutMs?: number;
      /**
       * the invocation's instant, ms since the epoch: the `now` of its wake or notify record, the
       * start of a tool call; the schedule capability counts the invocation's delays from it
       */
      now: number;
      /** post each berm.log line as it happens */
      streamLogs: boolean;
    };

/**
 * The words a worker shares with the pool about the run it holds, in one SharedArrayBuffer of
 * {@link RUN_STATE_BYTES}: the pool reads them without a message, so starting a run costs the
 * worker no post (the pool's watchdog sweeps them, see pool.ts).
 * - Int32 at index {@link RUN_STARTED} (byte 0): the id of the run whose guest the worker started
 *   last, stored after the Float64 words below (Atomics, so a reader that sees the id sees them);
 * - Float64 at index {@link RUN_FUEL} (byte 8): the fuel the run has taken so far, kept as the
 *   guest takes it (to the engine's fuel slice, 16,384 instructions), so that the run of a worker
 *   that is lost is still accounted;
 * - Float64 at {@link RUN_DEADLINE} (byte 16): the chain's deadline, ms since the epoch;
 * - Float64 at {@link RUN_STARTED_AT} (byte 24): when the worker started the guest,
 *   `performance.timeOrigin + performance.now()` of the worker (ms since the epoch).
 */
export interface RunState {
  ids: Int32Array;
  words: Float64Array;
}
/** Size of a worker's run-state buffer, bytes. */
export const RUN_STATE_BYTES = 32;
/** Int32 index of the started run's id. */
export const RUN_STARTED = 0;
/** Float64 index of the fuel taken. */
export const RUN_FUEL = 1;
/** Float64 index of the chain's deadline. */
export const RUN_DEADLINE = 2;
/** Float64 index of the guest's start. */
export const RUN_STARTED_AT = 3;

/** The views of a run-state buffer (see {@link RunState}). */
export function runState(buffer: SharedArrayBuffer): RunState {
  return { ids: new Int32Array(buffer, 0, 2), words: new Float64Array(buffer) };
}

/** A trap as it crosses threads. */
export interface TrapInfo {
  name: string;
  message: string;
  /** guest pc, or -1 */
  pc: number;
  symbol: string | null;
  offset: number;
  backtrace: { symbol: string; address: number }[];
}

/** What a worker reports for one run. */
export type RunResult =
  | { status: 'ok'; result: string }
  | { status: 'failed'; message: string }
  | { status: 'trapped'; trap: TrapInfo }
  | {
      status: 'error';
      code: 'unknown-harness' | 'unknown-tool' | 'bad-args' | 'harness' | 'internal';
      message: string;
    };

/** worker -> main */
export type FromWorker =
  | { type: 'ready' }
  /** a deploy with an id is in place (error null) or could not be (the worker's message) */
  | { type: 'deployed'; id: number; error: string | null }
  | {
      type: 'compiled';
      id: number;
      ok: true;
      module: WebAssembly.Module;
      info: CompileInfo;
      manifest: Manifest;
      exports: string[];
    }
  | { type: 'compiled'; id: number; ok: false; error: string; errorName: string }
  /**
   * a module compiled here on the baseline tier (cache key `from`) was optimised in the background
   * (the engine's 'auto' tier): its optimised tier, for every worker (ToWorker 'upgrade')
   */
  | { type: 'optimized'; from: string; module: WebAssembly.Module; info: CompileInfo }
  | { type: 'log'; id: number; line: string }
  | {
      type: 'done';
      id: number;
      result: RunResult;
      logs: string[];
      /** fuel drawn by the chain during this run (nested calls included) */
      fuelUsed: number;
      /** invocations started during this run (nested calls included) */
      invocations: number;
    }
  | HostRequest;

/** A synchronous host call from a guest that the queue answers (see the module comment). */
export interface HostRequest {
  type: 'host';
  /**
   * the worker's number of this request (increasing): the reply carries it back, so a reply that
   * comes after its caller gave up is told apart from the answer to a later request
   */
  seq: number;
  op: 'arm' | 'cancel' | 'callAfter' | 'service';
  /** the calling harness */
  harness: string;
  chain: ChainSpec;
  req: unknown;
}

/** The reply to a {@link HostRequest}. */
export type HostReply = CapabilityReply;

/** A {@link HostReply} as posted on the worker's reply port: with its request's `seq`. */
export interface HostReplyMessage {
  seq: number;
  reply: HostReply;
}

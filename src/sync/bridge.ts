/**
 * Synchronous bridge to asynchronous host work (infrastructure shared by the capabilities,
 * the protocol door and the PostgreSQL store).
 *
 * Why: a guest blocked in its ecall needs an answer before the handler returns, but undici and
 * child_process are asynchronous, and a regular expression supplied by the guest can spin for
 * ever. So the work runs in one dedicated worker_threads Worker per calling thread; the caller
 * posts the job, then blocks in Atomics.wait on a SharedArrayBuffer flag with a timeout. The
 * worker posts the result on a MessageChannel port and flips the flag; the caller wakes and takes
 * the message synchronously with receiveMessageOnPort. If the wait times out, the worker is
 * terminated (V8 interrupts even a running regex) and a fresh one is started on the next call, so
 * no job can wedge the caller for longer than its timeout plus a small grace.
 */
import { MessageChannel, Worker, receiveMessageOnPort, type MessagePort } from 'node:worker_threads';

/** Outcome of {@link runSync}. `timedOut` is set when the bridge itself gave up on the worker. */
export type SyncResult<T> = { ok: true; value: T } | { ok: false; error: string; timedOut?: boolean };

/** Message from caller to worker. */
export interface JobRequest {
  /** positive; the worker claims the job by swapping the caller's word 1 from id to -id */
  id: number;
  /** module URL (file:) exporting the job function */
  module: string;
  /** export name of an `async (args, signal) => value` function */
  exportName: string;
  args: unknown;
  /** the worker aborts the job's signal after this many ms */
  timeoutMs: number;
  /** the call's deadline, ms since the Unix epoch: the job's signal aborts by then too */
  deadline?: number;
}

/** Message from worker to caller. */
export type JobResponse = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: string };

/**
 * Flag values of the shared word 0: waiting for the worker, job timer running, reply posted.
 * Word 1 holds the id of the job the caller waits for; the worker claims a job by swapping it to
 * -id ({@link claimJob}), and a caller that gives up before the claim swaps it to 0, so the worker
 * drops that job unrun and untouched (no flag change, no reply).
 */
export const IDLE = 0;
export const STARTED = 2;
export const DONE = 1;

/**
 * The worker's claim of job `id` on the caller's flag words: true when the caller still waits for
 * it (the job may run), false when the caller gave up before it started (drop it: nothing done).
 */
export function claimJob(flag: Int32Array, id: number): boolean {
  return Atomics.compareExchange(flag, 1, id, -id) === id;
}

/** Longest wait for the worker to start and import a job module before the job's timer starts. */
export const BRIDGE_STARTUP_MS = 30_000;

/** Extra time the caller waits beyond a job's own timeout, for the job to clean up and reply. */
export const BRIDGE_GRACE_MS = 2_000;

interface Bridge {
  worker: Worker;
  port: MessagePort;
  flag: Int32Array;
}

let bridge: Bridge | null = null;
let nextId = 1;

function workerUrl(): URL {
  // Under a TypeScript loader this module is bridge.ts and its sibling is bridge-worker.ts; built, both are .js.
  const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
  return new URL(`./bridge-worker${ext}`, import.meta.url);
}

function startBridge(): Bridge {
  const flag = new Int32Array(new SharedArrayBuffer(8));
  const { port1, port2 } = new MessageChannel();
  // execArgv is passed explicitly: an entry point may append a module loader to process.execArgv
  // at run time (bin/berm.js does), and a worker only sees such additions when given the array.
  // V8 flags such as --stack-size are per process and refused by Worker.
  const worker = new Worker(workerUrl(), {
    workerData: { flag, port: port2 },
    transferList: [port2],
    execArgv: process.execArgv.filter((a) => !a.startsWith('--stack-size')),
  });
  // The worker must never keep the process alive on its own, nor crash it.
  worker.unref();
  port1.unref();
  worker.on('error', () => {
    if (bridge?.worker === worker) bridge = null;
  });
  worker.on('exit', () => {
    if (bridge?.worker === worker) bridge = null;
  });
  return { worker, port: port1, flag };
}

function stopBridge(b: Bridge): void {
  if (bridge === b) bridge = null;
  b.port.close();
  void b.worker.terminate();
}

/**
 * Run `exportName` of the module at `module` (an `async (args, signal: AbortSignal) => T`) in the
 * bridge worker and block until it settles or `timeoutMs + BRIDGE_GRACE_MS` pass. The job's
 * signal aborts at `timeoutMs`; jobs are expected to honour it. Arguments and results cross by
 * structured clone. Never throws: failures come back as `{ ok: false, error }`.
 *
 * Worker start-up and the job module's first import (slow under a TypeScript loader, seconds on a
 * loaded machine) do not count against the job's own `timeoutMs`: the caller waits up to
 * BRIDGE_STARTUP_MS for them. `deadline` (ms since the Unix epoch; the tool call's deadline,
 * CALL_DEADLINE) bounds the whole call, start-up included: a job not started by then is given up
 * with an error naming the start-up, and the worker, which goes on starting for the next call,
 * drops it unrun ({@link claimJob}); a job started before it has its signal aborted at the
 * deadline, and the caller waits at most BRIDGE_GRACE_MS past it for the reply.
 */
export function runSync<T>(
  module: string | URL,
  exportName: string,
  args: unknown,
  timeoutMs: number,
  deadline?: number,
): SyncResult<T> {
  const t0 = Date.now();
  const bounded = deadline !== undefined && Number.isFinite(deadline);
  if (bounded && deadline <= t0)
    return {
      ok: false,
      error: `the call's deadline had passed before the host call started`,
      timedOut: true,
    };
  let b: Bridge;
  try {
    b = bridge ??= startBridge();
  } catch (e) {
    return { ok: false, error: `cannot start the host worker: ${(e as Error).message}` };
  }
  nextId = (nextId % 0x3fff_ffff) + 1;
  const id = nextId;
  Atomics.store(b.flag, 0, IDLE);
  Atomics.store(b.flag, 1, id);
  const req: JobRequest = {
    id,
    module: String(module),
    exportName,
    args,
    timeoutMs,
    ...(bounded ? { deadline } : {}),
  };
  b.worker.postMessage(req);
  // the worker flips the flag to STARTED when the job's timer starts
  const startupEnd = t0 + BRIDGE_STARTUP_MS;
  let end = bounded ? Math.min(startupEnd, deadline) : startupEnd;
  let started = false;
  for (;;) {
    const left = end - Date.now();
    if (left <= 0) {
      if (started) break;
      // not started: give the job up unless the worker claimed it at this very moment
      if (Atomics.compareExchange(b.flag, 1, id, 0) !== id) {
        started = true;
        end = Date.now() + BRIDGE_GRACE_MS;
        continue;
      }
      if (bounded && deadline < startupEnd) {
        // the worker goes on starting (it drops this job): the next call finds it ready
        return {
          ok: false,
          error: `the call's deadline passed while the host worker was starting (waited ${Date.now() - t0} ms; nothing was done)`,
          timedOut: true,
        };
      }
      break;
    }
    Atomics.wait(b.flag, 0, started ? STARTED : IDLE, left);
    const state = Atomics.load(b.flag, 0);
    if (state === STARTED && !started) {
      started = true;
      const own = Date.now() + timeoutMs + BRIDGE_GRACE_MS;
      end = bounded ? Math.min(own, deadline + BRIDGE_GRACE_MS) : own;
      continue;
    }
    if (state === DONE) {
      const msg = receiveMessageOnPort(b.port);
      if (!msg) break;
      const res = msg.message as JobResponse;
      return res.ok ? { ok: true, value: res.value as T } : { ok: false, error: res.error };
    }
    if (bridge !== b) return { ok: false, error: 'the host worker exited' };
  }
  stopBridge(b);
  return {
    ok: false,
    error: started
      ? `timed out after ${timeoutMs} ms`
      : `the host worker did not start within ${BRIDGE_STARTUP_MS} ms`,
    timedOut: true,
  };
}

/** Terminate the bridge worker if one is running (tests; orderly shutdown). */
export function shutdownBridge(): void {
  if (bridge) stopBridge(bridge);
}

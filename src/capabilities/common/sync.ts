/**
 * Synchronous bridge to asynchronous host work (infrastructure shared by capabilities, not a
 * capability itself).
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
  id: number;
  /** module URL (file:) exporting the job function */
  module: string;
  /** export name of an `async (args, signal) => value` function */
  exportName: string;
  args: unknown;
  /** the worker aborts the job's signal after this many ms */
  timeoutMs: number;
}

/** Message from worker to caller. */
export type JobResponse = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: string };

/** Flag values of the shared word: waiting for the worker, job timer running, reply posted. */
export const IDLE = 0;
export const STARTED = 2;
export const DONE = 1;

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
  // Under a TypeScript loader this module is sync.ts and its sibling is worker.ts; built, both are .js.
  const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
  return new URL(`./worker${ext}`, import.meta.url);
}

function startBridge(): Bridge {
  const flag = new Int32Array(new SharedArrayBuffer(4));
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
 */
export function runSync<T>(
  module: string | URL,
  exportName: string,
  args: unknown,
  timeoutMs: number,
): SyncResult<T> {
  let b: Bridge;
  try {
    b = bridge ??= startBridge();
  } catch (e) {
    return { ok: false, error: `cannot start the host worker: ${(e as Error).message}` };
  }
  const id = nextId++;
  Atomics.store(b.flag, 0, IDLE);
  const req: JobRequest = { id, module: String(module), exportName, args, timeoutMs };
  b.worker.postMessage(req);
  // Worker start-up and the job module's first import (slow under a TypeScript loader) do not
  // count against the job's own budget; the worker flips the flag to STARTED when its timer starts.
  let deadline = Date.now() + BRIDGE_STARTUP_MS;
  let started = false;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) break;
    Atomics.wait(b.flag, 0, started ? STARTED : IDLE, left);
    const state = Atomics.load(b.flag, 0);
    if (state === STARTED && !started) {
      started = true;
      deadline = Date.now() + timeoutMs + BRIDGE_GRACE_MS;
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
  return { ok: false, error: `timed out after ${timeoutMs} ms`, timedOut: true };
}

/** Terminate the bridge worker if one is running (tests; orderly shutdown). */
export function shutdownBridge(): void {
  if (bridge) stopBridge(bridge);
}

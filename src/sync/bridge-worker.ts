/**
 * Worker side of the synchronous bridge (see bridge.ts): runs one job at a time, aborts its signal
 * at the job's timeout, posts the result, then wakes the blocked caller.
 */
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { DONE, STARTED, claimJob, type JobRequest, type JobResponse } from './bridge.js';

const { flag, port } = workerData as { flag: Int32Array; port: MessagePort };

function reply(res: JobResponse): void {
  // Post before waking so the caller always finds the message once the flag is set.
  port.postMessage(res);
  Atomics.store(flag, 0, DONE);
  Atomics.notify(flag, 0);
}

// A job module is imported once per worker: a dynamic import of a loaded module still runs the
// module loader's resolve hooks, which cost a thread hop each under a loader (measured ~0.5 ms).
const modules = new Map<string, Promise<Record<string, unknown>>>();

parentPort?.on('message', (req: JobRequest) => {
  void (async () => {
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    let claimed = false;
    try {
      let loading = modules.get(req.module);
      if (!loading) {
        loading = import(req.module) as Promise<Record<string, unknown>>;
        modules.set(req.module, loading);
        loading.catch(() => modules.delete(req.module));
      }
      const mod = await loading;
      const fn = mod[req.exportName];
      // the caller gave up before this job started (its deadline passed during start-up): it is
      // not waiting, so the job is dropped without running, replying or touching the flag
      if (!(claimed = claimJob(flag, req.id))) return;
      if (typeof fn !== 'function') throw new Error(`${req.module} has no function ${req.exportName}`);
      const toDeadline = req.deadline !== undefined ? Math.max(1, req.deadline - Date.now()) : Infinity;
      timer =
        toDeadline < req.timeoutMs
          ? setTimeout(
              () =>
                controller.abort(
                  new Error(`the call's deadline passed (${toDeadline} ms after the job started)`),
                ),
              toDeadline,
            )
          : setTimeout(
              () => controller.abort(new Error(`timed out after ${req.timeoutMs} ms`)),
              req.timeoutMs,
            );
      Atomics.store(flag, 0, STARTED);
      Atomics.notify(flag, 0);
      const value: unknown = await (fn as (a: unknown, s: AbortSignal) => Promise<unknown>)(
        req.args,
        controller.signal,
      );
      reply({ id: req.id, ok: true, value });
    } catch (e) {
      // a failed import: reply only if the caller still waits for this job
      if (!claimed && !claimJob(flag, req.id)) return;
      reply({ id: req.id, ok: false, error: e instanceof Error ? e.message : String(e) });
    } finally {
      clearTimeout(timer);
    }
  })();
});

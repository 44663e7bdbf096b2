/**
 * The background optimising tier: one worker thread (src/translate/optimizer-worker.ts) that runs Binaryen's
 * optimiser on ELFs queued by the engine, one at a time (optimising is CPU-heavy; the foreground
 * keeps the other core). The worker is unreferenced while idle, so it never keeps a process alive;
 * `settled()` references it while someone waits.
 */
import { createRequire } from 'node:module';
import type { Worker } from 'node:worker_threads';
import { TranslateError, type TranslateOptions } from '../translate/abi.js';

/** The result of one optimisation job. */
export interface Optimized {
  wasm: Uint8Array;
  timings: { build: number; optimize: number; emit: number };
}

interface Pending {
  resolve(v: Optimized): void;
  reject(e: Error): void;
}

function workerUrl(): URL {
  // under the TypeScript loader this module is optimizer.ts and the worker is optimizer-worker.ts;
  // built, .js
  const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
  return new URL(`../translate/optimizer-worker${ext}`, import.meta.url);
}

/** A queue of optimisation jobs served by one lazily started worker thread. */
export class BackgroundOptimizer {
  private worker: Worker | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private waiters = 0;

  /**
   * Optimise an ELF in the worker.
   * @returns the optimised Wasm; rejects with TranslateError when translation fails there, or
   *   Error when the worker dies.
   */
  optimize(elf: Uint8Array, options: TranslateOptions): Promise<Optimized> {
    const w = this.start();
    const id = this.nextId++;
    const p = new Promise<Optimized>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    w.postMessage({ id, elf, options });
    return p;
  }

  /** Wait for `p` with the worker referenced (so the process stays alive until it settles). */
  async hold<T>(p: Promise<T>): Promise<T> {
    this.waiters++;
    this.worker?.ref();
    try {
      return await p;
    } finally {
      if (--this.waiters === 0) this.worker?.unref();
    }
  }

  /** Stop the worker; pending jobs reject. */
  async close(): Promise<void> {
    const w = this.worker;
    this.worker = null;
    if (w) await w.terminate();
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    // execArgv passed explicitly: an entry point may append a module loader to process.execArgv
    // node:worker_threads is loaded here, on the first job: a warm start never needs it
    const { Worker } = createRequire(import.meta.url)(
      'node:worker_threads',
    ) as typeof import('node:worker_threads');
    const w = new Worker(workerUrl(), {
      execArgv: process.execArgv.filter((a) => !a.startsWith('--stack-size')),
      resourceLimits: { stackSizeMb: 32 },
    });
    w.on(
      'message',
      (msg: { id: number; wasm?: Uint8Array; timings?: Optimized['timings']; error?: never }) => {
        const p = this.pending.get(msg.id);
        if (!p) return;
        this.pending.delete(msg.id);
        const err = msg.error as { name: string; message: string; functionName: string | null } | undefined;
        if (err) {
          p.reject(
            err.name === 'TranslateError'
              ? new TranslateError(err.message, err.functionName)
              : new TranslateError(`translation failed: ${err.name}: ${err.message}`),
          );
        } else p.resolve({ wasm: msg.wasm!, timings: msg.timings! });
      },
    );
    const fail = (e: Error) => {
      if (this.worker === w) this.worker = null;
      for (const p of this.pending.values()) p.reject(e);
      this.pending.clear();
    };
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`the optimising worker exited (code ${code})`)));
    // after the listeners: attaching a 'message' listener references the worker's port again
    if (this.waiters === 0) w.unref();
    this.worker = w;
    return w;
  }
}

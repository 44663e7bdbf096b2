/**
 * Worker-thread entry of the background optimising tier: receives `{ id, elf, options }` (the ELF
 * bytes and TranslateOptions), answers `{ id, wasm, timings }` or `{ id, error: { name, message,
 * functionName } }`. One job at a time; the engine queues them (src/engine/optimizer.ts).
 */
import { parentPort } from 'node:worker_threads';
import { readElf } from '../elf/reader.js';
import type { TranslateOptions } from './abi.js';
import { translate } from './module.js';

interface Job {
  id: number;
  elf: Uint8Array;
  options: TranslateOptions;
}

parentPort!.on('message', (job: Job) => {
  try {
    const t = translate(readElf(job.elf), job.options);
    parentPort!.postMessage({ id: job.id, wasm: t.wasm, timings: t.timings }, [t.wasm.buffer as ArrayBuffer]);
  } catch (e) {
    const err = e instanceof Error ? e : new Error(String(e));
    const functionName = (err as { functionName?: unknown }).functionName ?? null;
    parentPort!.postMessage({ id: job.id, error: { name: err.name, message: err.message, functionName } });
  }
});

/**
 * The budget of instance slots kept between invocations (engine/slot-keeper.ts), for the whole
 * process and each worker's share of it.
 *
 * Bytes: a kept slot holds the pages its invocations touched (a tool that fills its 64 MiB keeps
 * 64 MiB resident per worker), so the total is bounded; a worker drops its least recently used
 * slots to stay under its share, and drops large slots left idle for a few seconds.
 *
 * Count: every WebAssembly.Memory reserves about 10 GiB of address space, and a process has
 * 128 TiB (47 bits): measured on Node 20, the 13,080th memory of a process failed with
 * "WebAssembly.Memory(): could not allocate memory". {@link KEPT_SLOTS_PER_PROCESS} kept slots
 * (20 TiB) leave room for the instances running, memories dropped but not yet collected, and
 * everything else in the process, however many harnesses are deployed.
 */
import { freemem, totalmem } from 'node:os';

/** Instance slots kept at once over all workers of a process (each worker keeps its share). */
export const KEPT_SLOTS_PER_PROCESS = 2048;

/**
 * The default budget: a quarter of the machine's memory, between 256 MiB and 16 GiB; bytes.
 * Instances are the largest consumer a busy daemon has (each worker keeps a warm instance of every
 * harness it runs); a quarter leaves the rest for the buffered replies (an eighth), V8's heaps and
 * the machine's other processes.
 */
export function defaultInstanceMemory(total = totalmem()): number {
  return Math.min(16 * 2 ** 30, Math.max(256 * 2 ** 20, Math.floor(total / 4)));
}

/** Where the default budget came from, for a boot log. */
export function describeDefaultInstanceMemory(): string {
  const gib = (n: number): string => `${(n / 2 ** 30).toFixed(1)} GiB`;
  return `default: a quarter of ${gib(totalmem())} memory (${gib(freemem())} free), within 256 MiB..16 GiB`;
}

/**
 * A worker's share of the budget and of the kept-slot count.
 * @param total bytes for the whole process (> 0)
 * @param workers the pool's size (>= 1)
 * @returns bytes and slots for each worker (at least one slot)
 */
export function workerShare(total: number, workers: number): { bytes: number; slots: number } {
  return {
    bytes: Math.floor(total / workers),
    slots: Math.max(1, Math.floor(KEPT_SLOTS_PER_PROCESS / workers)),
  };
}

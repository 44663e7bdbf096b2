/**
 * The dead-letter set (docs/wakes.md): moving a claim whose deliveries are spent into it,
 * journaled and counted (wake delivery does it: wake-delivery.ts); the shapes bermd's API and the
 * CLI show of the due-set and the set (`GET /wakes`, `GET /wakes/dead`, `berm wake ls [--dead]
 * --state`); and dropping an entry, journaled, as the runtime (bermd's API) and the CLI on a state
 * directory (`berm wake drop --state`) both do it.
 */
import type { DeadWakeInfo, WakeInfo } from '../contract/index.js';
import type { Counters } from './outcome.js';
import type { DeadReason, DeadWake, JournalRecord, RuntimeStore, WakeRecord } from '../store/store.js';

/** The wake as the API shows it (ms since the epoch; the runtime's record fields in snake_case). */
export function wakeInfo(w: WakeRecord): WakeInfo {
  return {
    id: w.id,
    harness: w.harness,
    due_at: w.when,
    payload: w.payload,
    kind: w.kind,
    entry: w.entry,
    armed_by: w.armedBy,
    armed_at: w.armedAt,
    attempt: w.attempt,
  };
}

/** A dead-letter entry as the API shows it: the wake's fields, then why and when. */
export function deadWakeInfo(d: DeadWake): DeadWakeInfo {
  return {
    ...wakeInfo(d.wake),
    reason: d.reason,
    attempts: d.attempts,
    last_error: d.lastError,
    dead_at: d.deadAt,
  };
}

/**
 * Remove dead-letter entry `id` from `store` and journal it (trigger `drop`, outcome `refused`,
 * the reason and last error in `detail`). The delete is the durable fact: a journal record that
 * cannot be written is reported through `log`, and the entry is gone either way.
 * @returns the entry and its journal record, or null when there is none
 */
export function dropDeadEntry(
  store: RuntimeStore,
  id: string,
  log: (line: string) => void,
): { dead: DeadWake; record: JournalRecord } | null {
  const d = store.dues.dropDead(id);
  if (!d) return null;
  const record: JournalRecord = {
    trigger: 'drop',
    harness: d.wake.harness,
    entry: d.wake.entry,
    chain: '',
    depth: d.wake.depth,
    wake: d.wake.id,
    attempt: d.attempts,
    scheduledAt: d.wake.when,
    start: Date.now(),
    ms: 0,
    outcome: 'refused',
    detail: `dropped from the dead-letter set (${d.reason}: ${d.lastError})`.slice(0, 500),
    fuel: 0,
  };
  try {
    store.journal.append(record);
  } catch (e) {
    log(`journal record of dropped dead-letter entry ${id} not written: ${(e as Error).message}`);
  }
  return { dead: d, record };
}

/** What moving a claim to the dead-letter set reaches. */
export interface BuryDeps {
  store: RuntimeStore;
  counters: Counters;
  emit(event: string, ...args: unknown[]): void;
  log(line: string): void;
}

/**
 * Move claim `w` to the dead-letter set, journaled (trigger `dead`) and counted; when the store
 * cannot take it the claim stays (delivered again at the next start, and dead-lettered then).
 * @returns whether it moved
 */
export function buryWake(
  d: BuryDeps,
  w: WakeRecord,
  reason: DeadReason,
  lastError: string,
  attempts: number,
  chain: string,
): boolean {
  const now = Date.now();
  const rec: JournalRecord = {
    trigger: 'dead',
    harness: w.harness,
    entry: w.entry,
    chain,
    depth: w.depth,
    wake: w.id,
    attempt: attempts,
    scheduledAt: w.when,
    start: now,
    ms: 0,
    outcome: 'error',
    detail: clip(`${reason} after ${attempts} deliveries: ${lastError}`),
    fuel: 0,
  };
  try {
    d.store.journal.append(rec);
  } catch (e) {
    // the dead-letter entry is the durable record; the journal line is its echo
    d.log(`journal record of dead-lettered wake ${w.id} not written: ${(e as Error).message}`);
  }
  let moved: boolean;
  try {
    moved = d.store.dues.deadLetter(w.id, w.seq, {
      reason,
      lastError: clip(lastError),
      attempts,
      deadAt: now,
    });
  } catch (e) {
    d.log(
      `wake ${w.id} of ${w.harness} could not be moved to the dead-letter set (${(e as Error).message}); it stays claimed`,
    );
    return false;
  }
  if (!moved) return false;
  d.counters.deadLettered++;
  d.log(
    `wake ${w.id} of ${w.harness} moved to the dead-letter set: ${reason} after ${attempts} deliveries (${lastError})`,
  );
  d.emit('dead', { id: w.id, harness: w.harness, reason, attempts, lastError, deadAt: now });
  // after the record of the run that ended it, which the dispatcher emits once this returns
  queueMicrotask(() => d.emit('invocation', rec, null));
  return true;
}

/** A message cut to the journal's detail length (500 characters). */
function clip(text: string): string {
  return text.length > 500 ? text.slice(0, 500) + '...' : text;
}

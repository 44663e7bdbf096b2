/**
 * The operator's side of the due-set and its dead-letter set (docs/wakes.md): the shapes bermd's
 * API and the CLI show (`GET /wakes`, `GET /wakes/dead`, `berm wake ls [--dead] --state`), and
 * dropping an entry, journaled, as the runtime (bermd's API) and the CLI on a state directory
 * (`berm wake drop --state`) both do it.
 */
import type { DeadWakeInfo, WakeInfo } from '../contract/index.js';
import type { DeadWake, JournalRecord, RuntimeStore, WakeRecord } from '../store/store.js';

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

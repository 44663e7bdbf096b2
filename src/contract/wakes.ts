/**
 * The wake shapes of bermd's HTTP API (`POST /wakes`, `GET /wakes`, `DELETE /wakes/{id}`, and the
 * dead-letter set's `GET /wakes/dead`).
 */

/** A pending wake as the API shows it (one element of `GET /wakes`, the 201 of `POST /wakes`). */
export interface WakeInfo {
  id: string;
  harness: string;
  /** ms since the Unix epoch */
  due_at: number;
  payload: string;
  /** extra fields the runtime reports (kind, entry, armed_by, armed_at, attempt) */
  [key: string]: unknown;
}

/** The body of `GET /wakes`: the earliest pending wakes and how many are pending in all. */
export interface WakeList {
  wakes: WakeInfo[];
  /** wakes pending in the due-set; more than `wakes.length` when the list was cut at its limit */
  pending: number;
  /** present (true) when `pending` exceeds the wakes listed */
  truncated?: true;
}

/**
 * A request to arm a wake from outside a guest: give exactly one of `delayMs` and `at`. An absolute
 * instant is passed to the runtime unchanged (turning it into a delay on the way would add the time
 * between this clock read and the runtime's to the due instant).
 */
export interface WakeRequest {
  harness: string;
  /** ms from now (>= 0) */
  delayMs?: number;
  /** due instant, ms since the Unix epoch (one in the past is due at once) */
  at?: number;
  payload: string;
  id?: string;
}

/** Default and largest `limit` of `GET /wakes` (wakes in one reply). */
export const WAKE_LIST_LIMIT = { default: 1000, max: 10_000 } as const;

/**
 * An entry of the dead-letter set (one element of `GET /wakes/dead`): the wake as last claimed
 * (`attempt`: its claim's count) and why it left the due-set.
 */
export interface DeadWakeInfo extends WakeInfo {
  /** worker-lost | store-error | interrupted */
  reason: string;
  /** deliveries started */
  attempts: number;
  /** the last delivery's error */
  last_error: string;
  /** when it entered the set, ms since the Unix epoch */
  dead_at: number;
}

/** The body of `GET /wakes/dead`: the oldest entries and how many there are in all. */
export interface DeadWakeList {
  dead: DeadWakeInfo[];
  count: number;
  /** present (true) when `count` exceeds the entries listed */
  truncated?: true;
}

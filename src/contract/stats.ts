/** The runtime's counters and gauges, as bermd's metrics and boot log read them. */

/** Counters and gauges of the queue (the daemon turns them into Prometheus metrics). */
export interface RuntimeStats {
  queueDepth: number;
  inFlight: number;
  workers: number;
  idleWorkers: number;
  /** invocations finished, by `${trigger}:${status}` */
  invocations: Record<string, number>;
  wakesPending: number;
  /** wakes claimed and running or waiting for their schedule's previous occurrence */
  wakesClaimed: number;
  /** due wakes left for a later drain because the pool was full, since start */
  spills: number;
  /** occurrences dropped by the overrun policy skip, since start */
  overrunSkips: number;
  /** wakes delivered again after a restart (attempt > 1), since start */
  redeliveries: number;
  /** wakes moved to the dead-letter set, since start */
  deadLettered?: number;
  /**
   * calls cancelled because their caller went away, since start: dropped from the queue, or
   * interrupted while running (absent from backends that cannot cancel)
   */
  cancelled?: { queued: number; running: number };
  /** harness compilations: cached or translated */
  translations: { cached: number; translated: number };
  workersReplaced: number;
}

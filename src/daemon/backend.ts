/**
 * What the daemon needs from the layer that runs guests: the queue's public surface, reduced to
 * the calls the HTTP API, MCP and metrics make. The serving thread only talks to this interface;
 * every guest run and every translation happens behind it, on worker threads.
 */
import type { Grant } from '../capabilities/types.js';
import type {
  Authority,
  DeadWakeInfo,
  InvocationEvent,
  InvokeOutcome,
  RuntimeStats,
  WakeInfo,
  WakeRequest,
} from '../contract/index.js';
import type { CancelSignal } from '../runtime/index.js';
import type { Deployments } from './deployments.js';
import type { DeploymentStore } from '../store/store.js';

/** The capabilities the operator's declaration grants a harness (empty for an undeclared one). */
export interface DeployGrant {
  /** granted capability names, sorted */
  capabilities: string[];
  /** their arguments (root, hosts, callees, database) */
  grant: Grant;
}

/** A change in the due-set, for the change feed (GET /events). */
export type WakeEvent =
  /** a wake was armed (by a guest, the API or a recurring schedule) */
  | { type: 'armed'; wake: WakeInfo }
  /** a wake fired: its due instant, when it fired, both ms since the epoch, and the lateness, ms */
  | {
      type: 'fired';
      id: string;
      harness: string;
      scheduledAt: number;
      firedAt: number;
      lateMs: number;
      attempt: number;
    }
  /** a pending wake was cancelled */
  | { type: 'cancelled'; id: string; harness: string };

/** The runtime behind the daemon. */
export interface Backend {
  /**
   * Compile `elf` (on a worker) and publish it as `name` with `grant`, replacing any previous
   * image of that name. Resolves once calls to `name` run the new image.
   * @throws Error (ElfError, ManifestError, HarnessError, ...) when the image cannot be compiled:
   *   nothing is published then.
   */
  deploy(name: string, elf: Uint8Array, grant: DeployGrant): Promise<void>;
  /** Stop routing calls to `name` (in-flight calls finish); its record is the daemon's to remove. */
  undeploy(name: string): Promise<void>;
  /**
   * The runtime store's deployments: the one record of which name serves which image, written by
   * the daemon (src/daemon/deployments.ts).
   */
  deploymentRecords(): DeploymentStore;
  /**
   * Run `tool` of `harness` with `argsJson` (already validated against the tool's schema).
   * `onLog` receives each berm.log line while the call runs. `signal` aborts when the caller went
   * away (its HTTP client disconnected, its MCP session ended): the call is then dropped if queued,
   * interrupted if running, and journaled `cancelled` (its reason, a string, as the detail).
   */
  invoke(
    harness: string,
    tool: string,
    argsJson: string,
    options: { onLog?: (line: string) => void; authority?: Authority; signal?: CancelSignal },
  ): Promise<InvokeOutcome>;
  /**
   * Arm a wake of `harness`'s on_wake.
   * @throws Error naming the reason when refused (no on_wake export, no schedule grant, ...)
   */
  armWake(req: WakeRequest): Promise<WakeInfo>;
  /**
   * Pending wakes, earliest first: at most `limit` of them (a due-set may hold millions, of up to
   * 64 KiB of payload each), ending at the one whose payload brings the listed payloads to
   * LIST_WAKES_MAX_BYTES (4 MiB), and how many are pending in all.
   */
  listWakes(limit: number): Promise<{ wakes: WakeInfo[]; pending: number }>;
  /** Cancel a wake; false when there is no such wake. */
  cancelWake(id: string): Promise<boolean>;
  /**
   * The dead-letter set (optional: a runtime without wakes has none): the oldest `limit` entries
   * and how many there are in all.
   */
  listDead?(limit: number): Promise<{ dead: DeadWakeInfo[]; count: number }>;
  /**
   * Arm dead-letter entry `id` again (due now, attempts reset; it leaves the set).
   * @returns the armed wake, `missing` (no such entry) or `conflict` (a pending wake holds the id)
   */
  retryDead?(id: string): Promise<WakeInfo | 'missing' | 'conflict'>;
  /** Drop dead-letter entry `id` (journaled). @returns false when there is none */
  dropDead?(id: string): Promise<boolean>;
  /** Dead-letter entries per harness, for the metrics gauge. */
  deadCounts?(): Record<string, number>;
  /** Current gauges and counters. */
  stats(): RuntimeStats;
  /** Subscribe to finished invocations (for the latency histogram and outcome counters). */
  onInvocation(listener: (e: InvocationEvent) => void): void;
  /** Subscribe to wakes armed, fired and cancelled in this process (optional: the change feed). */
  onWakeEvent?(listener: (e: WakeEvent) => void): void;
  /**
   * Begin firing due wakes; called once the stored deployments are republished, so an overdue
   * wake finds its harness (optional: a runtime without wakes has nothing to start).
   */
  start?(): void;
  /**
   * With a store shared by several daemons: apply to `deployments` the changes other daemons made
   * since the backend was built (it holds them from then on, before the store's records are read
   * for the restore) and keep them in step (src/daemon/cluster.ts); called after the restore,
   * before {@link start}.
   * @returns problems met applying the held changes, one line each
   */
  join?(deployments: Deployments): Promise<string[]>;
  /** Every limit of the runtime as [name, value, source] for the boot log (optional). */
  limits?(): [string, string, string][];
  /** How long a shutdown lets in-flight work finish, ms (the runtime's drain limit). */
  readonly drainMs: number;
  /** Stop accepting work, let in-flight work finish for up to `drainMs`, persist, release workers. */
  close(drainMs: number): Promise<void>;
}

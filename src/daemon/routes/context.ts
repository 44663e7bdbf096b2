/**
 * What the resource modules of the route table share: the runtime behind the daemon, the
 * deployment store, the body limits and the server's state.
 */
import type { Backend } from '../backend.js';
import type { Deployments } from '../deployments.js';
import type { BufferBudget } from '../budget.js';
import type { BodyLimits } from '../http.js';

/** The daemon as route handlers see it. */
export interface RouteContext {
  backend: Backend;
  deployments: Deployments;
  /** one line per notable event (deploys, undeploys) */
  log: (line: string) => void;
  /**
   * The limits a request body is read under: at most `maxBytes` (default: the largest body of any
   * request but an image upload), within the body deadline.
   */
  body(maxBytes?: number): BodyLimits;
  /** largest ELF accepted by `PUT /harnesses/{name}`, bytes */
  maxImageBytes: number;
  /** the bytes held for clients (src/daemon/budget.ts) */
  budget: BufferBudget;
  /** true once the server closes: work that would start is refused with 503 */
  closing(): boolean;
}

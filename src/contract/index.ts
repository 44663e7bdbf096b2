/**
 * The contract: the types that cross layers (the daemon's HTTP shapes, wake info, stats, authority,
 * invocation outcomes), declared once here and imported by the runtime, the protocol door, the
 * daemon and the CLI client alike. It imports nothing of berm's.
 */
export { MAX_AUTHORITY_CHARS, type Authority } from './authority.js';
export type { HarnessInfo, ToolInfo } from './harnesses.js';
export type { InvocationEvent, InvokeOutcome, InvokeReply } from './outcome.js';
export type { RuntimeStats } from './stats.js';
export {
  WAKE_LIST_LIMIT,
  type DeadWakeInfo,
  type DeadWakeList,
  type WakeInfo,
  type WakeList,
  type WakeRequest,
} from './wakes.js';

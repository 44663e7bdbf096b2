/**
 * How an invocation ends, from the runtime's outcome to the HTTP reply: {@link InvokeOutcome} is
 * what the daemon's backend reports, {@link InvokeReply} the JSON body bermd answers
 * `POST /harnesses/{name}/tools/{tool}` with (upstream shapes), {@link InvocationEvent} what the
 * metrics hear of each finished invocation.
 */

/**
 * How one invocation ended. `chain` is the runtime's chain id of the invocation (its journal
 * records carry it), when the invocation ran.
 */
export type InvokeOutcome =
  /** berm.done (or an ABI 0 return): the tool's result text */
  (
    | { status: 'ok'; result: string }
    /** berm.fail: the tool's own failure message */
    | { status: 'failed'; message: string }
    /** the guest trapped: trap class name, message, guest pc (-1 unknown) and `symbol+0xoffset` */
    | { status: 'trapped'; trap: string; message: string; pc: number; symbol: string }
    /** a limit refused the call before it ran (concurrency, rate, depth, closed, ...) */
    | { status: 'refused'; message: string; limit?: string }
    /**
     * it could not run or broke the ABI; `code` as the runtime reports it ('unknown-harness',
     * 'unknown-tool', 'bad-args', 'harness', 'worker-lost', 'internal'; 'cancelled' when its caller
     * went away before the reply)
     */
    | { status: 'error'; message: string; code?: string }
  ) & { chain?: string };

/**
 * The JSON body of a tool call's reply: `{"done"}` or `{"failed"}` with 200; `{"error", "trap",
 * "pc", "symbol"}` for a trap (500); `{"error", "limit"?}` for a refusal (429); `{"error",
 * "retry_after"}` (seconds) when the shared store could not record the call (503); `{"error"}` else.
 */
export type InvokeReply =
  | { done: string }
  | { failed: string }
  | { error: string; trap?: string; pc?: number; symbol?: string; limit?: string; retry_after?: number };

/** One finished invocation, reported to the daemon's metrics. */
export interface InvocationEvent {
  trigger: 'call' | 'wake' | 'notify' | 'event';
  harness: string;
  outcome: 'ok' | 'failed' | 'trapped' | 'refused' | 'error' | 'cancelled';
  /** wall time from enqueue to outcome, seconds */
  seconds: number;
}

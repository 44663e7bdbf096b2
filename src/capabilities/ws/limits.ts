/**
 * The caps of the ws capability's connections and their defaults. The runtime holds them among
 * its limits (src/runtime/limits.ts), so they are set and printed at boot like the queue's.
 */

/** The caps of connections, by limit name (bytes, counts). */
export interface WsLimits {
  /** largest frame in either direction; a larger inbound frame closes the connection */
  wsMaxFrameBytes: number;
  /** connections one harness holds open at once */
  wsHarnessConnections: number;
  /** connections this process holds open at once, over all harnesses */
  wsConnections: number;
  /** frames one connection may have waiting to go out; a send beyond it is refused */
  wsQueueFrames: number;
}

/** Defaults of {@link WsLimits}. */
export const WS_DEFAULT_LIMITS: Readonly<WsLimits> = Object.freeze({
  wsMaxFrameBytes: 1024 * 1024,
  wsHarnessConnections: 16,
  wsConnections: 1024,
  wsQueueFrames: 256,
});

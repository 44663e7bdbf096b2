/**
 * The door's agent-daemon calls, run in the synchronous bridge's worker
 * (src/sync/bridge.ts): the guest's thread blocks in Atomics.wait while this worker
 * does the socket I/O. One reconnecting {@link AgentClient} per endpoint lives as long as the
 * worker; if the bridge gives up on a call and terminates the worker, the next call starts a
 * fresh worker and connects afresh.
 */
import { AgentClient, NotConnectedError, parseEndpoint } from './client.js';

/** Arguments of {@link protocolCall}. */
export interface ProtocolCallArgs {
  /** agent daemon endpoint text (see parseEndpoint) */
  endpoint: string;
  /** the encoded ClientMessage */
  request: Uint8Array;
  /** collect a stream's events through `end` */
  stream: boolean;
  timeoutMs: number;
}

/** What {@link protocolCall} resolves with; it never rejects for a daemon-side failure. */
export type ProtocolCallResult =
  { ok: true; replies: Uint8Array[] } | { ok: false; error: string; notConnected?: boolean };

const clients = new Map<string, AgentClient>();

/**
 * Send one request to the daemon at `args.endpoint` and collect its answer.
 * @returns the encoded replies, or why not (notConnected when no daemon is reachable)
 */
export async function protocolCall(args: ProtocolCallArgs): Promise<ProtocolCallResult> {
  let client = clients.get(args.endpoint);
  if (!client) {
    try {
      client = new AgentClient(parseEndpoint(args.endpoint));
    } catch (e) {
      return { ok: false, error: (e as Error).message, notConnected: true };
    }
    clients.set(args.endpoint, client);
  }
  try {
    const replies = await client.call(args.request, { timeoutMs: args.timeoutMs, stream: args.stream });
    return { ok: true, replies };
  } catch (e) {
    return {
      ok: false,
      error: (e as Error).message,
      ...(e instanceof NotConnectedError ? { notConnected: true } : {}),
    };
  }
}

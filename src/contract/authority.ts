/**
 * Who an invocation acts for, as the caller states it: the agent (e.g. the MCP client or a
 * user-agent name; an agent daemon's ULID), its session handle, and the sender (attribution) of the
 * message that caused the call. bermd takes these from `X-Berm-Agent`, `X-Berm-Session`,
 * `X-Berm-Sender` headers (HTTP) or from `_meta` of an MCP tools/call request (`berm/agent`,
 * `berm/session`, `berm/sender`; the MCP session id stands in for a missing session). Chains and
 * wakes inherit it; the protocol door scopes its calls to it. Absent fields stay absent.
 */
export interface Authority {
  agent?: string;
  session?: string;
  sender?: string;
}

/** Longest value of an authority field, characters; a longer one is refused (HTTP 400). */
export const MAX_AUTHORITY_CHARS = 256;

/**
 * What a harness may say to the agent daemon: the grantable groups of protocol operations, by
 * blast radius, and the messages no declaration can grant, with why.
 *
 * An operation is a ClientMessage member name (`send`, `get_agent`, ...) or, for berm's own
 * messages (ClientMessage.berm), the BermClientMessage member (`schedule_wake`, ...). Default
 * deny: an operation in no group a harness holds is refused, whatever it is.
 */

/** Grantable groups and their operations, as a declaration names them (`protocol:read`, ...). */
export const GROUPS: Readonly<Record<string, readonly string[]>> = Object.freeze({
  // the catalogue, and nothing that spends tokens
  'protocol:read': [
    'ping',
    'get_stats',
    'list_agents',
    'get_agent',
    'list_skills',
    'get_skill',
    'list_models',
    'list_subscriptions',
  ],
  // conversations, scoped to the invocation's agent
  'protocol:history': ['list_conversations', 'list_active_conversations', 'get_conversation_history'],
  // session search; its agent and sender filters are overwritten from the invocation
  'protocol:sessions': ['search_sessions'],
  // spends tokens; forced to the invocation's agent and session unless the declaration grants more
  'protocol:send': ['send', 'stream'],
  // berm's own: wakes in the due-set (an instant, a target harness and entry, a payload)
  'protocol:schedule': ['schedule_wake', 'cancel_wake', 'list_wakes'],
  // the event bus, now that a harness can be a subscription target
  'protocol:events': ['subscribe_event', 'unsubscribe_event', 'publish_event'],
});

/** Group names, sorted. */
export const GROUP_NAMES: readonly string[] = Object.keys(GROUPS).sort();

/** The group of each grantable operation. */
export const GROUP_OF: ReadonlyMap<string, string> = new Map(
  Object.entries(GROUPS).flatMap(([g, ops]) => ops.map((op) => [op, g] as [string, string])),
);

/** Why a message can never be granted to a harness: the reason is printed with every refusal. */
export const NEVER: Readonly<Record<string, string>> = Object.freeze({
  create_agent: 'destructive or configuring',
  update_agent: 'destructive or configuring',
  delete_agent: 'destructive or configuring',
  rename_agent: 'destructive or configuring',
  delete_conversation: 'destructive or configuring',
  upsert_mcp: 'destructive or configuring',
  delete_mcp: 'destructive or configuring',
  reconnect_mcp: 'destructive or configuring',
  set_active_model: 'destructive or configuring',
  kill: 'destructive or configuring',
  compact: 'destructive or configuring',
  get_config: 'destructive or configuring (the whole configuration, secrets included)',
  extension: 'destructive or configuring (opaque bytes for downstream products)',
  list_mcps: 'a credential read (McpInfo carries the Authorization header and environment)',
  subscribe_events: 'a stream by shape (a harness has no lifetime to hold it)',
  subscribe_mcp_events: 'a stream by shape (a harness has no lifetime to hold it)',
  create_session: 'in no group (sessions are opened by the invocation, not by a harness)',
  cancel_stream: 'in no group (cancelling a run is the client’s)',
});

/** Result of {@link checkGrantName}. */
export type GrantNameCheck = { ok: true; group: string } | { ok: false; problem: string; fix: string };

const FIX_LIST = `grantable groups are ${GROUP_NAMES.join(', ')}`;

/**
 * Check a capability name of the `protocol` family as a declaration lists it.
 * @returns the group, or why the name is refused and the fix (a never-grantable message named
 *   as a group, a bare "protocol", a wildcard, or an unknown group).
 */
export function checkGrantName(name: string): GrantNameCheck {
  if (GROUPS[name]) return { ok: true, group: name };
  if (name === 'protocol') {
    return {
      ok: false,
      problem: 'capability "protocol" names no group (the protocol is granted by group)',
      fix: `list the groups the harness needs, e.g. "protocol:read"; ${FIX_LIST}`,
    };
  }
  const rest = name.slice('protocol:'.length);
  if (rest === '*' || rest === 'all' || rest === 'admin') {
    return {
      ok: false,
      problem: `capability ${JSON.stringify(name)} would grant the whole protocol, which no harness may hold`,
      fix: `list only the groups the harness needs; ${FIX_LIST}`,
    };
  }
  if (NEVER[rest]) {
    return {
      ok: false,
      problem: `${rest} is never grantable to a harness: ${NEVER[rest]}`,
      fix: `remove ${JSON.stringify(name)}; ${FIX_LIST}`,
    };
  }
  const group = GROUP_OF.get(rest);
  if (group) {
    return {
      ok: false,
      problem: `capability ${JSON.stringify(name)} names one operation; the protocol is granted by group`,
      fix: `write "${group}" (which holds ${GROUPS[group]!.join(', ')})`,
    };
  }
  return { ok: false, problem: `unknown protocol group ${JSON.stringify(name)}`, fix: FIX_LIST };
}

/** The per-operation host function name of `op`: `crabtalk.protocol.<op>`. */
export function opWireName(op: string): string {
  return `crabtalk.protocol.${op}`;
}

/**
 * Name of the service the door's capability asks on the queue's thread (subscriptions, publishing
 * to harnesses, listing wakes): see ./attach.ts.
 */
export const PROTOCOL_SERVICE = 'crabtalk.protocol';

/** The single-door host function carrying an encoded ClientMessage (upstream's shape). */
export const CALL_WIRE_NAME = 'crabtalk.protocol.call';

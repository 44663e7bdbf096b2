/**
 * The protocol door: the one function through which every protocol call of a harness passes,
 * whichever host function it came through (upstream's single `crabtalk.protocol.call` with an
 * encoded ClientMessage, or one `crabtalk.protocol.<operation>` per grantable operation). It
 *
 * 1. decodes the request once and refuses an empty message, bytes that are no ClientMessage,
 *    and any operation in no group the harness was granted (default deny);
 * 2. scopes the message to the invocation's authority (agent, session, sender): send and stream
 *    are forced to the invocation's agent and session unless the declaration grants more agents;
 *    search_sessions' and the history lists' agent and sender filters are overwritten; a skill
 *    outside the declaring agent's set is refused; wakes and harness subscriptions name only the
 *    calling harness;
 * 3. rate-limits per harness, then serves the message: berm's own (wakes, harness-targeted
 *    subscriptions, publishing to harnesses) from local backends, the rest through the agent
 *    daemon (a synchronous transport, see ./capability.ts);
 * 4. shapes the answer: only the reply kinds the operation can produce pass; `AgentInfo.config`
 *    is blanked in `agent_info` and in every entry of `agent_list`; skill lists are narrowed;
 *    session hits and conversations outside the invocation's agent are dropped; a stream's
 *    events are folded into one SendResponse;
 * 5. logs the call (harness, operation, scope, outcome, duration).
 *
 * The answer to the guest is one field: the encoded ServerMessage (which may be the daemon's own
 * ErrorMsg). A refusal (nothing was sent) and an error (the daemon failed or timed out) are the
 * wire's refused and error replies.
 */
import type { Authority } from '../contract/index.js';
import type { WireReply } from '../wire/fields.js';
import { CALL_WIRE_NAME, GROUP_OF, NEVER } from './groups.js';
import {
  clientType,
  serverType,
  decodeServer,
  encode,
  encodeServer,
  member,
  ProtocolDecodeError,
  decode,
  type Envelope,
  type Plain,
} from './schema.js';

/** What the declaration and the invocation allow one protocol call. */
export interface DoorScope {
  /** the calling harness's declared name */
  harness: string;
  /** the protocol groups the declaration grants (`protocol:read`, ...) */
  groups: ReadonlySet<string>;
  /** the invocation's authority */
  authority: Authority;
  /**
   * The skills the declaring agent declared (declaration key `skills`). Absent: the skills of the
   * invocation's agent as the daemon reports them (AgentInfo.skills; an agent naming none is
   * unrestricted, as upstream). No agent and no list: no skill.
   */
  skills?: readonly string[];
  /** agents (ULIDs, or "*") send and stream may address beyond the invocation's (key `agents`) */
  agents?: readonly string[];
  /** the invocation's chain: depth and id, carried into work the call enqueues */
  chain?: { depth: number; id?: string };
}

/** The agent daemon, synchronously: send one encoded ClientMessage, get its encoded answer(s). */
export type Transport = (
  request: Uint8Array,
  stream: boolean,
) => { ok: true; replies: Uint8Array[] } | { ok: false; error: string; notConnected?: boolean };

/** One wake as the door reports it. */
export interface WakeView {
  id: string;
  harness: string;
  entry: string;
  at_ms: number;
  payload: string;
}

/** berm's due-set as the door sees it (protocol:schedule). */
export interface WakeBackend {
  /**
   * Arm a wake of `harness`'s `entry` at `atMs` (ms since the epoch) with `payload`, carrying the
   * authority and chain of the arming call. Re-arming an existing id replaces it.
   * @returns the wake, or a refusal (no on_wake export, payload too large, not finite...)
   */
  arm(w: {
    harness: string;
    entry: string;
    atMs: number;
    payload: string;
    id?: string;
    authority: Authority;
    chain?: DoorScope['chain'];
  }): WakeView | { refused: string };
  /** Cancel `id` if it is a wake of `harness`; true when one was cancelled. */
  cancel(harness: string, id: string): boolean;
  /** Pending wakes of `harness`. */
  list(harness: string): WakeView[];
}

/** A subscription whose target is a harness (`harness:<name>`), as the door reports it. */
export interface SubscriptionView {
  id: number | string;
  source: string;
  target_agent: string;
  once: boolean;
}

/** A request of the door's capability to its service on the queue's thread (structured-cloneable). */
export type ServiceRequest =
  | { op: 'subscribe'; source: string; once: boolean; authority: Authority }
  | { op: 'unsubscribe'; id: string }
  | { op: 'list_subscriptions' }
  | { op: 'publish'; source: string; payload: string }
  | { op: 'list_wakes' }
  | { op: 'arm'; at: number; payload: string; id?: string; authority: Authority }
  | { op: 'cancel'; id: string }
  | { op: 'take' };

/** berm's event bus towards harnesses (protocol:events). */
export interface EventBackend {
  /** Subscribe harness `harness` (its on_notify) to `source`; or why not (too many, bad source). */
  subscribe(
    harness: string,
    source: string,
    once: boolean,
    authority: Authority,
  ): SubscriptionView | { refused: string };
  /** Remove subscription `id` if it targets `harness`; true when removed. */
  unsubscribe(harness: string, id: string): boolean;
  /** Subscriptions targeting `harness`. */
  list(harness: string): SubscriptionView[];
  /**
   * Deliver an event to every harness subscribed to `source` (a notify trigger each, one chain
   * level deeper than `chain`).
   * @returns how many were enqueued, or a refusal (chain too deep, out of gas)
   */
  publish(
    source: string,
    payload: string,
    from: { harness: string; chain?: DoorScope['chain'] },
  ): number | { refused: string };
}

/** One line of the door's access log. */
export interface DoorLogEntry {
  harness: string;
  /** the operation (ClientMessage member, or berm's), or "(undecodable)" / "(empty)" */
  op: string;
  /** what the call was scoped to, e.g. "agent=01J.. session=tg:1 sender=x" */
  scope: string;
  /** ok, refused or error, with the reason for the latter two */
  outcome: 'ok' | 'refused' | 'error';
  reason?: string;
  /** wall-clock duration, ms */
  ms: number;
  /** which host function carried it */
  via: string;
}

/** Per-harness token bucket settings. */
export interface RateLimit {
  /** sustained calls per second */
  perSecond: number;
  /** bucket size (calls that may come at once) */
  burst: number;
}

/** Default door rate limit: 50 calls/s sustained, bursts of 100. */
export const DEFAULT_RATE: Readonly<RateLimit> = Object.freeze({ perSecond: 50, burst: 100 });

/** What the door serves with. */
export interface DoorEnv {
  /** the agent daemon; absent means "not connected yet" */
  transport?: Transport;
  wakes?: WakeBackend;
  events?: EventBackend;
  /** access log sink */
  log?: (entry: DoorLogEntry) => void;
  /** per-harness limiter; absent means unlimited */
  limiter?: Limiter;
  /** clock, ms since the epoch (tests) */
  now?: () => number;
}

/** Takes one call's token for a harness (a {@link RateLimiter}, or one on another thread). */
export interface Limiter {
  readonly rate: RateLimit;
  /** false when the harness's bucket is empty */
  take(harness: string): boolean;
}

/** Token buckets keyed by harness name. */
export class RateLimiter implements Limiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  constructor(
    readonly rate: RateLimit = DEFAULT_RATE,
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /** Take one token for `harness`; false when its bucket is empty. */
  take(harness: string): boolean {
    const now = this.clock();
    let b = this.buckets.get(harness);
    if (!b) {
      b = { tokens: this.rate.burst, at: now };
      this.buckets.set(harness, b);
    }
    b.tokens = Math.min(this.rate.burst, b.tokens + ((now - b.at) / 1000) * this.rate.perSecond);
    b.at = now;
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  }
}

/** The door's verdict on one decoded message. */
export type Admission =
  | { ok: true; op: string; group: string; message: Envelope; note: string }
  | { ok: false; op: string; refused: string };

const NO_GROUP = 'this message type is in no group this harness was granted';

/** The ServerMessage members each operation may answer with (besides `error`). */
const REPLIES: Readonly<Record<string, readonly string[]>> = {
  ping: ['pong'],
  get_stats: ['stats'],
  list_agents: ['agent_list'],
  get_agent: ['agent_info'],
  list_skills: ['skill_list'],
  get_skill: ['skill_body'],
  list_models: ['model_list'],
  list_subscriptions: ['subscription_list'],
  list_conversations: ['conversation_list'],
  list_active_conversations: ['active_conversations'],
  get_conversation_history: ['conversation_history'],
  search_sessions: ['session_hits'],
  send: ['response'],
  stream: ['stream'],
  subscribe_event: ['subscription_info'],
  unsubscribe_event: ['subscription_info', 'pong'],
  publish_event: ['pong'],
};

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/** The harness's own subscription target address: `harness:<name>`. */
export function harnessTarget(harness: string): string {
  return `harness:${harness}`;
}

function scopeText(a: Authority): string {
  const parts = [`agent=${a.agent ?? '-'}`, `session=${a.session ?? '-'}`, `sender=${a.sender ?? '-'}`];
  return parts.join(' ');
}

/**
 * Decide on one decoded ClientMessage: which operation, whether a granted group holds it, and
 * the message rewritten to the invocation's scope (see the module comment).
 */
export function admit(env: Envelope, scope: DoorScope): Admission {
  const m = member(env);
  if (!m) return { ok: false, op: '(empty)', refused: 'empty client message' };
  let op = m.name;
  let body = m.body;
  if (op === 'berm') {
    const inner = member(body as Envelope);
    if (!inner) return { ok: false, op: 'berm', refused: 'empty berm message' };
    op = inner.name;
    body = inner.body;
  }
  const group = GROUP_OF.get(op);
  if (!group || !scope.groups.has(group)) {
    const why = NEVER[op]
      ? `${op} is never grantable: ${NEVER[op]}`
      : group
        ? `${op} needs ${group}`
        : `${op} is in no group`;
    return { ok: false, op, refused: `${NO_GROUP} (${why})` };
  }
  const a = scope.authority;
  const refuse = (why: string): Admission => ({ ok: false, op, refused: `${op}: ${why}` });
  const b: Plain = { ...body };
  let note = scopeText(a);

  switch (op) {
    case 'send':
    case 'stream': {
      const asked = str(b.agent);
      const own = a.agent;
      const other = asked !== '' && asked !== own;
      if (other) {
        const granted = scope.agents ?? [];
        if (!granted.includes('*') && !granted.includes(asked)) {
          return refuse(
            `agent ${asked} is not the invocation's agent (${own ?? 'none'}) and the declaration grants no other (key "agents")`,
          );
        }
        b.agent = asked;
        if (str(b.session_handle) === '') b.session_handle = `berm:${scope.harness}:${asked}`;
        if (typeof b.sender !== 'string' || b.sender === '') b.sender = harnessTarget(scope.harness);
        note = `agent=${asked} (granted) session=${str(b.session_handle)}`;
      } else {
        if (!own) return refuse('the invocation carries no agent and the message names none');
        const session = a.session ?? `berm:${scope.harness}`;
        if (str(b.session_handle) !== '' && b.session_handle !== session) {
          return refuse(`session ${str(b.session_handle)} is not the invocation's session (${session})`);
        }
        const sender = a.sender ?? harnessTarget(scope.harness);
        if (typeof b.sender === 'string' && b.sender !== '' && b.sender !== sender) {
          return refuse(`sender ${b.sender} is not the invocation's sender (${sender})`);
        }
        b.agent = own;
        b.session_handle = session;
        b.sender = sender;
      }
      if (op === 'stream' && typeof b.guest === 'string' && b.guest !== '') {
        const granted = scope.agents ?? [];
        if (!granted.includes('*') && !granted.includes(b.guest)) {
          return refuse(`guest agent ${b.guest} is not granted (key "agents")`);
        }
      }
      break;
    }
    case 'search_sessions':
    case 'list_conversations':
    case 'list_active_conversations': {
      if (!a.agent) return refuse('the invocation carries no agent to scope the search to');
      b.agent = a.agent;
      b.sender = a.sender ?? '';
      break;
    }
    case 'get_conversation_history':
      if (!a.agent) return refuse('the invocation carries no agent to scope the history to');
      break;
    case 'get_skill':
      if (scope.skills && !scope.skills.includes(str(b.name))) {
        return refuse(`skill not available: ${str(b.name)}`);
      }
      break;
    case 'subscribe_event': {
      const target = str(b.target_agent);
      const self = harnessTarget(scope.harness);
      if (target !== '' && target !== self) {
        return refuse(`a harness subscribes only itself (target_agent "${self}" or empty), not ${target}`);
      }
      if (str(b.source) === '') return refuse('source is empty');
      b.target_agent = self;
      break;
    }
    case 'publish_event':
      if (str(b.source) === '') return refuse('source is empty');
      break;
    case 'schedule_wake':
    case 'list_wakes': {
      const h = str(b.harness);
      if (h !== '' && h !== scope.harness) {
        return refuse(`a harness schedules only itself (harness "${scope.harness}" or empty), not ${h}`);
      }
      b.harness = scope.harness;
      if (op === 'schedule_wake') {
        const entry = str(b.entry);
        if (entry !== '' && entry !== 'on_wake') return refuse(`a wake reaches on_wake, not ${entry}`);
        b.entry = 'on_wake';
      }
      break;
    }
    default:
      break;
  }
  const message: Envelope =
    m.name === 'berm' ? { msg: 'berm', berm: { msg: op, [op]: b } } : { msg: op, [op]: b };
  return { ok: true, op, group, message, note };
}

function fail(code: number, message: string): Uint8Array {
  return encodeServer('error', { code, message });
}

/** Fold a stream's events into one SendResponse (or the error that ended it). */
function foldStream(replies: Envelope[]): Uint8Array {
  let agent = '';
  let content = '';
  for (const r of replies) {
    if (r.msg === 'error') return encode(serverType(), r);
    const ev = (r.stream ?? {}) as Plain;
    const kind = typeof ev.event === 'string' ? ev.event : undefined;
    const body = (kind ? ev[kind] : undefined) as Plain | undefined;
    if (kind === 'start') agent = str(body?.agent);
    else if (kind === 'chunk') content += str(body?.content);
    else if (kind === 'end') {
      if (str(body?.error) !== '') return fail(500, str(body?.error));
      return encodeServer('response', {
        agent: str(body?.agent) || agent,
        content,
        model: str(body?.model),
        ...(body?.usage ? { usage: body.usage } : {}),
      });
    }
  }
  return fail(502, 'the stream ended without an end event');
}

function skillsOf(info: Plain | undefined): string[] | undefined {
  const s = info?.skills;
  return Array.isArray(s) ? s.filter((x): x is string => typeof x === 'string') : undefined;
}

/**
 * The skills the call may reach: the declaration's, else the invocation agent's (asked of the
 * daemon; an agent naming none is unrestricted), else none. Undefined means unrestricted.
 */
function allowedSkills(scope: DoorScope, env: DoorEnv): { skills?: readonly string[] } | { error: string } {
  if (scope.skills) return { skills: scope.skills };
  const agent = scope.authority.agent;
  if (!agent) return { skills: [] };
  if (!env.transport) return { error: 'the protocol is not connected yet' };
  const r = env.transport(encode(clientType(), { list_agents: {} }), false);
  if (!r.ok) return { error: r.error };
  const reply = decodeServer(r.replies[0] ?? new Uint8Array(0));
  const list = ((reply.agent_list as Plain | undefined)?.agents ?? []) as Plain[];
  const info = list.find((x) => x.id === agent);
  if (!info) return { skills: [] };
  const skills = skillsOf(info) ?? [];
  return skills.length === 0 ? {} : { skills };
}

/**
 * Shape the daemon's answer for the guest (see the module comment, item 4).
 * @returns the encoded ServerMessage the guest receives, or an error reply
 */
function shape(op: string, replies: Uint8Array[], scope: DoorScope, env: DoorEnv): WireReply {
  let decoded: Envelope[];
  try {
    decoded = replies.map((r) => decodeServer(r));
  } catch (e) {
    return { error: `the agent daemon sent an undecodable reply: ${(e as Error).message}` };
  }
  if (decoded.length === 0) return { error: 'the agent daemon returned no reply' };
  if (op === 'stream') {
    for (const r of decoded) {
      if (r.msg !== 'stream' && r.msg !== 'error')
        return { error: `unexpected ${r.msg ?? 'empty'} reply to stream` };
    }
    return { fields: [foldStream(decoded)] };
  }
  const reply = decoded[0]!;
  if (reply.msg === 'error') return { fields: [encode(serverType(), reply)] };
  if (!REPLIES[op]?.includes(reply.msg ?? '')) {
    return {
      error: `the agent daemon answered ${op} with ${reply.msg ?? 'an empty message'}; not passed on`,
    };
  }
  const a = scope.authority;
  switch (reply.msg) {
    case 'agent_info':
      (reply.agent_info as Plain).config = '';
      break;
    case 'agent_list':
      for (const info of ((reply.agent_list as Plain).agents ?? []) as Plain[]) info.config = '';
      break;
    case 'skill_list': {
      const allowed = allowedSkills(scope, env);
      if ('error' in allowed) return { error: allowed.error };
      if (allowed.skills) {
        const list = reply.skill_list as Plain;
        list.skills = ((list.skills ?? []) as Plain[]).filter((s) => allowed.skills!.includes(str(s.name)));
      }
      break;
    }
    case 'session_hits': {
      const list = reply.session_hits as Plain;
      list.hits = ((list.hits ?? []) as Plain[]).filter((h) => h.agent_id === a.agent);
      break;
    }
    case 'conversation_list':
    case 'active_conversations': {
      const list = reply[reply.msg] as Plain;
      list.conversations = ((list.conversations ?? []) as Plain[]).filter((c) => c.agent_id === a.agent);
      break;
    }
    case 'conversation_history':
      if ((reply.conversation_history as Plain).agent_id !== a.agent) {
        return { fields: [fail(403, 'that conversation is not the invocation agent’s')] };
      }
      break;
    default:
      break;
  }
  return { fields: [encode(serverType(), reply)] };
}

/** Serve an admitted message from berm's own backends (wakes, harness subscriptions). */
function serveLocal(adm: Extract<Admission, { ok: true }>, scope: DoorScope, env: DoorEnv): WireReply | null {
  const body = (
    adm.message.msg === 'berm' ? (adm.message.berm as Plain)[adm.op] : adm.message[adm.op]
  ) as Plain;
  const now = env.now ?? Date.now;
  switch (adm.op) {
    case 'schedule_wake': {
      if (!env.wakes) return { refused: 'schedule_wake: no due-set is connected to this door' };
      const at = Number(body.at_ms ?? 0);
      const delay = Number(body.delay_ms ?? 0);
      const atMs = at > 0 ? at : now() + delay;
      if (!Number.isSafeInteger(atMs))
        return { refused: `schedule_wake: instant ${atMs} is not a safe integer` };
      const r = env.wakes.arm({
        harness: scope.harness,
        entry: 'on_wake',
        atMs,
        payload: str(body.payload),
        ...(str(body.id) !== '' ? { id: str(body.id) } : {}),
        authority: scope.authority,
        ...(scope.chain ? { chain: scope.chain } : {}),
      });
      if ('refused' in r) return { refused: `schedule_wake: ${r.refused}` };
      return { fields: [encodeServer('berm', { wake: r })] };
    }
    case 'cancel_wake': {
      if (!env.wakes) return { refused: 'cancel_wake: no due-set is connected to this door' };
      const id = str(body.id);
      const cancelled = env.wakes.cancel(scope.harness, id);
      return { fields: [encodeServer('berm', { cancelled: { id, cancelled } })] };
    }
    case 'list_wakes': {
      if (!env.wakes) return { refused: 'list_wakes: no due-set is connected to this door' };
      return { fields: [encodeServer('berm', { wake_list: { wakes: env.wakes.list(scope.harness) } })] };
    }
    case 'subscribe_event': {
      if (!env.events) return { refused: 'subscribe_event: no event bus is connected to this door' };
      const sub = env.events.subscribe(scope.harness, str(body.source), body.once === true, scope.authority);
      if ('refused' in sub) return { refused: `subscribe_event: ${sub.refused}` };
      return { fields: [encodeServer('subscription_info', sub)] };
    }
    case 'unsubscribe_event': {
      if (!env.events) return { refused: 'unsubscribe_event: no event bus is connected to this door' };
      const id = String(body.id ?? '0');
      if (!env.events.unsubscribe(scope.harness, id)) {
        return { fields: [fail(404, `no subscription ${id} targets harness ${scope.harness}`)] };
      }
      return { fields: [encodeServer('pong', {})] };
    }
    case 'publish_event': {
      if (!env.events) return null; // the daemon's bus only
      const r = env.events.publish(str(body.source), str(body.payload), {
        harness: scope.harness,
        ...(scope.chain ? { chain: scope.chain } : {}),
      });
      if (typeof r !== 'number') return { refused: `publish_event: ${r.refused}` };
      return null; // also forwarded to the daemon's own bus
    }
    default:
      return null;
  }
}

/** Source of the event berm publishes to harness subscribers when an agent's run completes. */
export function doneSource(agent: string): string {
  return `agent:${agent}:done`;
}

/**
 * The agent daemon announces a finished run on its own bus (`agent:<name>:done`), which cannot
 * deliver to a harness. When a send through the door completes, the door therefore publishes
 * `agent:<ULID>:done` (payload: the answer) to harness subscribers itself, in the sending
 * invocation's chain, so a send -> done -> notify -> send loop is bounded by the chain.
 */
function mirrorDone(reply: { fields: Uint8Array[] }, scope: DoorScope, env: DoorEnv): void {
  if (!env.events) return;
  const m = decodeServer(reply.fields[0]!);
  if (m.msg !== 'response') return;
  const r = m.response as Plain;
  env.events.publish(doneSource(str(r.agent)), str(r.content), {
    harness: scope.harness,
    ...(scope.chain ? { chain: scope.chain } : {}),
  });
}

/**
 * Serve one protocol call: decode `request` (an encoded ClientMessage), admit it, serve it and
 * shape the answer. Never throws: every outcome is a wire reply, and each is logged.
 * @param via the host function that carried the call (for the log)
 */
export function callDoor(
  request: Uint8Array,
  scope: DoorScope,
  env: DoorEnv,
  via = CALL_WIRE_NAME,
): WireReply {
  const t0 = performance.now();
  let op = '(undecodable)';
  let note = scopeText(scope.authority);
  const done = (reply: WireReply): WireReply => {
    if (env.log) {
      const outcome = 'fields' in reply ? 'ok' : 'refused' in reply ? 'refused' : 'error';
      try {
        env.log({
          harness: scope.harness,
          op,
          scope: note,
          outcome,
          ...(outcome !== 'ok'
            ? { reason: 'refused' in reply ? reply.refused : (reply as { error: string }).error }
            : {}),
          ms: performance.now() - t0,
          via,
        });
      } catch {
        /* a failing log sink never fails the call */
      }
    }
    return reply;
  };
  try {
    let env0: Envelope;
    try {
      env0 = decode(clientType(), request);
    } catch (e) {
      const why = e instanceof ProtocolDecodeError ? e.message : String(e);
      return done({ refused: `${via}: ${why}` });
    }
    const adm = admit(env0, scope);
    op = adm.op;
    if (!adm.ok) return done({ refused: `${via}: ${adm.refused}` });
    note = adm.note;
    if (env.limiter && !env.limiter.take(scope.harness)) {
      return done({
        refused: `${via}: rate limit of harness ${scope.harness} reached (${env.limiter.rate.perSecond}/s, burst ${env.limiter.rate.burst})`,
      });
    }
    const local = serveLocal(adm, scope, env);
    if (local) return done(local);
    if (adm.op === 'get_skill' && !scope.skills) {
      const allowed = allowedSkills(scope, env);
      if ('error' in allowed) return done({ error: `${via}: ${allowed.error}` });
      const name = str(((adm.message.get_skill ?? {}) as Plain).name);
      if (allowed.skills && !allowed.skills.includes(name)) {
        return done({ refused: `${via}: get_skill: skill not available: ${name}` });
      }
    }
    if (!env.transport) return done({ refused: `${via}: the protocol is not connected yet` });
    const r = env.transport(encode(clientType(), adm.message), adm.op === 'stream');
    if (!r.ok) {
      return done(
        r.notConnected ? { refused: `${via}: ${r.error}` } : { error: `${via}: ${op}: ${r.error}` },
      );
    }
    const shaped = shape(adm.op, r.replies, scope, env);
    if ('fields' in shaped && (adm.op === 'send' || adm.op === 'stream')) mirrorDone(shaped, scope, env);
    return done(
      'fields' in shaped ? shaped : { error: `${via}: ${op}: ${(shaped as { error: string }).error}` },
    );
  } catch (e) {
    return done({ error: `${via}: internal error: ${e instanceof Error ? e.message : String(e)}` });
  }
}

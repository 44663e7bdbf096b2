/**
 * The protocol capability: the door (./door.ts) as host functions, one capability per grantable
 * group (`protocol:read`, `protocol:history`, `protocol:sessions`, `protocol:send`,
 * `protocol:schedule`, `protocol:events`), so the linker a harness gets is its grant:
 *
 * - `crabtalk.protocol.call` (upstream's shape), linked when any group is granted:
 *   one field, an encoded ClientMessage -> one field, the encoded ServerMessage.
 * - `crabtalk.protocol.<operation>` (one per operation of each granted group, absent otherwise):
 *   zero or one field, the encoded inner message (e.g. a SendMsg; none for an empty message such
 *   as Ping) -> one field, the encoded ServerMessage.
 *
 * Both wrap the request into a ClientMessage and pass it to the same {@link callDoor}, so the
 * check, the scoping, the redaction, the log and the rate limit are one code path.
 *
 * Socket I/O with the agent daemon runs in the synchronous bridge's worker (a worker thread
 * plus Atomics.wait, src/sync/bridge.ts) with a per-call timeout, never past the
 * guest's call deadline, so a daemon that never answers costs the call at most that and an error
 * reply, and the guest's thread is not wedged. The daemon's endpoint comes from {@link configureProtocol} or the environment variable
 * BERM_AGENT_DAEMON (`unix:/path`, `/path` or `host:port`), which every worker thread sees.
 */
import { runSync } from '../sync/bridge.js';
import { textField, fieldText } from '../wire/fields.js';
import {
  callDeadline,
  deadlinePassed,
  defineCapability,
  timeoutBefore,
  type Capability,
  type CapabilityContext,
  type CapabilityReply,
  type GrantSpec,
} from '../capabilities/types.js';
import {
  RateLimiter,
  callDoor,
  DEFAULT_RATE,
  type DoorEnv,
  type DoorLogEntry,
  type EventBackend,
  type Limiter,
  type RateLimit,
  type ServiceRequest,
  type SubscriptionView,
  type Transport,
  type WakeBackend,
  type WakeView,
} from './door.js';
import { CALL_WIRE_NAME, GROUPS, PROTOCOL_SERVICE, opWireName } from './groups.js';
import { bermClientType, clientType } from './schema.js';
import type { ProtocolCallArgs, ProtocolCallResult } from './client-job.js';

const JOB = new URL(`./client-job${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url);

/** The door's settings (per thread; see {@link configureProtocol}). */
export interface ProtocolConfig {
  /** agent daemon endpoint; default: $BERM_AGENT_DAEMON; none means "not connected yet" */
  endpoint?: string;
  /** budget of one daemon call, ms (default 10,000) */
  timeoutMs?: number;
  /** per-harness rate limit (default {@link DEFAULT_RATE}) */
  rate?: RateLimit;
  /** access log sink (default: one line on stderr per call; set to null for none) */
  log?: ((entry: DoorLogEntry) => void) | null;
  /** the due-set, when not reached through the capability context's schedule host */
  wakes?: WakeBackend;
  /** the event bus towards harnesses */
  events?: EventBackend;
}

/** Default budget of one daemon call, ms. */
export const DEFAULT_PROTOCOL_TIMEOUT_MS = 10_000;

let config: ProtocolConfig = {};
let limiter = new RateLimiter(DEFAULT_RATE);

/**
 * Set the door's settings for this thread (replaces earlier ones; rate buckets restart).
 * Fields left out take their defaults.
 */
export function configureProtocol(c: ProtocolConfig): void {
  config = { ...c };
  limiter = new RateLimiter(c.rate ?? DEFAULT_RATE);
}

/** The settings in force (a copy). */
export function protocolConfig(): ProtocolConfig {
  return { ...config };
}

/** One access-log line as text: `berm door: harness=h op=send outcome=ok 1.2ms agent=...`. */
export function formatDoorLog(e: DoorLogEntry): string {
  const reason = e.reason ? ` (${e.reason})` : '';
  return `berm door: harness=${e.harness} op=${e.op} via=${e.via} outcome=${e.outcome}${reason} ${e.ms.toFixed(1)}ms ${e.scope}`;
}

function defaultLog(e: DoorLogEntry): void {
  process.stderr.write(`${formatDoorLog(e)}\n`);
}

function endpoint(): string | undefined {
  const e = config.endpoint ?? process.env.BERM_AGENT_DAEMON;
  return e && e.trim() !== '' ? e : undefined;
}

/**
 * The synchronous transport to the daemon at `where` through the bridge worker. Each daemon call
 * gets `timeoutMs`, cut to what is left before `deadline` (ms since the Unix epoch: the guest's
 * call deadline, CALL_DEADLINE) when one is given; the bridge's worker start-up counts against the
 * deadline too (src/sync/bridge.ts runSync). A call the deadline cut fails with `the call's deadline
 * passed while waiting for the agent daemon (waited N ms: ...)`.
 * @param timeoutMs the budget of one daemon call, ms
 */
export function bridgeTransport(where: string, timeoutMs: number, deadline?: number): Transport {
  return (request, stream) => {
    const t0 = Date.now();
    const own = timeoutBefore(deadline, timeoutMs);
    const args: ProtocolCallArgs = { endpoint: where, request, stream, timeoutMs: own };
    const r = runSync<ProtocolCallResult>(JOB, 'protocolCall', args, own, deadline);
    const v: ProtocolCallResult = r.ok ? r.value : { ok: false, error: r.error };
    if (v.ok) return { ok: true, replies: v.replies };
    const late = deadlinePassed(deadline, t0, 'the agent daemon', v.error);
    if (late !== null) return { ok: false, error: late };
    return { ok: false, error: v.error, ...(v.notConnected ? { notConnected: true } : {}) };
  };
}

/** The runtime's due-set host as the schedule capability reaches it (arm and cancel). */
interface ScheduleHostLike {
  arm(req: { delayMs: number; at?: number; payload: string; id: string | null }): CapabilityReply;
  cancel(id: string): CapabilityReply;
}

/**
 * The due-set as the door reaches it from `ctx`: the queue's protocol service when present, else
 * the schedule host (ctx.schedule), else none. Both arm at the door's absolute instant (`atMs`)
 * exactly; the schedule host is given `at` (and the delay it is from one clock read, for a host
 * that keeps only delays), and the wake reported is at that instant.
 */
function wakesFrom(ctx: CapabilityContext): WakeBackend | undefined {
  const ask = serviceOf(ctx);
  if (ask) {
    // the queue's own thread arms it: the exact instant, the invocation's authority and chain
    return {
      arm(w) {
        const v = ask({
          op: 'arm',
          at: w.atMs,
          payload: w.payload,
          ...(w.id !== undefined ? { id: w.id } : {}),
          authority: w.authority,
        }) as WakeView | { refused: string };
        return v;
      },
      cancel: (_h, id) => ask({ op: 'cancel', id }) === true,
      list: () => {
        const v = ask({ op: 'list_wakes' });
        return Array.isArray(v) ? (v as WakeView[]) : [];
      },
    };
  }
  const host = (ctx as { schedule?: ScheduleHostLike }).schedule;
  if (!host) return undefined;
  const text = (r: CapabilityReply): string | { refused: string } =>
    'fields' in r
      ? fieldText(r.fields[0] ?? new Uint8Array(0))
      : { refused: 'refused' in r ? r.refused : r.error };
  return {
    arm(w): WakeView | { refused: string } {
      const delayMs = Math.max(0, Math.round(w.atMs - Date.now()));
      const id = text(host.arm({ delayMs, at: w.atMs, payload: w.payload, id: w.id ?? null }));
      if (typeof id !== 'string') return id;
      return { id, harness: w.harness, entry: w.entry, at_ms: w.atMs, payload: w.payload };
    },
    cancel(_harness, id) {
      return text(host.cancel(id)) === '1';
    },
    list() {
      return [];
    },
  };
}

/**
 * The door's service on the queue's thread (./attach.ts), through ctx.service: JSON in one field,
 * or the service's refusal / error.
 */
function serviceOf(ctx: CapabilityContext): ((req: ServiceRequest) => unknown) | undefined {
  const service = ctx.service;
  if (!service) return undefined;
  return (req) => {
    const r = service(PROTOCOL_SERVICE, req);
    if ('fields' in r) return JSON.parse(fieldText(r.fields[0] ?? new Uint8Array(0))) as unknown;
    return { refused: 'refused' in r ? r.refused : r.error };
  };
}

/** The harness event bus, reached through the queue's thread. */
function eventsFrom(ctx: CapabilityContext): EventBackend | undefined {
  const ask = serviceOf(ctx);
  if (!ask) return undefined;
  const refusedOf = (v: unknown) =>
    v && typeof v === 'object' && 'refused' in v ? String((v as { refused: unknown }).refused) : null;
  return {
    subscribe: (_h, source, once, authority) => {
      const v = ask({ op: 'subscribe', source, once, authority });
      const why = refusedOf(v);
      return why !== null ? { refused: why } : (v as SubscriptionView);
    },
    unsubscribe: (_h, id) => ask({ op: 'unsubscribe', id }) === true,
    list: () => {
      const v = ask({ op: 'list_subscriptions' });
      return Array.isArray(v) ? (v as SubscriptionView[]) : [];
    },
    publish: (source, payload) => {
      const v = ask({ op: 'publish', source, payload });
      const why = refusedOf(v);
      return why !== null ? { refused: why } : Number(v);
    },
  };
}

/**
 * The rate limit kept on the queue's thread, so that every worker thread draws on one bucket per
 * harness (a thread-local bucket would multiply the limit by the pool size).
 */
function sharedLimiter(ask: (req: ServiceRequest) => unknown): Limiter {
  let rate: RateLimit = DEFAULT_RATE;
  return {
    get rate() {
      return rate;
    },
    take() {
      const v = ask({ op: 'take' }) as { ok?: boolean; rate?: RateLimit } | { refused: string };
      if ('rate' in v && v.rate) rate = v.rate;
      return 'ok' in v ? v.ok === true : true; // no service answer: the queue's own limits still apply
    },
  };
}

/** The door's environment for one call from `ctx`. */
function envOf(ctx: CapabilityContext): DoorEnv {
  const where = endpoint();
  const wakes = config.wakes ?? wakesFrom(ctx);
  const events = config.events ?? eventsFrom(ctx);
  const log = config.log === null ? undefined : (config.log ?? defaultLog);
  return {
    ...(where
      ? {
          transport: bridgeTransport(
            where,
            config.timeoutMs ?? DEFAULT_PROTOCOL_TIMEOUT_MS,
            callDeadline(ctx),
          ),
        }
      : {}),
    ...(wakes ? { wakes } : {}),
    ...(events ? { events } : {}),
    ...(log ? { log } : {}),
    limiter: config.rate === undefined && serviceOf(ctx) ? sharedLimiter(serviceOf(ctx)!) : limiter,
  };
}

/** The granted protocol groups of a context. */
function groupsOf(ctx: CapabilityContext): Set<string> {
  return new Set((ctx.granted ?? []).filter((c) => c in GROUPS));
}

/** Wrap an encoded inner message as ClientMessage field `id` (length-delimited). */
function wrap(id: number, inner: Uint8Array): Uint8Array {
  const head: number[] = [];
  const varint = (v: number) => {
    while (v > 0x7f) {
      head.push((v & 0x7f) | 0x80);
      v >>>= 7;
    }
    head.push(v);
  };
  varint((id << 3) | 2);
  varint(inner.length);
  const out = new Uint8Array(head.length + inner.length);
  out.set(head, 0);
  out.set(inner, head.length);
  return out;
}

/** The field number of `op` in ClientMessage, or in BermClientMessage for berm's own operations. */
function fieldNumbers(op: string): { outer: number; inner?: number } {
  const f = clientType().fields[op];
  if (f) return { outer: f.id };
  return { outer: clientType().fields.berm!.id, inner: bermClientType().fields[op]!.id };
}

function scopeOf(ctx: CapabilityContext) {
  return {
    harness: ctx.harness,
    groups: groupsOf(ctx),
    authority: ctx.authority ?? {},
    ...(Array.isArray(ctx.grant.skills) ? { skills: ctx.grant.skills as string[] } : {}),
    ...(Array.isArray(ctx.grant.agents) ? { agents: ctx.grant.agents as string[] } : {}),
    chain: { depth: ctx.depth },
  };
}

function callHandler(fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply {
  if (fields.length !== 1) {
    return { refused: `${CALL_WIRE_NAME}: expected fields (client message), got ${fields.length} field(s)` };
  }
  return callDoor(fields[0]!, scopeOf(ctx), envOf(ctx), CALL_WIRE_NAME);
}

function opHandler(op: string): (fields: Uint8Array[], ctx: CapabilityContext) => CapabilityReply {
  const wire = opWireName(op);
  let n: { outer: number; inner?: number } | undefined; // looked up on first use (lazy schema)
  return (fields, ctx) => {
    n ??= fieldNumbers(op);
    if (fields.length > 1) {
      return { refused: `${wire}: expected fields (${op} message?), got ${fields.length} field(s)` };
    }
    const inner = fields[0] ?? new Uint8Array(0);
    const request = n.inner === undefined ? wrap(n.outer, inner) : wrap(n.outer, wrap(n.inner, inner));
    return callDoor(request, scopeOf(ctx), envOf(ctx), wire);
  };
}

/** A ULID: 26 Crockford base-32 characters. */
const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/** Declaration keys of the groups that take arguments. */
const GRANTS: Readonly<Record<string, GrantSpec>> = {
  'protocol:read': {
    schema: {
      type: 'object',
      properties: { skills: { type: 'array', items: { type: 'string', minLength: 1 } } },
    },
    fixes: { skills: 'write skills = ["summarize"] (the skills the declaring agent declared)' },
    prepare: (v) => ({
      grant: Array.isArray(v.skills) ? { skills: [...new Set(v.skills as string[])].sort() } : {},
      problems: [],
    }),
  },
  'protocol:send': {
    schema: {
      type: 'object',
      properties: { agents: { type: 'array', items: { type: 'string' } } },
    },
    fixes: { agents: 'write agents = ["01JD3R9F2H6P8S4A7Y3E5G1KQW"] (ULIDs), or ["*"] for any agent' },
    prepare: (v) => {
      if (!Array.isArray(v.agents)) return { grant: {}, problems: [] };
      const agents = [...new Set(v.agents as string[])].sort();
      const problems = agents
        .filter((a) => a !== '*' && !ULID.test(a))
        .map((a) => ({
          key: 'agents',
          problem: `agent ${JSON.stringify(a)} is not a ULID`,
          fix: 'name agents by ULID (resolve a name with get_agent), or "*" for any agent',
        }));
      return { grant: { agents }, problems };
    },
  },
};

/** The single door's handler, shared by every group (one binding answering for all of them). */
const CALL_HANDLER = callHandler;

/** The capability of one group: `crabtalk.protocol.call` and its operations' host functions. */
function groupCapability(group: string): Capability {
  const calls: Capability['calls'] = { [CALL_WIRE_NAME]: CALL_HANDLER };
  for (const op of GROUPS[group]!) calls[opWireName(op)] = opHandler(op);
  return defineCapability({ name: group, calls, ...(GRANTS[group] ? { grant: GRANTS[group] } : {}) });
}

/** Every protocol group as a capability, by declaration name. */
export const PROTOCOL_CAPABILITIES: readonly Capability[] = Object.keys(GROUPS).map(groupCapability);

/** Encode text as one request field (convenience for tests and embedders). */
export const field = textField;

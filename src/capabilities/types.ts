/**
 * Shapes shared by every capability. A capability is a set of synchronous
 * host-call handlers keyed by wire name; the harness layer decodes the guest's request fields,
 * calls the handler and stages the reply (src/wire/fields.ts).
 */
import { WireError, textField, type WireReply } from '../wire/fields.js';

export { stageReply } from '../wire/fields.js';

/** What a handler returns: the wire's reply shape (src/wire/fields.ts WireReply). */
export type CapabilityReply = WireReply;

/**
 * One harness's grant, from the operator's declaration only (never from the harness). A setting
 * that is absent grants nothing: no `root` reaches no path, no `hosts` reaches no host. The keys
 * are the declaration keys of the granted capabilities' grant schemas ({@link GrantSpec}); the
 * built-ins' keys are typed here, a capability added later reads its own keys through the index
 * signature (values already validated by its schema and prepared by its `prepare`).
 */
export interface Grant {
  /** fs, exec: absolute host directory (symlinks resolved) that every path and cwd must lie inside */
  root?: string;
  /** http: host names, exact (case-insensitive) or `*.domain` (subdomains only), or IP literals */
  hosts?: string[];
  /** call: harness names this harness may call through berm.call */
  callees?: string[];
  /** storage: SQLite database file; absent means one in-memory database per process */
  database?: string;
  /** keys of other capabilities' grant schemas */
  [key: string]: unknown;
}

/**
 * Per-call bounds by name (sizes in bytes, times in ms). Each capability module declares its own
 * limits and their defaults ({@link CapabilityDefinition.limits}); {@link DEFAULT_LIMITS} gathers
 * every defined capability's defaults. An override names a limit of some capability.
 */
export interface CapabilityLimits {
  [name: string]: number;
}

const defaultLimits: Record<string, number> = {};
const limitOwner = new Map<string, string>();

/**
 * Default of every limit of every capability defined so far (each module registers its own when
 * it is loaded; the registry in ./index.ts loads all built-ins). Read-only for callers.
 */
export const DEFAULT_LIMITS: Readonly<CapabilityLimits> = defaultLimits;

/** Every known limit name and the capability that declares it. */
export function limitOwners(): ReadonlyMap<string, string> {
  return limitOwner;
}
/** Everything a handler may know about the call it serves. */
export interface CapabilityContext {
  /** the calling harness's declared name (storage namespace, call chain) */
  harness: string;
  grant: Grant;
  /** berm.call chain depth of the running tool call; 0 for a call from outside */
  depth: number;
  /** overrides of {@link DEFAULT_LIMITS} */
  limits?: Partial<CapabilityLimits>;
  /**
   * Provided by the runtime: run `tool` of `harness` with `argsJson` at chain depth `depth`, in a
   * fresh instance, synchronously. Absent when the runtime cannot chain calls.
   */
  callTool?: (harness: string, tool: string, argsJson: string, depth: number) => CapabilityReply;
  /**
   * Provided by the runtime that owns a due-set: the schedule capability's calls, already parsed
   * and shape-checked, made on behalf of `harness`. Absent when the runtime has no due-set.
   */
  schedule?: ScheduleHost;
  /**
   * The invocation's instant, ms since the Unix epoch, as the runtime fixed it when it started the
   * invocation: the `now` it wrote into the record for on_wake / on_notify, the start of a tool
   * call. The schedule capability counts delays from it (docs/wakes.md "Which now a delay counts
   * from"), so a guest's arithmetic on its record's `now` is exact. Absent outside a runtime.
   */
  now?: number;
  /** the capability names the declaration grants this harness (sorted) */
  granted?: readonly string[];
  /**
   * Who the invocation acts for (agent ULID, session handle, sender), from the daemon API or MCP
   * call and inherited by chains and wakes; absent for a call that carries none.
   */
  authority?: { agent?: string; session?: string; sender?: string };
  /**
   * Provided by the runtime that owns the queue: ask a named service on the queue's thread
   * synchronously (a capability whose state lives there, e.g. the protocol door's event bus).
   * `request` crosses threads by structured clone. Absent when there is no such runtime.
   */
  service?: (name: string, request: unknown) => CapabilityReply;
}

/** The due-set as the schedule capability reaches it; every method answers, never throws. */
export interface ScheduleHost {
  /**
   * arm the calling harness's on_wake at now + delayMs, or at `at` (ms since the Unix epoch) when
   * given: that instant exactly, a past one due at once (delayMs is then only what `at` was from
   * the caller's clock, for a host that keeps no absolute instants); reply ok(id)
   */
  arm(req: { delayMs: number; at?: number; payload: string; id: string | null }): CapabilityReply;
  /** cancel a wake of the calling harness; reply ok("1") or ok("0") */
  cancel(id: string): CapabilityReply;
  /**
   * call harness.tool(args) at now + delayMs, or at `at` (ms since the Unix epoch) when given, as
   * for {@link arm}; replaces the caller's pending one; reply ok(id)
   */
  callAfter(req: {
    delayMs: number;
    at?: number;
    harness: string;
    tool: string;
    args: string;
  }): CapabilityReply;
}

/** A handler: synchronous, never throws for bad guest input (returns error or refused instead). */
export type CapabilityHandler = (fields: Uint8Array[], ctx: CapabilityContext) => CapabilityReply;

/** A JSON Schema (draft-07, as ajv 8 validates by default). */
export type JsonSchema = Record<string, unknown>;

/** Where a grant is being prepared: the declaration's folder and whether the host may be checked. */
export interface GrantEnv {
  /** absolute folder of the declaration file; relative paths resolve against it */
  dir: string;
  /** false when only the file's shape is linted: do not look at the host's files */
  checkFiles: boolean;
}

/** A problem found while preparing a grant; the declaration loader adds the file and line. */
export interface GrantProblem {
  /** the declaration key at fault (its line is reported) */
  key: string;
  problem: string;
  fix: string;
}

/**
 * The declaration keys a capability owns and how they become its part of the {@link Grant}.
 * The loader (src/config/declarations.ts) validates the entry's values of these keys with ajv
 * against `schema` whenever the capability is granted, reports a key set without any capability
 * owning it being granted, then calls `prepare`.
 */
export interface GrantSpec {
  /**
   * JSON Schema of an object holding this capability's keys: `properties` names the keys (each a
   * flat key of a `[[harnesses]]` entry), `required` those without which the grant is refused.
   * Two capabilities may own the same key (fs and exec share `root`): give them the same schema.
   */
  schema: JsonSchema & { type: 'object'; properties: Record<string, JsonSchema>; required?: string[] };
  /** per key: the fix printed when its value is missing or fails the schema */
  fixes?: Record<string, string>;
  /**
   * Normalise the validated values into grant values (resolve paths against `env.dir`, sort,
   * lowercase) and check them against the host; returns the values and any problems. Absent: the
   * values are taken as they are.
   */
  prepare?: (
    values: Record<string, unknown>,
    env: GrantEnv,
  ) => { grant: Record<string, unknown>; problems: GrantProblem[] };
}

/**
 * A capability as data: everything the declaration loader, the linker, the image identity and the
 * host-call name table need to know about it comes from this one object (see docs/capabilities.md,
 * "Adding a capability"). Build it with {@link defineCapability}.
 */
export interface CapabilityDefinition {
  /** declaration name, e.g. 'fs' (letters, digits, '-' and '_') */
  name: string;
  /** the binding: wire name (e.g. 'berm.fs.read', alias 'crabtalk.fs.read') to handler */
  calls: Record<string, CapabilityHandler>;
  /** the declaration keys this capability owns; absent: none (it takes no arguments) */
  grant?: GrantSpec;
  /** its limits and their defaults, by name (unique across capabilities); absent: none */
  limits?: Readonly<Record<string, number>>;
  /**
   * Grant keys whose values enter the image identity (src/config/declarations.ts imageIdentity).
   * Default: every key of the grant schema. A key that only tunes (never widens or narrows what
   * the harness reaches) may be left out.
   */
  identity?: readonly string[];
}

/** A defined capability: its definition with every derived field filled in. */
export interface Capability extends CapabilityDefinition {
  /** the wire names it answers, sorted (the keys of `calls`) */
  wireNames: readonly string[];
  grant: GrantSpec;
  limits: Readonly<Record<string, number>>;
  identity: readonly string[];
}

/**
 * Check a capability definition and fill in its derived fields; registers its limits' defaults in
 * {@link DEFAULT_LIMITS}.
 * @throws Error when the name or a wire name is malformed, a limit default is not a non-negative
 *   number or is already declared by another capability, or an identity key is not a grant key.
 */
export function defineCapability(def: CapabilityDefinition): Capability {
  // `family:member` names a capability of a family (the protocol door's `protocol:read`)
  if (!/^[A-Za-z0-9_-]+(:[A-Za-z0-9_-]+)?$/.test(def.name))
    throw new Error(`capability name ${JSON.stringify(def.name)} is malformed`);
  const wireNames = Object.keys(def.calls).sort();
  for (const w of wireNames) {
    if (!/^[a-z0-9_-]+(\.[a-z0-9_-]+)+$/.test(w)) {
      throw new Error(`capability ${def.name}: wire name ${JSON.stringify(w)} is malformed`);
    }
  }
  const grant: GrantSpec = def.grant ?? { schema: { type: 'object', properties: {} } };
  const keys = Object.keys(grant.schema.properties);
  const identity = def.identity ?? keys;
  for (const k of identity) {
    if (!keys.includes(k)) throw new Error(`capability ${def.name}: identity key ${k} is not a grant key`);
  }
  const limits = def.limits ?? {};
  for (const [k, v] of Object.entries(limits)) {
    if (typeof v !== 'number' || !(v >= 0)) throw new Error(`capability ${def.name}: limit ${k} is not >= 0`);
    const owner = limitOwner.get(k);
    if (owner !== undefined && owner !== def.name) {
      throw new Error(`capability ${def.name}: limit ${k} is already declared by ${owner}`);
    }
  }
  for (const [k, v] of Object.entries(limits)) {
    limitOwner.set(k, def.name);
    defaultLimits[k] = v;
  }
  return Object.freeze({ ...def, wireNames, grant, limits: Object.freeze({ ...limits }), identity });
}

/**
 * The effective limits of a context for one capability: `defaults` (the capability's own) overlaid
 * with the overrides in `ctx.limits` that name one of its limits.
 */
export function limitsOf<L extends Record<string, number>>(ctx: CapabilityContext, defaults: L): L {
  const out: Record<string, number> = { ...defaults };
  for (const [k, v] of Object.entries(ctx.limits ?? {})) if (k in defaults && v !== undefined) out[k] = v;
  return out as L;
}

/**
 * The limit that bounds a whole tool call rather than one capability: the instant (milliseconds
 * since the Unix epoch) by which the call must be over. Whoever runs the call with a wall-clock
 * budget sets it in the context's limits (the CLI's `--timeout` does); every host call that waits
 * (exec, http, grep, glob) clamps its own timeout to what is left, so a host call cannot carry the
 * tool call past its budget. Absent: no deadline.
 */
export const CALL_DEADLINE = 'callDeadline';

/**
 * A capability's own timeout `ownMs`, clamped to the time left before the call's deadline
 * ({@link CALL_DEADLINE}); at least 1 ms, so a call made after the deadline fails at once.
 */
export function boundedTimeout(ctx: CapabilityContext, ownMs: number): number {
  return timeoutBefore(callDeadline(ctx), ownMs);
}

/**
 * `ownMs` clamped to the time left before `deadline` (ms since the Unix epoch; undefined: none, `ownMs`
 * as it is); at least 1 ms. {@link boundedTimeout} for a caller that holds the deadline, not the context.
 */
export function timeoutBefore(deadline: number | undefined, ownMs: number): number {
  if (deadline === undefined) return ownMs;
  return Math.max(1, Math.min(ownMs, Math.floor(deadline - Date.now())));
}

/**
 * The refusal of a host call whose wait for `what` (e.g. `PostgreSQL`) ended at the call's
 * `deadline`: `the call's deadline passed while waiting for WHAT (waited N ms: ERROR)`, N counted
 * from `t0`; null when there is no deadline or it has not passed (the failure was the wait's own).
 */
export function deadlinePassed(
  deadline: number | undefined,
  t0: number,
  what: string,
  error: string,
): string | null {
  const now = Date.now();
  if (deadline === undefined || now < deadline) return null;
  return `the call's deadline passed while waiting for ${what} (waited ${now - t0} ms: ${error})`;
}

/**
 * The call's deadline ({@link CALL_DEADLINE}), ms since the Unix epoch, or undefined when it has
 * none: what a capability hands the synchronous bridge so that the whole host call, the bridge's
 * worker start-up included, ends by it (src/sync/bridge.ts runSync).
 */
export function callDeadline(ctx: CapabilityContext): number | undefined {
  const deadline = ctx.limits?.[CALL_DEADLINE];
  return deadline !== undefined && Number.isFinite(deadline) ? deadline : undefined;
}

/** A success reply of text fields. */
export function ok(...fields: (string | Uint8Array)[]): CapabilityReply {
  return { fields: fields.map((f) => (typeof f === 'string' ? textField(f) : f)) };
}

/**
 * Run `body`, turning anything it throws into a reply prefixed with the wire name, so nothing
 * unwinds into the guest's ecall: a WireError (malformed request fields, checked before anything
 * runs) becomes a refusal, anything else (a host failure) an error.
 */
export function guarded(wireName: string, body: () => CapabilityReply): CapabilityReply {
  try {
    return body();
  } catch (e) {
    const message = `${wireName}: ${e instanceof Error ? e.message : String(e)}`;
    return e instanceof WireError ? { refused: message } : { error: message };
  }
}

/**
 * Check a request's field count: exactly `min` when `max` is omitted, else within [min, max].
 * @returns a refusal reply naming the expected fields, or null when the count is fine.
 */
export function arity(
  wireName: string,
  fields: Uint8Array[],
  names: string,
  min: number,
  max = min,
): CapabilityReply | null {
  if (fields.length < min || fields.length > max) {
    return { refused: `${wireName}: expected fields (${names}), got ${fields.length} field(s)` };
  }
  return null;
}

/**
 * Shapes shared by every capability (upstream berm issue 6). A capability is a set of synchronous
 * host-call handlers keyed by wire name; the harness layer decodes the guest's request fields,
 * calls the handler and stages the reply (src/wire/fields.ts).
 */
import { WireError, textField, type WireReply } from '../wire/fields.js';

export { stageReply } from '../wire/fields.js';

/** What a handler returns: the wire's reply shape (src/wire/fields.ts WireReply). */
export type CapabilityReply = WireReply;

/**
 * One harness's grant, from the operator's declaration only (never from the harness). A setting
 * that is absent grants nothing: no `root` reaches no path, no `hosts` reaches no host.
 */
export interface Grant {
  /** fs, exec: absolute host directory that every path and cwd must lie inside */
  root?: string;
  /** http: host names, exact (case-insensitive) or `*.domain` (subdomains only), or IP literals */
  hosts?: string[];
  /** call: harness names this harness may call through berm.call */
  callees?: string[];
  /** storage: SQLite database file; absent means one in-memory database per process */
  database?: string;
}

/** Per-call bounds. Every field has a default in {@link DEFAULT_LIMITS}; sizes in bytes, times in ms. */
export interface CapabilityLimits {
  /** fs.read: largest `limit` honoured; bigger requests are clamped */
  fsReadMax: number;
  /** fs.write: largest content accepted */
  fsWriteMax: number;
  /** fs.glob / fs.grep: most directory entries visited per call */
  fsWalkMaxEntries: number;
  /** fs.glob / fs.grep: most result lines */
  fsMaxResults: number;
  /** fs.grep: files bigger than this are skipped */
  grepMaxFileBytes: number;
  /** fs.grep: time budget (the regex runs off-thread so a pathological pattern cannot wedge us) */
  grepTimeoutMs: number;
  /** exec.run: wall-clock budget; at expiry the whole process group is killed */
  execTimeoutMs: number;
  /** exec.run: bytes kept of stdout and of stderr each; more kills the process group */
  execMaxOutput: number;
  /** http.fetch: wall-clock budget of one request, connect to last body byte */
  httpTimeoutMs: number;
  /** http.fetch: largest request body */
  httpMaxRequestBody: number;
  /** http.fetch: largest response body; more aborts the request */
  httpMaxResponseBody: number;
  /** storage: largest key */
  storageMaxKey: number;
  /** storage: largest value */
  storageMaxValue: number;
  /** storage: total bytes of keys and values of one harness */
  storageQuota: number;
  /** storage: SQLite busy timeout */
  storageBusyTimeoutMs: number;
  /** call: deepest chain of berm.call (a top-level tool call has depth 0) */
  maxCallDepth: number;
}

/** Defaults of {@link CapabilityLimits}. */
export const DEFAULT_LIMITS: Readonly<CapabilityLimits> = Object.freeze({
  fsReadMax: 4 * 1024 * 1024,
  fsWriteMax: 4 * 1024 * 1024,
  fsWalkMaxEntries: 100_000,
  fsMaxResults: 10_000,
  grepMaxFileBytes: 8 * 1024 * 1024,
  grepTimeoutMs: 10_000,
  execTimeoutMs: 30_000,
  execMaxOutput: 1024 * 1024,
  httpTimeoutMs: 30_000,
  httpMaxRequestBody: 8 * 1024 * 1024,
  httpMaxResponseBody: 8 * 1024 * 1024,
  storageMaxKey: 1024,
  storageMaxValue: 1024 * 1024,
  storageQuota: 64 * 1024 * 1024,
  storageBusyTimeoutMs: 5_000,
  maxCallDepth: 4,
});

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
}

/** The due-set as the schedule capability reaches it; every method answers, never throws. */
export interface ScheduleHost {
  /** arm the calling harness's on_wake at now + delayMs; reply ok(id) */
  arm(req: { delayMs: number; payload: string; id: string | null }): CapabilityReply;
  /** cancel a wake of the calling harness; reply ok("1") or ok("0") */
  cancel(id: string): CapabilityReply;
  /** call harness.tool(args) at now + delayMs, replacing the caller's pending one; reply ok(id) */
  callAfter(req: { delayMs: number; harness: string; tool: string; args: string }): CapabilityReply;
}

/** A handler: synchronous, never throws for bad guest input (returns error or refused instead). */
export type CapabilityHandler = (fields: Uint8Array[], ctx: CapabilityContext) => CapabilityReply;

/** A capability as the declaration names it (`name`) and the wire calls it answers. */
export interface Capability {
  /** declaration name, e.g. 'fs' */
  name: string;
  /** wire name (e.g. 'berm.fs.read', alias 'crabtalk.fs.read') to handler */
  calls: Record<string, CapabilityHandler>;
}

/** The effective limits of a context: defaults overlaid with `ctx.limits`. */
export function limitsOf(ctx: CapabilityContext): CapabilityLimits {
  return { ...DEFAULT_LIMITS, ...(ctx.limits ?? {}) };
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

/**
 * One published version of a harness, as an index records it: the reference implementation's
 * entry, one JSON object per line of `{registry}/{repository}.json`:
 *
 *   {"reference": "ghcr.io/org/name:v1", "digest": "sha256:<hex>", "publisher": "...",
 *    "usage": "...", "tools": [{"name", "description", "parameters"}]}
 *
 * in that field order, `publisher` omitted when nobody vouched for one. `digest` is the artifact's
 * layer digest, i.e. sha256 of the ELF (what `berm push` prints and `berm pull` verifies). Besides
 * entries a file may hold takedown lines (`{"takedown": "<digest>", "reference", "by", "at",
 * "reason"?}`), which hide the entry they name from search; a reader that knows only entries skips
 * them as lines it cannot read, so the format stays a superset of the reference's.
 */
import { OciError, parseReference } from '../oci/index.js';

/** A tool as an index lists it (the harness manifest's tool declaration). */
export interface IndexTool {
  name: string;
  description: string;
  /** JSON Schema of the tool's arguments */
  parameters: Record<string, unknown>;
}

/** One published version. */
export interface IndexEntry {
  /** the reference as published, tag (or digest) and all */
  reference: string;
  /** `sha256:<64 hex>` of the ELF (the artifact's layer) */
  digest: string;
  /** who the publishing service vouched for; absent when it vouched for nobody */
  publisher?: string;
  usage: string;
  tools: IndexTool[];
}

/** An operator's takedown of one published version: hidden from search, kept in the file. */
export interface Takedown {
  /** the digest of the entry taken down */
  takedown: string;
  /** the reference of the entry taken down */
  reference: string;
  /** the operator who took it down */
  by: string;
  /** when, ISO 8601 UTC */
  at: string;
  reason?: string;
}

/** What one line of an index file is. */
export type IndexLine = { kind: 'entry'; entry: IndexEntry } | { kind: 'takedown'; takedown: Takedown };

const DIGEST_RE = /^sha256:[0-9a-f]{64}$/;

/**
 * The harness a reference is a version of: the reference without its tag or digest
 * (`ghcr.io/org/name:v1` → `ghcr.io/org/name`), which names its index file. A reference berm's
 * parser refuses (a hand-written file may hold one) falls back to the reference implementation's
 * rule: everything before `@`, else before the last `:`.
 */
export function entryKey(reference: string): string {
  try {
    const r = parseReference(reference);
    return `${r.registry}/${r.repository}`;
  } catch (e) {
    if (!(e instanceof OciError)) throw e;
    const at = reference.indexOf('@');
    if (at >= 0) return reference.slice(0, at);
    const colon = reference.lastIndexOf(':');
    return colon >= 0 && colon > reference.lastIndexOf('/') ? reference.slice(0, colon) : reference;
  }
}

/** Whether `v` is a JSON object (not an array, not null). */
function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Read one entry from parsed JSON the way the reference does (`reference`, `digest`, `usage`,
 * `tools` with `name` and `description` required, `publisher` optional, other fields ignored).
 * @returns the entry with its fields in the format's order, or null when it is not one
 */
export function toEntry(v: unknown): IndexEntry | null {
  if (!isObject(v)) return null;
  const { reference, digest, publisher, usage, tools } = v;
  if (typeof reference !== 'string' || typeof digest !== 'string' || typeof usage !== 'string') return null;
  if (publisher !== undefined && publisher !== null && typeof publisher !== 'string') return null;
  if (!Array.isArray(tools)) return null;
  const out: IndexTool[] = [];
  for (const t of tools) {
    if (!isObject(t) || typeof t.name !== 'string' || typeof t.description !== 'string') return null;
    const parameters = isObject(t.parameters) ? t.parameters : { type: 'object' };
    out.push({ name: t.name, description: t.description, parameters });
  }
  return typeof publisher === 'string'
    ? { reference, digest, publisher, usage, tools: out }
    : { reference, digest, usage, tools: out };
}

/**
 * Parse one line of an index file.
 * @returns an entry, a takedown, or null for a blank line or one that is neither (not JSON, a
 *   field missing or of the wrong type): the caller skips and counts it
 */
export function parseIndexLine(line: string): IndexLine | null {
  const text = line.trim();
  if (text === '') return null;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  if (isObject(v) && typeof v.takedown === 'string') {
    const { takedown, reference, by, at, reason } = v;
    if (!DIGEST_RE.test(takedown) || typeof reference !== 'string' || typeof by !== 'string') return null;
    const out: Takedown = { takedown, reference, by, at: typeof at === 'string' ? at : '' };
    if (typeof reason === 'string') out.reason = reason;
    return { kind: 'takedown', takedown: out };
  }
  const entry = toEntry(v);
  return entry === null ? null : { kind: 'entry', entry };
}

/** One entry as its line (no newline), fields in the format's order. */
export function formatEntryLine(e: IndexEntry): string {
  const o: Record<string, unknown> = { reference: e.reference, digest: e.digest };
  if (e.publisher !== undefined) o.publisher = e.publisher;
  o.usage = e.usage;
  o.tools = e.tools.map((t) => ({ name: t.name, description: t.description, parameters: t.parameters }));
  return JSON.stringify(o);
}

/** One takedown as its line (no newline). */
export function formatTakedownLine(t: Takedown): string {
  const o: Record<string, unknown> = { takedown: t.takedown, reference: t.reference, by: t.by, at: t.at };
  if (t.reason !== undefined) o.reason = t.reason;
  return JSON.stringify(o);
}

/**
 * Whether `term` (already lowercase) appears in what a person searches by: the reference, the
 * usage, a tool's name or description (case-insensitive substring; the empty term matches all).
 */
export function entryMatches(e: IndexEntry, term: string): boolean {
  if (term === '') return true;
  if (e.reference.toLowerCase().includes(term) || e.usage.toLowerCase().includes(term)) return true;
  return e.tools.some(
    (t) => t.name.toLowerCase().includes(term) || t.description.toLowerCase().includes(term),
  );
}

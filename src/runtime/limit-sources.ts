/**
 * Limits from their three sources, for `berm worker` and the daemon: defaults, a `[limits]` table in
 * the declaration file, and command-line flags (`--limit key=value`), later sources winning. Each
 * limit remembers where its value came from so the boot log can say it.
 */
import { readFileSync } from 'node:fs';
import { parse } from 'smol-toml';
import { defaultLimits, type LimitSource, type RuntimeLimits } from './limits.js';

/** Keys of {@link RuntimeLimits}, in boot-log order. */
export const LIMIT_KEYS: readonly (keyof RuntimeLimits)[] = Object.keys(
  defaultLimits(1),
) as (keyof RuntimeLimits)[];

/** A limit given with a bad key or value; the message names the fix. */
export class LimitsError extends Error {
  override name = 'LimitsError';
}

/**
 * Parse one limit's value: numbers (decimal; "inf" for fuel), overrun skip|defer.
 * @throws LimitsError naming the key and the accepted form.
 */
export function parseLimitValue(
  key: string,
  value: unknown,
  where: string,
): RuntimeLimits[keyof RuntimeLimits] {
  if (!(LIMIT_KEYS as readonly string[]).includes(key))
    throw new LimitsError(
      `${where}: unknown limit ${JSON.stringify(key)}; known limits: ${LIMIT_KEYS.join(', ')}`,
    );
  if (key === 'overrun') {
    if (value !== 'skip' && value !== 'defer')
      throw new LimitsError(`${where}: overrun must be "skip" or "defer"`);
    return value;
  }
  if (key === 'fuel' && (value === 'inf' || value === 'infinity')) return Infinity;
  const n =
    typeof value === 'number'
      ? value
      : typeof value === 'bigint'
        ? Number(value)
        : Number(String(value).trim());
  if (typeof value === 'string' && !/^\d+(\.\d+)?$/.test(value.trim()))
    throw new LimitsError(`${where}: ${key} must be a positive number, got ${JSON.stringify(value)}`);
  if (!Number.isFinite(n) || n < 0)
    throw new LimitsError(`${where}: ${key} must be a positive number, got ${String(value)}`);
  return n;
}

/**
 * The `[limits]` table of a TOML file (absent: none).
 * @throws LimitsError for an unknown key or a bad value (with the file); Error when the file
 *   cannot be read or parsed.
 */
export function limitsFromFile(file: string): Partial<RuntimeLimits> {
  const doc = parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  const table = doc.limits;
  if (table === undefined) return {};
  if (typeof table !== 'object' || table === null || Array.isArray(table))
    throw new LimitsError(`${file}: limits must be a table ([limits])`);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(table)) out[k] = parseLimitValue(k, v, `${file} [limits]`);
  return out as Partial<RuntimeLimits>;
}

/** `key=value` flags. @throws LimitsError */
export function limitsFromFlags(flags: readonly string[]): Partial<RuntimeLimits> {
  const out: Record<string, unknown> = {};
  for (const f of flags) {
    const m = /^([A-Za-z]+)=(.*)$/.exec(f);
    if (!m) throw new LimitsError(`--limit ${f}: expected key=value, e.g. --limit timeoutMs=5000`);
    out[m[1]!] = parseLimitValue(m[1]!, m[2]!, `--limit ${f}`);
  }
  return out as Partial<RuntimeLimits>;
}

/** Merge sources (later wins) and remember each key's source. */
export function mergeLimits(layers: { source: LimitSource; limits: Partial<RuntimeLimits> }[]): {
  limits: Partial<RuntimeLimits>;
  sources: Partial<Record<keyof RuntimeLimits, LimitSource>>;
} {
  const limits: Record<string, unknown> = {};
  const sources: Partial<Record<keyof RuntimeLimits, LimitSource>> = {};
  for (const layer of layers) {
    for (const [k, v] of Object.entries(layer.limits)) {
      if (v === undefined) continue;
      limits[k] = v;
      sources[k as keyof RuntimeLimits] = layer.source;
    }
  }
  return { limits: limits as Partial<RuntimeLimits>, sources };
}

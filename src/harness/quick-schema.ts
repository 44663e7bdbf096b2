/**
 * A one-sided JSON Schema check for the warm path: it answers `true` only when the value is valid
 * under the schema as ajv (draft-07, as src/harness/harness.ts configures it) would judge it, and
 * `false` whenever it is unsure: the schema uses a keyword outside the small subset below, is not
 * well formed by the draft-07 meta-schema, or the value is invalid. A `false` sends the caller to
 * ajv for the verdict and its error messages, so this module never decides a refusal and never
 * needs to reproduce ajv's messages; importing ajv (~60 ms) and compiling a schema (~50 ms on a
 * cold process) is left to the calls that need it.
 *
 * The subset (JSON Schema draft-07, "Validation" sections 6.1-6.5 and 10): boolean schemas; `type`
 * (one name or a non-empty array of unique names); `enum` (non-empty, primitives only) and `const`
 * (a primitive); `minimum`/`maximum`/`exclusiveMinimum`/`exclusiveMaximum` (numbers);
 * `minLength`/`maxLength` (counted in code points, as ajv does); `minItems`/`maxItems`; `items`
 * (one schema); `properties`, `required` (unique strings), `additionalProperties`; and the
 * annotations `title`, `description`, `$comment`, `default`, `examples`. Not `pattern` or `format`
 * (regular expressions stay with ajv and whatever bounds the caller puts on them).
 */

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const TYPES = new Set(['null', 'boolean', 'number', 'integer', 'string', 'array', 'object']);
const ANNOTATIONS = new Set(['title', 'description', '$comment', 'default', 'examples']);
const own = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);
const isObject = (x: unknown): x is Record<string, unknown> =>
  typeof x === 'object' && x !== null && !Array.isArray(x);
const isCount = (x: unknown): x is number => typeof x === 'number' && Number.isInteger(x) && x >= 0;
const isPrimitive = (x: unknown): boolean =>
  x === null || typeof x === 'boolean' || typeof x === 'string' || (typeof x === 'number' && isFinite(x));

function unique(xs: unknown[]): boolean {
  return new Set(xs).size === xs.length;
}

function typeMatches(name: string, v: unknown): boolean {
  switch (name) {
    case 'null':
      return v === null;
    case 'boolean':
      return typeof v === 'boolean';
    case 'number':
      return typeof v === 'number';
    case 'integer':
      return typeof v === 'number' && Number.isInteger(v);
    case 'string':
      return typeof v === 'string';
    case 'array':
      return Array.isArray(v);
    default:
      return isObject(v);
  }
}

/** Code points of a string (ajv's ucs2length: a surrogate pair counts once). */
function codePoints(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    n++;
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
  }
  return n;
}

/**
 * True only if `value` (a JSON value, as JSON.parse gives) is valid under `schema` and the schema
 * is well formed and inside the subset; false otherwise (then ask ajv).
 */
export function quickAccepts(schema: unknown, value: unknown): boolean {
  return check(schema, value as Json, 0);
}

function check(schema: unknown, v: Json, depth: number): boolean {
  if (schema === true) return true;
  if (!isObject(schema) || depth > 32) return false;
  if (typeof v === 'number' && !isFinite(v)) return false;
  for (const k of Object.keys(schema)) {
    const s = schema[k];
    switch (k) {
      case 'type': {
        // one name, the common case, without the array and Set of the general one
        if (typeof s === 'string') {
          if (!TYPES.has(s) || !typeMatches(s, v)) return false;
          break;
        }
        const names = Array.isArray(s) ? s : [s];
        if (names.length === 0 || !unique(names)) return false;
        if (!names.every((n) => typeof n === 'string' && TYPES.has(n))) return false;
        if (!names.some((n) => typeMatches(n as string, v))) return false;
        break;
      }
      case 'enum':
        if (!Array.isArray(s) || s.length === 0 || !s.every(isPrimitive) || !unique(s) || !s.includes(v))
          return false;
        break;
      case 'const':
        if (!isPrimitive(s) || s !== v) return false;
        break;
      case 'minimum':
      case 'maximum':
      case 'exclusiveMinimum':
      case 'exclusiveMaximum': {
        if (typeof s !== 'number' || !isFinite(s)) return false;
        if (typeof v !== 'number') break;
        if (k === 'minimum' ? v < s : k === 'maximum' ? v > s : k === 'exclusiveMinimum' ? v <= s : v >= s)
          return false;
        break;
      }
      case 'minLength':
      case 'maxLength':
        if (!isCount(s)) return false;
        if (typeof v === 'string' && (k === 'minLength' ? codePoints(v) < s : codePoints(v) > s))
          return false;
        break;
      case 'minItems':
      case 'maxItems':
        if (!isCount(s)) return false;
        if (Array.isArray(v) && (k === 'minItems' ? v.length < s : v.length > s)) return false;
        break;
      case 'items':
        if (Array.isArray(s)) return false;
        if (!wellFormed(s, depth + 1)) return false;
        if (Array.isArray(v) && !v.every((x) => check(s, x, depth + 1))) return false;
        break;
      case 'required':
        if (!Array.isArray(s) || !s.every((x) => typeof x === 'string') || !unique(s)) return false;
        if (isObject(v) && !s.every((name) => own(v, name as string))) return false;
        break;
      case 'properties':
        if (!isObject(s)) return false;
        for (const [name, sub] of Object.entries(s)) {
          // ajv reads `data[name]`, so an inherited `constructor` counts as present: leave those to it
          if (name in Object.prototype) return false;
          if (isObject(v) && own(v, name)) {
            if (!check(sub, v[name], depth + 1)) return false;
          } else if (!wellFormed(sub, depth + 1)) return false;
        }
        break;
      case 'additionalProperties':
        if (isObject(v)) {
          const props = isObject(schema.properties) ? schema.properties : {};
          for (const name of Object.keys(v)) {
            if (!own(props, name) && !check(s, v[name], depth + 1)) return false;
          }
        }
        if (!wellFormed(s, depth + 1)) return false;
        break;
      case 'title':
      case 'description':
      case '$comment':
        if (typeof s !== 'string') return false;
        break;
      case 'examples':
        if (!Array.isArray(s)) return false;
        break;
      case 'default':
        break;
      default:
        return false;
    }
  }
  return true;
}

/**
 * True only if `schema` is inside the subset and well formed by the draft-07 meta-schema, so that
 * ajv compiles it (with no `pattern` or `format`, nothing in it can fail to compile or take
 * long); false means "ask ajv".
 */
export function simpleSchema(schema: unknown): boolean {
  return wellFormed(schema, 0);
}

/** The schema is inside the subset and well formed (whatever value it would be applied to). */
function wellFormed(schema: unknown, depth: number): boolean {
  if (typeof schema === 'boolean') return true;
  if (!isObject(schema) || depth > 32) return false;
  for (const k of Object.keys(schema)) {
    if (!ANNOTATIONS.has(k) && !SHAPE_CHECKED.has(k)) return false;
  }
  // Applying the schema to a value none of its value keywords constrain checks its shape alone:
  // a fresh object passes every keyword but `type`, `enum`, `const`, `required`.
  const { type, enum: en, const: co, required, ...rest } = schema;
  const probe = {};
  if (!check(rest, probe, depth)) return false;
  if (type !== undefined) {
    const names = Array.isArray(type) ? type : [type];
    if (names.length === 0 || !unique(names) || !names.every((n) => typeof n === 'string' && TYPES.has(n)))
      return false;
  }
  if (en !== undefined && (!Array.isArray(en) || en.length === 0 || !en.every(isPrimitive) || !unique(en)))
    return false;
  if (co !== undefined && !isPrimitive(co)) return false;
  if (required !== undefined) {
    if (!Array.isArray(required) || !required.every((x) => typeof x === 'string') || !unique(required))
      return false;
  }
  return true;
}

const SHAPE_CHECKED = new Set([
  'type',
  'enum',
  'const',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'minLength',
  'maxLength',
  'minItems',
  'maxItems',
  'items',
  'required',
  'properties',
  'additionalProperties',
]);

// The warm-path schema check (src/harness/quick-schema.ts) may only say "valid" when ajv agrees:
// random schemas from (and just outside) its subset, random JSON values, ajv (configured as the
// harness configures it) as the independent judge. It must also actually take the common cases,
// or the warm path would load ajv after all.
import { Ajv } from 'ajv';
import t from 'tap';
import { quickAccepts, simpleSchema } from '../src/harness/quick-schema.js';

// as src/harness/harness.ts configures it (its linear-time RegExp engine only matters to `pattern`,
// which the quick check leaves to ajv)
const ajv = new Ajv({ strict: false, allErrors: true, unicodeRegExp: false });

/** Deterministic PRNG (mulberry32). */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const NAMES = ['a', 'b', 'c', '__proto__', 'constructor'];
const TYPE_NAMES = ['null', 'boolean', 'number', 'integer', 'string', 'array', 'object', 'strnig'];

function pick<T>(r: () => number, xs: readonly T[]): T {
  return xs[Math.floor(r() * xs.length)];
}

function randomValue(r: () => number, depth = 0): unknown {
  const k = Math.floor(r() * (depth > 2 ? 5 : 7));
  switch (k) {
    case 0:
      return null;
    case 1:
      return r() < 0.5;
    case 2:
      return pick(r, [0, -1, 1, 2.5, 3, 1e21, -0, 7]);
    case 3:
      return pick(r, ['', 'x', 'ab', 'abc', '😀😀', 'a😀']);
    case 4:
      return pick(r, [1, 'a', true]);
    case 5:
      return Array.from({ length: Math.floor(r() * 4) }, () => randomValue(r, depth + 1));
    default: {
      const o: Record<string, unknown> = {};
      for (const n of NAMES)
        if (r() < 0.4) Object.defineProperty(o, n, { value: randomValue(r, depth + 1), enumerable: true });
      return o;
    }
  }
}

function randomSchema(r: () => number, depth = 0): unknown {
  if (r() < 0.08) return r() < 0.7;
  const s: Record<string, unknown> = {};
  const n = Math.floor(r() * 4);
  for (let i = 0; i < n; i++) {
    switch (Math.floor(r() * 17)) {
      case 0:
        s.type = r() < 0.7 ? pick(r, TYPE_NAMES) : [pick(r, TYPE_NAMES), pick(r, TYPE_NAMES)];
        break;
      case 1:
        s.enum = r() < 0.1 ? [] : [pick(r, [1, 'a', null, true]), pick(r, [1, 'x', 3, { a: 1 }])];
        break;
      case 2:
        s.const = pick(r, [1, 'a', null, [1], 0]);
        break;
      case 3:
        s[pick(r, ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'])] = pick(r, [
          0,
          1,
          2.5,
          'x',
          true,
        ]);
        break;
      case 4:
        s[pick(r, ['minLength', 'maxLength', 'minItems', 'maxItems'])] = pick(r, [0, 1, 2, -1, 1.5]);
        break;
      case 5:
        s.items = depth < 3 ? (r() < 0.1 ? [randomSchema(r, depth + 1)] : randomSchema(r, depth + 1)) : {};
        break;
      case 6:
        s.required = r() < 0.1 ? 'a' : r() < 0.1 ? ['a', 'a'] : NAMES.filter(() => r() < 0.3);
        break;
      case 7: {
        const p: Record<string, unknown> = {};
        for (const name of NAMES)
          if (r() < 0.4 && depth < 3)
            Object.defineProperty(p, name, { value: randomSchema(r, depth + 1), enumerable: true });
        s.properties = r() < 0.05 ? 'x' : p;
        break;
      }
      case 8:
        s.additionalProperties = depth < 3 ? randomSchema(r, depth + 1) : false;
        break;
      case 9:
        s[pick(r, ['title', 'description', '$comment'])] = r() < 0.8 ? 'text' : 5;
        break;
      case 10:
        s.examples = r() < 0.8 ? [1] : 'x';
        break;
      case 11:
        s.default = 3;
        break;
      case 12:
        s.pattern = '^a';
        break;
      case 13:
        s.format = 'email';
        break;
      case 14:
        s.anyOf = [{ type: 'string' }];
        break;
      default:
        s.type = 'object';
    }
  }
  return s;
}

t.test(
  'quickAccepts(s, v) implies ajv accepts s and v; simpleSchema(s) implies ajv compiles s',
  async (t) => {
    const r = rng(12345);
    let agreedValid = 0;
    let simple = 0;
    let checked = 0;
    for (let i = 0; i < 5000; i++) {
      const schema = randomSchema(r);
      let validate: ((v: unknown) => boolean) | null = null;
      try {
        validate = ajv.compile(schema as object);
      } catch {
        validate = null; // ajv refuses the schema: quickAccepts must never say valid
      }
      if (simpleSchema(schema) && validate === null) {
        t.fail(`simpleSchema said well formed, ajv refused it: ${JSON.stringify(schema)}`);
        return;
      }
      if (simpleSchema(schema)) simple++;
      for (let j = 0; j < 5; j++) {
        const value = randomValue(r);
        const quick = quickAccepts(schema, value);
        checked++;
        if (quick) {
          agreedValid++;
          if (validate === null || !validate(value)) {
            t.fail(`quick said valid, ajv did not: ${JSON.stringify(schema)} / ${JSON.stringify(value)}`);
            return;
          }
        }
      }
    }
    t.ok(simple > 500, `simpleSchema took a fair share of the schemas (${simple})`);
    t.ok(agreedValid > checked / 20, `the quick check took a fair share (${agreedValid} of ${checked})`);
  },
);

t.test('the common tool schemas take the quick path; invalid schemas and values do not', async (t) => {
  const os = {
    type: 'object',
    required: ['path'],
    properties: {
      path: { type: 'string' },
      offset: { type: 'integer', minimum: 0 },
      limit: { type: 'integer', minimum: 0 },
    },
  };
  t.ok(quickAccepts({ type: 'object' }, { x: 1 }));
  t.ok(quickAccepts({ type: 'object', properties: {} }, {}));
  t.ok(quickAccepts(os, { path: 'README.md', limit: 10 }));
  t.notOk(quickAccepts(os, { limit: 10 }), 'missing required');
  t.notOk(quickAccepts(os, { path: 'x', offset: -1 }), 'below the minimum');
  t.notOk(quickAccepts(os, { path: 'x', offset: 1.5 }), 'not an integer');
  t.notOk(quickAccepts({ type: 'object' }, []), 'an array is not an object');
  t.notOk(quickAccepts({ type: 'strnig' }, 'x'), 'unknown type name: ajv refuses the schema');
  t.notOk(
    quickAccepts({ required: ['a', 'a'] }, { a: 1 }),
    'duplicate required names: refused by the meta-schema',
  );
  t.notOk(
    quickAccepts({ properties: { a: { pattern: '^(a|a)*$' } } }, { a: 'aaa' }),
    'patterns stay with ajv',
  );
  t.notOk(
    quickAccepts({ properties: { b: { type: 'strnig' } } }, { a: 1 }),
    'a malformed schema of an absent property',
  );
  t.ok(quickAccepts({ properties: { s: { maxLength: 2 } } }, { s: '😀😀' }), 'lengths count code points');
});

/**
 * The `.berm.abi` manifest (upstream berm ABI): one JSON object
 * `{"abi_version": 0|1, "tools": [{"name", "description", "parameters"}], "usage": "...", "deps": [...]}`
 * validated against the schema below. A manifest that plainly conforms is accepted by a direct
 * check; anything else goes to ajv (loaded then, not on the warm path), whose verdict and messages
 * count. `deps` exists only in ABI 1.
 */
import { createRequire } from 'node:module';
import type { ValidateFunction } from 'ajv';

/** One declared tool. */
export interface ToolDecl {
  name: string;
  description: string;
  /** JSON Schema of the arguments; {"type": "object"} when the harness gave none */
  parameters: Record<string, unknown>;
}

/** A validated manifest. */
export interface Manifest {
  abi_version: 0 | 1;
  usage: string;
  tools: ToolDecl[];
  /** harnesses it calls and hosts it dials (ABI 1); [] for ABI 0 */
  deps: string[];
}

/** Thrown when a manifest is missing, not JSON, or not of a known ABI. */
export class ManifestError extends Error {
  override name = 'ManifestError';
}

const toolSchema = {
  type: 'object',
  required: ['name'],
  properties: {
    name: { type: 'string', pattern: '^[A-Za-z_][A-Za-z0-9_]*$', maxLength: 128 },
    description: { type: 'string' },
    parameters: { type: 'object' },
  },
};
const schema = {
  type: 'object',
  required: ['abi_version', 'tools'],
  properties: {
    abi_version: { enum: [0, 1] },
    usage: { type: 'string' },
    tools: { type: 'array', items: toolSchema },
    deps: { type: 'array', items: { type: 'string' } },
  },
  if: { properties: { abi_version: { const: 0 } } },
  then: { not: { required: ['deps'] } },
};

let compiled: ValidateFunction | null = null;
function validate(json: unknown): ValidateFunction {
  if (compiled === null) {
    const { Ajv } = createRequire(import.meta.url)('ajv') as typeof import('ajv');
    const ajv = new Ajv({ allErrors: true, strict: true, strictRequired: false, allowUnionTypes: true });
    compiled = ajv.compile(schema);
  }
  compiled(json);
  return compiled;
}

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const own = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);
const isObject = (x: unknown): x is Record<string, unknown> =>
  typeof x === 'object' && x !== null && !Array.isArray(x);

/** True only when `json` conforms to `schema` (checked directly, no ajv); false means "ask ajv". */
function plainlyValid(json: unknown): boolean {
  if (!isObject(json) || (json.abi_version !== 0 && json.abi_version !== 1)) return false;
  if (own(json, 'usage') && typeof json.usage !== 'string') return false;
  if (!Array.isArray(json.tools)) return false;
  for (const t of json.tools as unknown[]) {
    if (!isObject(t) || typeof t.name !== 'string' || t.name.length > 128 || !NAME.test(t.name)) return false;
    if (own(t, 'description') && typeof t.description !== 'string') return false;
    if (own(t, 'parameters') && !isObject(t.parameters)) return false;
  }
  if (own(json, 'deps')) {
    if (json.abi_version === 0 || !Array.isArray(json.deps)) return false;
    if (!(json.deps as unknown[]).every((d) => typeof d === 'string')) return false;
  }
  return true;
}

/**
 * Parse and validate manifest bytes.
 * @throws ManifestError naming what is wrong (absent section, bad UTF-8/JSON, unknown abi_version,
 *   schema violations, duplicate tool names).
 */
export function parseManifest(bytes: Uint8Array | null): Manifest {
  if (bytes === null) {
    throw new ManifestError(
      'no .berm.abi section: build the harness with the berm guest SDK (guest-sdk/berm.mk)',
    );
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new ManifestError('.berm.abi is not valid UTF-8');
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new ManifestError(`.berm.abi is not valid JSON: ${(e as Error).message}`);
  }
  if (json && typeof json === 'object' && 'abi_version' in json) {
    const v = (json as { abi_version: unknown }).abi_version;
    if (v !== 0 && v !== 1) {
      throw new ManifestError(`unknown abi_version ${JSON.stringify(v)}: this runtime reads ABI 0 and 1`);
    }
  }
  if (!plainlyValid(json)) {
    const v = validate(json);
    if (v.errors) {
      const why = v.errors.map((e) => `${e.instancePath || '/'} ${e.message}`).join('; ');
      throw new ManifestError(`.berm.abi does not match the manifest schema: ${why}`);
    }
  }
  const raw = json as {
    abi_version: 0 | 1;
    usage?: string;
    deps?: string[];
    tools: { name: string; description?: string; parameters?: Record<string, unknown> }[];
  };
  const seen = new Set<string>();
  const tools: ToolDecl[] = raw.tools.map((t) => {
    if (seen.has(t.name)) throw new ManifestError(`tool ${t.name} is declared twice`);
    seen.add(t.name);
    return { name: t.name, description: t.description ?? '', parameters: t.parameters ?? { type: 'object' } };
  });
  return { abi_version: raw.abi_version, usage: raw.usage ?? '', tools, deps: raw.deps ?? [] };
}

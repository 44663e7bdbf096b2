/**
 * The operator's declaration file: a TOML list of `[[harnesses]]`, each
 * naming a local ELF, its sha256, and the capabilities granted with their arguments. The
 * declaration alone grants: nothing is inferred from a harness's own manifest, a capability not
 * listed is absent (not linked), and a grant missing its argument reaches nothing.
 *
 * The keys of an entry are `name`, `source`, `sha256`, `capabilities` and the grant keys of the
 * registered capabilities (src/capabilities/index.ts): each capability owns its keys and their JSON
 * Schema, which is checked here with ajv whenever the capability is granted.
 *
 * Errors carry the file, the line and the fix. A syntax error or a malformed top level throws; a
 * bad entry is refused on its own (listed in `errors`, left out of `harnesses`) so one broken
 * harness does not take the others down.
 */
import { createHash } from 'node:crypto';
import * as path from 'node:path';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { TomlError, parse } from 'smol-toml';
import { defaultDataDir, OCI_SOURCE_PREFIX, storedHarnessPath } from '../util/data-dir.js';
import { InputFileError, readRegularFile } from '../util/read-file.js';
import { CAPABILITIES, capabilityNames, explainCapability, grantKeyOwners } from '../capabilities/index.js';
import type {
  Capability,
  CapabilityContext,
  CapabilityLimits,
  CapabilityReply,
  Grant,
} from '../capabilities/types.js';

/** A problem in a declaration file, located and with the fix an operator should apply. */
export class DeclarationError extends Error {
  override name = 'DeclarationError';
  /**
   * @param file the declaration file
   * @param line 1-based line (0 when no line applies, e.g. the file is missing)
   * @param problem what is wrong
   * @param fix what to change
   */
  constructor(
    readonly file: string,
    readonly line: number,
    readonly problem: string,
    readonly fix: string,
  ) {
    // no line applies (the file is missing): `file: problem`, not a misleading `file:0:`
    super(`${file}${line > 0 ? `:${line}` : ''}: ${problem}; fix: ${fix}`);
  }
}

/** One accepted harness entry. */
export interface HarnessDeclaration {
  /** the tool namespace; no dots (tools are addressed as "harness.tool") */
  name: string;
  /** absolute path of the ELF (for an `oci:` source: its place in the data directory's store) */
  source: string;
  /** the registry reference of an `oci:REF` source (installed by `berm install`), else absent */
  reference?: string;
  /** lowercase hex sha256 of the ELF, verified */
  sha256: string;
  /** granted capability names, sorted, no duplicates */
  capabilities: string[];
  /** arguments of the granted capabilities only (root absolute, hosts lowercase) */
  grant: Grant;
  /** the verified ELF bytes (read once, so what runs is what was hashed); absent with checkFiles false */
  elf?: Uint8Array;
  /** declaration file and 1-based line of the entry's [[harnesses]] header */
  file: string;
  line: number;
}

/** A parsed declaration file: accepted harnesses and refused entries. */
export interface Declarations {
  file: string;
  harnesses: HarnessDeclaration[];
  errors: DeclarationError[];
}

/** Options of {@link parseDeclarations}. */
export interface ParseOptions {
  /**
   * Check that sources and roots exist and verify sha256 against the ELF bytes (default true).
   * False only lints the file's shape (for examples and editors).
   */
  checkFiles?: boolean;
  /** where `oci:` sources are installed (default: berm's data directory, src/util/data-dir.ts) */
  dataDir?: string;
}

/** Keys every entry may have, whatever it grants. */
export const BASE_KEYS: readonly string[] = ['name', 'source', 'sha256', 'capabilities'];

/** Keys an entry may have: {@link BASE_KEYS} and every registered capability's grant keys. */
export function entryKeys(): string[] {
  return [...BASE_KEYS, ...grantKeyOwners().keys()];
}

/** Keys an entry may have with the built-in capabilities (see {@link entryKeys}). */
export const ENTRY_KEYS: readonly string[] = entryKeys();

const ajv = new Ajv({ allErrors: true, strict: true });
const validators = new WeakMap<Capability, ValidateFunction>();

function validatorOf(cap: Capability): ValidateFunction {
  let v = validators.get(cap);
  if (!v) {
    v = ajv.compile({ ...cap.grant.schema, additionalProperties: false });
    validators.set(cap, v);
  }
  return v;
}

/** One ajv error as `key[/sub/path] must ...`, naming the declaration key at fault. */
function describeSchemaError(e: ErrorObject): { key: string; text: string } {
  const parts = e.instancePath.split('/').slice(1);
  if (e.keyword === 'required') {
    const key = String((e.params as { missingProperty: string }).missingProperty);
    return { key, text: `${key} is missing` };
  }
  const key = parts[0] ?? '';
  const where = parts.length > 1 ? `${key}[${parts.slice(1).join('][')}]` : key;
  return { key, text: `${where} ${e.message ?? 'is invalid'}` };
}

/** 1-based line numbers of each `[[harnesses]]` header, in order. */
function headerLines(lines: string[]): number[] {
  const out: number[] = [];
  lines.forEach((l, i) => {
    if (/^\s*\[\[\s*"?harnesses"?\s*\]\]/.test(l)) out.push(i + 1);
  });
  return out;
}

/** Line of `key = ` inside the entry starting at `start` (the header line), else the header line. */
function keyLine(lines: string[], start: number, key: string): number {
  for (let i = start; i < lines.length; i++) {
    if (/^\s*\[/.test(lines[i]!)) break;
    if (keyAssigned(lines[i]!, key)) return i + 1;
  }
  return start;
}

/**
 * Does `line` assign `key` (bare, or quoted with " or ')? Compared as text, never compiled into a
 * RegExp: keys come from the file and may hold any character.
 */
function keyAssigned(line: string, key: string): boolean {
  const t = line.trimStart();
  for (const spelled of [key, JSON.stringify(key), `'${key}'`]) {
    if (t.startsWith(spelled) && t.slice(spelled.length).trimStart().startsWith('=')) return true;
  }
  return false;
}

/** Line (1-based) of a top-level key `k` as a table header or an assignment, else 1. */
function topLevelLine(lines: string[], k: string): number {
  const i = lines.findIndex((l) => {
    const t = l.trim().replace(/^\[+\s*/, '');
    return [k, JSON.stringify(k), `'${k}'`].some(
      (s) => t.startsWith(s) && /^\s*[\]=.]/.test(t.slice(s.length)),
    );
  });
  return Math.max(1, i + 1);
}

const isStringArray = (v: unknown): v is string[] =>
  Array.isArray(v) && v.every((x) => typeof x === 'string');

/**
 * Parse and validate declaration text. Paths in the file are relative to the file's directory.
 * @param file the file name used in errors and to resolve relative paths
 * @throws DeclarationError on a TOML syntax error or a top level other than `[[harnesses]]`.
 * @returns accepted entries and per-entry errors (unknown capability or key, missing root, bad
 *   or mismatched sha256, duplicate name, a name with a dot, source missing, bad host pattern).
 */
export function parseDeclarations(text: string, file: string, options: ParseOptions = {}): Declarations {
  const checkFiles = options.checkFiles ?? true;
  let doc: Record<string, unknown>;
  try {
    doc = parse(text) as Record<string, unknown>;
  } catch (e) {
    if (e instanceof TomlError) {
      throw new DeclarationError(
        file,
        e.line,
        `TOML syntax: ${e.message.split('\n')[0]}`,
        'correct the TOML at that line',
      );
    }
    throw e;
  }
  const lines = text.split(/\r?\n/);
  for (const k of Object.keys(doc)) {
    // [limits] belongs to the runtime that runs the declared harnesses (src/runtime/limit-sources.ts)
    if (k !== 'harnesses' && k !== 'limits') {
      throw new DeclarationError(
        file,
        topLevelLine(lines, k),
        `unknown top-level key ${JSON.stringify(k)}`,
        'the file holds [[harnesses]] entries and an optional [limits] table',
      );
    }
  }
  const raw = doc.harnesses ?? [];
  if (!Array.isArray(raw)) {
    throw new DeclarationError(
      file,
      1,
      'harnesses is not an array of tables',
      'write each entry as [[harnesses]]',
    );
  }
  const headers = headerLines(lines);
  const dir = path.dirname(path.resolve(file));
  const seen = new Map<string, number>();
  const harnesses: HarnessDeclaration[] = [];
  const errors: DeclarationError[] = [];

  raw.forEach((entry: unknown, index) => {
    const start = headers[index] ?? 1;
    const at = (key: string) => keyLine(lines, start, key);
    const fail = (line: number, problem: string, fix: string) =>
      errors.push(new DeclarationError(file, line, problem, fix));
    const before = errors.length;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      fail(start, `harnesses entry ${index + 1} is not a table`, 'write it as a [[harnesses]] table');
      return;
    }
    const e = entry as Record<string, unknown>;
    const label =
      typeof e.name === 'string' ? `harness ${JSON.stringify(e.name)}` : `harnesses entry ${index + 1}`;

    const known = entryKeys();
    for (const k of Object.keys(e)) {
      if (!known.includes(k)) {
        fail(
          at(k),
          `${label}: unknown key ${JSON.stringify(k)}`,
          `remove it; known keys are ${known.join(', ')}`,
        );
      }
    }

    const name = e.name;
    if (typeof name !== 'string' || name === '') {
      fail(at('name'), `${label}: name is missing or not a string`, 'add name = "my-harness"');
    } else if (name.includes('.')) {
      fail(
        at('name'),
        `${label}: name contains a dot`,
        `tools are addressed as harness.tool; rename it, e.g. "${name.replace(/\./g, '-')}"`,
      );
    } else if (!/^[A-Za-z0-9_-]+$/.test(name)) {
      fail(at('name'), `${label}: name has characters other than letters, digits, '_' and '-'`, 'rename it');
    } else if (seen.has(name)) {
      fail(
        at('name'),
        `${label}: duplicate name (first declared at line ${seen.get(name)})`,
        'give each harness its own name',
      );
    } else {
      seen.set(name, start);
    }

    const sha = e.sha256;
    const shaOk = typeof sha === 'string' && /^[0-9a-fA-F]{64}$/.test(sha);
    if (!shaOk) {
      fail(
        at('sha256'),
        `${label}: sha256 is missing or not 64 hex digits`,
        'set sha256 to the output of `sha256sum <source>`',
      );
    }

    let source: string | undefined;
    let reference: string | undefined;
    if (typeof e.source !== 'string' || e.source === '') {
      fail(
        at('source'),
        `${label}: source is missing`,
        'add source = "path/to/harness.elf" (relative to this file)',
      );
    } else if (e.source.startsWith(OCI_SOURCE_PREFIX)) {
      // a harness named by reference: `berm install` fetched and verified it into the data
      // directory's store, where its pinned sha256 finds it; nothing here ever downloads
      reference = e.source.slice(OCI_SOURCE_PREFIX.length);
      if (!shaOk) {
        // the sha256 refusal above says what to fix
      } else source = storedHarnessPath(options.dataDir ?? defaultDataDir(), (sha as string).toLowerCase());
    } else if (/^[a-z][a-z0-9+.-]*:\/\//i.test(e.source)) {
      fail(
        at('source'),
        `${label}: source is a URL`,
        'berm never downloads code; fetch the ELF yourself and name the local path',
      );
    } else {
      source = path.resolve(dir, e.source);
    }

    const caps: string[] = [];
    const names = capabilityNames();
    if (e.capabilities !== undefined && !isStringArray(e.capabilities)) {
      fail(
        at('capabilities'),
        `${label}: capabilities is not an array of strings`,
        'write capabilities = ["fs", "clock"]',
      );
    } else {
      for (const c of (e.capabilities as string[] | undefined) ?? []) {
        const refusal = explainCapability(c);
        if (refusal) {
          fail(at('capabilities'), `${label}: ${refusal.problem}`, refusal.fix);
        } else if (!names.includes(c)) {
          fail(
            at('capabilities'),
            `${label}: unknown capability ${JSON.stringify(c)}`,
            `use one of ${names.join(', ')}`,
          );
        } else if (caps.includes(c)) {
          fail(at('capabilities'), `${label}: capability ${JSON.stringify(c)} listed twice`, 'list it once');
        } else {
          caps.push(c);
        }
      }
    }
    caps.sort();

    for (const [key, owners] of grantKeyOwners()) {
      if (e[key] !== undefined && !owners.some((o) => caps.includes(o))) {
        fail(
          at(key),
          `${label}: ${key} is set but ${owners.join(' or ')} is not granted`,
          `add ${owners.map((o) => `"${o}"`).join(' or ')} to capabilities, or remove ${key}`,
        );
      }
    }

    const grant: Grant = {};
    // A key two capabilities share (root) is validated and prepared once, by the first.
    const doneKeys = new Set<string>();
    for (const c of caps) {
      const cap = CAPABILITIES[c]!;
      const keys = Object.keys(cap.grant.schema.properties).filter((k) => !doneKeys.has(k));
      if (keys.length === 0) continue;
      keys.forEach((k) => doneKeys.add(k));
      const values: Record<string, unknown> = {};
      for (const k of keys) if (e[k] !== undefined) values[k] = e[k];
      const schema = cap.grant.schema;
      const validate = validatorOf(cap);
      const own = { ...values };
      for (const k of Object.keys(schema.properties))
        if (!keys.includes(k) && e[k] !== undefined) own[k] = e[k];
      if (!validate(own)) {
        for (const err of validate.errors ?? []) {
          const { key, text } = describeSchemaError(err);
          const fix = cap.grant.fixes?.[key] ?? `correct ${key} (see docs/capabilities.md, "${c}")`;
          if (err.keyword === 'required') {
            fail(at('capabilities'), `${label}: ${c} is granted without a ${key}`, fix);
          } else {
            fail(at(key), `${label}: ${text}`, fix);
          }
        }
        continue;
      }
      const prepared = cap.grant.prepare
        ? cap.grant.prepare(values, { dir, checkFiles })
        : { grant: values, problems: [] };
      for (const p of prepared.problems) fail(at(p.key), `${label}: ${p.problem}`, p.fix);
      Object.assign(grant, prepared.grant);
    }

    let elf: Uint8Array | undefined;
    if (checkFiles && source !== undefined) {
      try {
        elf = readRegularFile(source);
      } catch (err) {
        if (!(err instanceof InputFileError)) throw err;
        if (reference !== undefined && err.reason.includes('ENOENT')) {
          fail(
            at('source'),
            `${label}: not installed: run berm install --config ${file}`,
            `berm install --config ${file} fetches and verifies ${reference}`,
          );
        } else
          fail(
            at('source'),
            `${label}: source ${source} cannot be read (${err.reason})`,
            'build the harness or correct the path',
          );
      }
      if (elf && shaOk) {
        const actual = createHash('sha256').update(elf).digest('hex');
        if (actual !== (sha as string).toLowerCase()) {
          fail(
            at('sha256'),
            `${label}: sha256 mismatch: ${source} hashes to ${actual}`,
            'if the new ELF is the one you mean to run, set sha256 to that value; otherwise restore the ELF',
          );
        }
      }
    }

    if (errors.length > before) return;
    harnesses.push({
      name: name as string,
      source: source!,
      ...(reference !== undefined ? { reference } : {}),
      sha256: (sha as string).toLowerCase(),
      capabilities: caps,
      grant,
      ...(elf ? { elf } : {}),
      file,
      line: start,
    });
  });
  return { file, harnesses, errors };
}

/** Largest declaration file read: 16 MiB. */
export const MAX_DECLARATION_BYTES = 16 << 20;

/**
 * Read and parse a declaration file (see {@link parseDeclarations}).
 * @throws DeclarationError when the file cannot be read, on a syntax error, or a bad top level.
 */
export function loadDeclarations(file: string, options: ParseOptions = {}): Declarations {
  let text: string;
  try {
    text = new TextDecoder().decode(readRegularFile(file, MAX_DECLARATION_BYTES));
  } catch (e) {
    if (!(e instanceof InputFileError)) throw e;
    throw new DeclarationError(file, 0, `cannot read the declaration file (${e.reason})`, 'check the path');
  }
  return parseDeclarations(text, file, options);
}

/** Runtime facts a linked handler needs besides the declaration. */
export interface LinkOptions {
  /** berm.call depth of the tool call being linked (default 0) */
  depth?: number;
  limits?: Partial<CapabilityLimits>;
  callTool?: CapabilityContext['callTool'];
  schedule?: CapabilityContext['schedule'];
  /** the invocation's instant, ms since the epoch (see CapabilityContext.now) */
  now?: number;
  /** who the invocation acts for (see CapabilityContext.authority) */
  authority?: CapabilityContext['authority'];
  /** services on the queue's thread (see CapabilityContext.service) */
  service?: CapabilityContext['service'];
}

/**
 * Handlers to link for one harness, by wire name (berm.* and crabtalk.* aliases), only for the
 * granted capabilities: an ungranted capability is absent, so its ecall traps UnknownHostCall
 * rather than answering. Each handler is bound to a context built from the declaration (name,
 * grant) and `options`, matching the harness layer's `(fields) => reply` handler shape.
 */
export function linkerEntries(
  decl: Pick<HarnessDeclaration, 'name' | 'capabilities' | 'grant'>,
  options: LinkOptions = {},
): Map<string, (fields: Uint8Array[]) => CapabilityReply> {
  const ctx: CapabilityContext = {
    harness: decl.name,
    grant: decl.grant,
    depth: options.depth ?? 0,
    ...(options.limits ? { limits: options.limits } : {}),
    ...(options.callTool ? { callTool: options.callTool } : {}),
    ...(options.schedule ? { schedule: options.schedule } : {}),
    ...(options.now !== undefined ? { now: options.now } : {}),
    ...(options.authority ? { authority: options.authority } : {}),
    ...(options.service ? { service: options.service } : {}),
    granted: [...decl.capabilities],
  };
  const out = new Map<string, (fields: Uint8Array[]) => CapabilityReply>();
  for (const c of decl.capabilities) {
    const cap = CAPABILITIES[c];
    if (!cap) continue;
    for (const [wire, handler] of Object.entries(cap.calls)) out.set(wire, (fields) => handler(fields, ctx));
  }
  return out;
}

/** A grant value in canonical form: arrays sorted (their order never matters to a grant). */
function canonicalValue(v: unknown): unknown {
  return Array.isArray(v) ? [...v].map((x) => canonicalValue(x)).sort() : (v ?? null);
}

/**
 * Content identity of a harness image: lowercase hex sha256 over a canonical encoding of the ELF
 * bytes' sha256, the granted capabilities (sorted) and, for each, the values of its identity keys
 * ({@link Capability.identity}; arrays sorted, absent as null). The name and the file position are
 * left out, so identical declarations share one compiled image and renaming a harness is not an
 * event. A capability unknown to the registry still enters by name.
 */
export function imageIdentity(
  decl: Pick<HarnessDeclaration, 'capabilities' | 'grant'>,
  elfBytes: Uint8Array,
): string {
  const caps = [...decl.capabilities].sort();
  const canonical = JSON.stringify([
    'berm-image-v2',
    createHash('sha256').update(elfBytes).digest('hex'),
    caps.map((c) => [c, (CAPABILITIES[c]?.identity ?? []).map((k) => [k, canonicalValue(decl.grant[k])])]),
  ]);
  return createHash('sha256').update(canonical).digest('hex');
}

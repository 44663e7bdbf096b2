/**
 * The harness layer: load a harness ELF, check its manifest against its
 * exports, and invoke tools in fresh instances. Arguments are pulled by the guest
 * (berm.args.len / berm.args.read); the result comes back by (ptr, len) in a0/a1 (ABI 0) or through
 * berm.done (ABI 1); berm.fail gives a Failed result, distinct from a trap (a breakpoint, `ebreak`,
 * right after berm.fail also gives that Failed result: the guest's way to stop where it failed).
 */
import { Buffer } from 'node:buffer';
import { createRequire } from 'node:module';
import type { Ajv, ErrorObject, ValidateFunction } from 'ajv';
import { Engine, GuestModule, Linker, type InstantiateOptions } from '../engine/engine.js';
import { Breakpoint, HostCallError } from '../engine/traps.js';
import type { HostCall, HostFunction } from '../engine/host.js';
import { decodeFields, stageReply, type WireReply } from '../wire/fields.js';
import { parseManifest, type Manifest, type ToolDecl } from './manifest.js';
import { quickAccepts, simpleSchema } from './quick-schema.js';
import { schemaRegExp } from './pattern.js';

/** Prefix of tool exports (upstream ABI). */
export const TOOL_PREFIX = 'berm_tool_';

/** Size limits of one tool call, bytes. */
export interface CallLimits {
  /** largest argument payload (default 1 MiB) */
  maxArgsBytes: number;
  /** largest result or failure message (default 4 MiB) */
  maxResultBytes: number;
  /** largest capability request (default 16 MiB) */
  maxRequestBytes: number;
  /** longest log line kept; longer lines are cut (default 4 KiB) */
  maxLogLineBytes: number;
  /** most log lines kept per call (default 1000) */
  maxLogLines: number;
}

/** Defaults of CallLimits. */
export const DEFAULT_CALL_LIMITS: Readonly<CallLimits> = Object.freeze({
  maxArgsBytes: 1 << 20,
  maxResultBytes: 4 << 20,
  maxRequestBytes: 16 << 20,
  maxLogLineBytes: 4096,
  maxLogLines: 1000,
});

export type { WireReply } from '../wire/fields.js';

/** A capability call: the decoded request fields in, a reply out. Must not throw for bad guest input. */
export type WireHandler = (fields: Uint8Array[]) => WireReply;

/** Outcome of a tool call that did not trap. */
export type ToolResult =
  /** berm.done (ABI 1) or a returned (ptr, len) (ABI 0): the tool's UTF-8 result */
  | { status: 'ok'; result: string; logs: string[] }
  /** berm.fail: the tool's own failure message, which a model should see */
  | { status: 'failed'; message: string; logs: string[] };

/** Bad input to a tool call or a harness that broke the ABI (not a guest trap). */
export class HarnessError extends Error {
  override name = 'HarnessError';
}

/** Per-invocation options. */
export interface InvokeOptions extends Omit<InstantiateOptions, 'data'> {
  /** capability handlers by wire name (e.g. 'berm.fs.read'); only these are linked */
  capabilities?: ReadonlyMap<string, WireHandler>;
  /** extra raw host functions by name or number */
  hostFunctions?: ReadonlyMap<string | bigint, HostFunction>;
  limits?: Partial<CallLimits>;
  /** called for each berm.log line as it happens */
  onLog?: (line: string) => void;
}

/** The state of one tool call, handed to the core host functions as HostCall.data. */
interface CallState {
  args: Uint8Array;
  limits: CallLimits;
  staged: Uint8Array;
  done: Uint8Array | null;
  failed: Uint8Array | null;
  logs: string[];
  /** log lines past maxLogLines: neither kept nor passed to onLog, only counted */
  droppedLogs: number;
  onLog?: (line: string) => void;
  heapStart: number;
  heapSize: number;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
/** A call's staged reply before any capability call: empty, never written. */
const NO_BYTES = new Uint8Array(0);

/**
 * The UTF-8 bytes of `s`, a lone surrogate as U+FFFD (as TextEncoder does). Buffer.from rather
 * than TextEncoder.encode: on Node 20 the latter took ~0.4 µs for a 7-character string (a call
 * into C++ and a fresh ArrayBuffer), Buffer.from 65 ns (a slice of Node's 8 KiB pool).
 */
function utf8Bytes(s: string): Uint8Array {
  return Buffer.from(s, 'utf8');
}
const lossy = new TextDecoder('utf-8');

function state(call: HostCall): CallState {
  return call.data as CallState;
}
/**
 * A result or failure message over CallLimits.maxResultBytes. It is the guest's doing, not bad
 * input from the host's caller, so the call ends as a failed tool call with this message (what a
 * caller and a model see for any other tool failure) instead of a HarnessError.
 */
class ResultOverLimit extends Error {
  override name = 'ResultOverLimit';
}
/** Register a1 as the length of a result or failure message. @throws ResultOverLimit past `max`. */
function resultLen(c: HostCall, what: string, max: number): number {
  const v = c.arg(1);
  if (v > max) throw new ResultOverLimit(overLimitMessage(what, c.args[1], max));
  return v;
}
function overLimitMessage(what: string, n: bigint, max: number): string {
  return `berm refused the tool's ${what} of ${n} bytes: it is over the limit of ${max} bytes`;
}
/**
 * Offset of the first byte of `b` that does not start a well-formed UTF-8 sequence, or -1 when
 * `b` is well-formed. Well-formed as in the Unicode Standard, Table 3-7 (RFC 3629): no overlong
 * forms, no surrogates (U+D800..U+DFFF), nothing past U+10FFFF, no truncated sequence; the same
 * bytes TextDecoder's fatal mode refuses. Runs only on a result already refused, to name where.
 */
export function firstBadUtf8(b: Uint8Array): number {
  let i = 0;
  while (i < b.length) {
    const c = b[i]!;
    if (c < 0x80) {
      i++;
      continue;
    }
    let n: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) n = 1;
    else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      if (c === 0xe0) lo = 0xa0;
      else if (c === 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      if (c === 0xf0) lo = 0x90;
      else if (c === 0xf4) hi = 0x8f;
    } else return i;
    for (let k = 1; k <= n; k++) {
      const d = b[i + k];
      if (d === undefined || d < (k === 1 ? lo : 0x80) || d > (k === 1 ? hi : 0xbf)) return i;
    }
    i += n + 1;
  }
  return -1;
}
/** Register a0..a5 (i) as a guest address: a Number when exact (no BigInt), else the bigint. */
function addr(c: HostCall, i: number): number | bigint {
  const v = c.arg(i);
  return v === Infinity ? c.args[i] : v;
}

/** berm.* host calls every harness gets (the upstream ABI: arguments, result, failure, log, heap). */
const CORE: [string, HostFunction][] = [
  ['berm.args.len', (c) => state(c).args.length],
  [
    'berm.args.read',
    (c) => {
      const s = state(c);
      const n = Math.min(s.args.length, c.arg(1));
      if (n > 0) c.memory.write(addr(c, 0), s.args.subarray(0, n));
      return s.args.length;
    },
  ],
  [
    'berm.done',
    (c) => {
      const s = state(c);
      if (s.done || s.failed) throw new HarnessError('berm.done after the result was already given');
      s.done = c.memory.read(addr(c, 0), resultLen(c, 'result', s.limits.maxResultBytes));
      return 0;
    },
  ],
  [
    'berm.fail',
    (c) => {
      const s = state(c);
      if (s.done || s.failed) throw new HarnessError('berm.fail after the result was already given');
      s.failed = c.memory.read(addr(c, 0), resultLen(c, 'failure message', s.limits.maxResultBytes));
      return 0;
    },
  ],
  [
    'berm.log',
    (c) => {
      const s = state(c);
      // Past the cap a line is only counted: a guest's flood must not reach the host's stderr
      // (or memory) unbounded. The count is reported once when the call ends.
      if (s.logs.length >= s.limits.maxLogLines) {
        s.droppedLogs++;
        return 0;
      }
      const n = Math.min(c.arg(1), s.limits.maxLogLineBytes);
      const line = lossy.decode(c.memory.read(addr(c, 0), n));
      s.logs.push(line);
      s.onLog?.(line);
      return 0;
    },
  ],
  ['berm.heap.start', (c) => state(c).heapStart],
  ['berm.heap.size', (c) => state(c).heapSize],
  [
    'berm.result.read',
    (c) => {
      const s = state(c);
      const cap = Math.min(c.arg(1), s.staged.length);
      if (cap > 0) c.memory.write(addr(c, 0), s.staged.subarray(0, cap));
      return s.staged.length;
    },
  ],
];

/**
 * Wrap a capability handler as a host function: read the framed request at (a0, a1), decode it,
 * run the handler, stage the reply and return its staged length (bit 63 error, bit 62 refused).
 */
export function capabilityHostFunction(handler: WireHandler): HostFunction {
  return (c) => {
    const s = state(c);
    const n = c.arg(1);
    let reply: WireReply;
    if (n > s.limits.maxRequestBytes) {
      reply = {
        refused: `request of ${c.args[1]} bytes is over the limit of ${s.limits.maxRequestBytes}`,
      };
    } else {
      const bytes = c.memory.read(addr(c, 0), n);
      let fields: Uint8Array[] | null = null;
      try {
        fields = decodeFields(bytes);
      } catch (e) {
        reply = { refused: `malformed request: ${(e as Error).message}` };
      }
      reply ??= handler(fields!);
    }
    const staged = stageReply(reply);
    s.staged = staged.bytes;
    return staged.word;
  };
}

/**
 * A parameters-schema error as `PATH: problem`, PATH the JSON pointer of the property at fault
 * (for a missing or an unexpected property, that property's own path): `/values/1: must be
 * number`, `/values: must have required property 'values'`, `/colour: is not a parameter (the
 * schema allows no other properties)`. The CLI, bermd and MCP all report arguments this way.
 */
export function describeArgError(e: ErrorObject): string {
  const p = e.params as Record<string, unknown>;
  if (e.keyword === 'additionalProperties' && typeof p.additionalProperty === 'string')
    return `${e.instancePath}/${p.additionalProperty}: is not a parameter (the schema allows no other properties)`;
  if (e.keyword === 'required' && typeof p.missingProperty === 'string')
    return `${e.instancePath}/${p.missingProperty}: ${e.message ?? 'is required'}`;
  return `${e.instancePath || '/'}: ${e.message ?? 'is invalid'}`;
}

/** A loaded harness: its manifest and compiled module. */
export class Harness {
  private coreLinker: Linker | null = null;
  private static linkCore(linker: Linker): Linker {
    for (const [name, fn] of CORE) linker.define(name, fn);
    return linker;
  }
  private static ajvInstance: Ajv | null = null;
  /** ajv, loaded on first need: a harness whose schemas are simple and whose arguments plainly match never loads it */
  private static ajv(): Ajv {
    if (Harness.ajvInstance === null) {
      // Patterns are matched by linear-time engines only (src/harness/pattern.ts), so a harness's
      // parameter schema cannot make validation hang the host, whatever its `pattern`.
      const { Ajv } = createRequire(import.meta.url)('ajv') as typeof import('ajv');
      Harness.ajvInstance = new Ajv({
        strict: false,
        allErrors: true,
        unicodeRegExp: false,
        code: { regExp: schemaRegExp },
      });
    }
    return Harness.ajvInstance;
  }

  /**
   * Compile a tool's parameters schema with ajv, its patterns matched by a linear-time engine
   * (src/harness/pattern.ts: a guest's schema cannot make validation backtrack for ever). Every place that validates a
   * guest's arguments against its schema (the daemon's serving thread too) compiles through this.
   * @throws HarnessError naming the tool, the problem and the fix
   */
  static compileSchema(t: ToolDecl): ValidateFunction {
    try {
      return Harness.ajv().compile(t.parameters);
    } catch (e) {
      const linear = /linear time/.test((e as Error).message);
      throw new HarnessError(
        `tool ${t.name} declares an invalid parameters schema: ${(e as Error).message}; fix: ` +
          (linear
            ? 'write its patterns without backreferences or lookaround, and with repetition counts of at most 1000 (they are matched by a linear-time engine)'
            : 'correct the schema in the harness manifest (it must be a valid JSON Schema)'),
      );
    }
  }

  private constructor(
    readonly module: GuestModule,
    readonly manifest: Manifest,
    /**
     * each tool's compiled parameters schema, by tool name; a simple schema (src/harness/quick-schema.ts)
     * is compiled only when arguments do not plainly match it
     */
    private readonly validators: Map<string, ValidateFunction>,
  ) {}

  /**
   * Load and check a harness.
   * @throws ElfError for a malformed ELF; ManifestError for a bad manifest; HarnessError when a
   *   declared tool has no `berm_tool_<name>` export, an export is not declared, or a tool's
   *   parameters schema is not a valid JSON Schema or holds a `pattern` that cannot be matched in
   *   linear time (backreferences, lookaround, a repetition count over 1000): validation must never
   *   hang the host.
   */
  static async load(engine: Engine, source: Uint8Array | string): Promise<Harness> {
    return Harness.fromModule(await engine.compile(source));
  }

  /**
   * Check a compiled module as a harness (what {@link load} does after compiling): for a module
   * compiled elsewhere, e.g. a WebAssembly.Module posted from another thread.
   * @throws ManifestError for a bad manifest; HarnessError when a declared tool has no
   *   `berm_tool_<name>` export or an export is not declared.
   */
  static fromModule(module: GuestModule): Harness {
    const manifest = parseManifest(module.image.manifest);
    const exported = new Set(
      module.image.functions.flatMap((f) =>
        f.global ? f.names.filter((n) => n.startsWith(TOOL_PREFIX)) : [],
      ),
    );
    for (const t of manifest.tools) {
      if (!exported.has(TOOL_PREFIX + t.name)) {
        throw new HarnessError(
          `tool ${t.name} is declared in .berm.abi but ${TOOL_PREFIX}${t.name} is not exported`,
        );
      }
    }
    const declared = new Set(manifest.tools.map((t) => TOOL_PREFIX + t.name));
    for (const e of exported) {
      if (!declared.has(e)) throw new HarnessError(`${e} is exported but not declared in .berm.abi`);
    }
    // A simple schema is well formed by construction (no pattern, nothing ajv could refuse): it
    // is compiled later, if ever. Any other schema is compiled now, so a bad one refuses the harness.
    const validators = new Map<string, ValidateFunction>();
    for (const t of manifest.tools) {
      if (!simpleSchema(t.parameters)) validators.set(t.name, Harness.compileSchema(t));
    }
    return new Harness(module, manifest, validators);
  }

  /** The declared tool, or undefined. */
  tool(name: string): ToolDecl | undefined {
    return this.manifest.tools.find((t) => t.name === name);
  }

  /**
   * Invoke a tool in a fresh instance.
   * @param args the arguments as JSON text (validated against the tool's parameters schema) or raw bytes
   * @returns ok or failed. The guest's own mistakes are failures with berm's message: a result or
   *   failure message over `maxResultBytes` (naming both sizes), a result that is not valid UTF-8
   *   (naming the first bad byte's offset), returning without berm.done or berm.fail. A failure
   *   message that is not UTF-8 is decoded with U+FFFD in place of the bad bytes.
   *   @throws a Trap when the guest traps (a breakpoint after berm.fail is that failure),
   *   HarnessError for bad arguments, an unknown tool, or an ABI violation (berm.done twice).
   */
  invoke(toolName: string, args: string | Uint8Array, opts: InvokeOptions = {}): ToolResult {
    const decl = this.tool(toolName);
    if (!decl) {
      const known = this.manifest.tools.map((t) => t.name).join(', ') || 'none';
      throw new HarnessError(`no tool named ${toolName} (tools: ${known})`);
    }
    const limits =
      opts.limits === undefined ? DEFAULT_CALL_LIMITS : { ...DEFAULT_CALL_LIMITS, ...opts.limits };
    const argBytes = typeof args === 'string' ? utf8Bytes(args) : args;
    if (argBytes.length > limits.maxArgsBytes) {
      throw new HarnessError(
        `arguments of ${argBytes.length} bytes are over the limit of ${limits.maxArgsBytes}`,
      );
    }
    if (typeof args === 'string') this.checkArgs(decl, args);
    return this.run(TOOL_PREFIX + toolName, argBytes, limits, opts, toolName);
  }

  /**
   * Run an exported global function that is not a tool (a harness's `on_wake` or `on_notify`) in a
   * fresh instance, with `args` pulled through berm.args.len/berm.args.read like tool arguments.
   * Returning without berm.done or berm.fail is ok with an empty result.
   * @returns ok or failed (an over-limit result or one that is not UTF-8 fails, as for
   *   {@link invoke}); @throws a Trap when the guest traps (a breakpoint after berm.fail is that
   *   failure), HarnessError when `symbol` is not exported or the arguments are over the limit.
   */
  invokeExport(symbol: string, args: Uint8Array, opts: InvokeOptions = {}): ToolResult {
    if (!this.module.hasExport(symbol)) throw new HarnessError(`the harness exports no function ${symbol}`);
    const limits =
      opts.limits === undefined ? DEFAULT_CALL_LIMITS : { ...DEFAULT_CALL_LIMITS, ...opts.limits };
    if (args.length > limits.maxArgsBytes) {
      throw new HarnessError(
        `arguments of ${args.length} bytes are over the limit of ${limits.maxArgsBytes}`,
      );
    }
    return this.run(symbol, args, limits, opts, null);
  }

  /** One fresh instance running `symbol`; `toolName` null for an entry that needs no result. */
  private run(
    symbol: string,
    argBytes: Uint8Array,
    limits: CallLimits,
    opts: InvokeOptions,
    toolName: string | null,
  ): ToolResult {
    let linker: Linker;
    if ((opts.capabilities?.size ?? 0) === 0 && (opts.hostFunctions?.size ?? 0) === 0) {
      // the core host calls alone: one linker (and lookup table) for every call of this harness
      linker = this.coreLinker ??= Harness.linkCore(new Linker(this.module.engine));
    } else {
      linker = Harness.linkCore(new Linker(this.module.engine));
      for (const [name, h] of opts.capabilities ?? []) linker.define(name, capabilityHostFunction(h));
      for (const [name, fn] of opts.hostFunctions ?? []) linker.define(name, fn);
    }

    const s: CallState = {
      args: argBytes,
      limits,
      staged: NO_BYTES,
      done: null,
      failed: null,
      logs: [],
      onLog: opts.onLog,
      heapStart: this.module.layout.heapStart,
      heapSize: this.module.layout.heapSize,
      droppedLogs: 0,
    };
    // the instance options by name rather than a spread of `opts`: one object shape every call
    const io: { [K in keyof Required<InstantiateOptions>]: InstantiateOptions[K] } = {
      data: s,
      fuel: opts.fuel,
      timeoutMs: opts.timeoutMs,
      interrupt: opts.interrupt,
      fuelAccount: opts.fuelAccount,
    };
    const inst = linker.instantiate(this.module, io);
    try {
      const [a0, a1] = inst.call(symbol);
      if (s.failed) return { status: 'failed', message: lossy.decode(s.failed), logs: s.logs };
      let out = s.done;
      if (toolName === null) out ??= new Uint8Array(0);
      if (this.manifest.abi_version === 0 && out === null) {
        if (a1 > BigInt(limits.maxResultBytes)) {
          return {
            status: 'failed',
            message: overLimitMessage('result', a1, limits.maxResultBytes),
            logs: s.logs,
          };
        }
        out = inst.memory.read(a0, Number(a1));
      }
      // Returning without a result, or a result that is not UTF-8, is the guest's fault like an
      // over-limit result: the call fails with berm's message and keeps its logs.
      if (out === null) {
        const message = `tool ${toolName} returned without calling berm.done or berm.fail`;
        return { status: 'failed', message, logs: s.logs };
      }
      try {
        return { status: 'ok', result: utf8.decode(out), logs: s.logs };
      } catch {
        const message =
          `berm refused the ${toolName === null ? symbol : `tool's`} result of ${out.length} bytes: ` +
          `it is not valid UTF-8 (the first bad byte is at offset ${firstBadUtf8(out)})`;
        return { status: 'failed', message, logs: s.logs };
      }
    } catch (e) {
      // A core host call refusing the guest (a second berm.done or berm.fail) is an ABI
      // violation of the harness: report it as the HarnessError it is, not as the engine's
      // wrapper around any exception thrown by a host function.
      if (e instanceof HostCallError && e.cause instanceof HarnessError) throw e.cause;
      // A result over the limit ends the call as the tool's failure (the guest's fault); the
      // logs it wrote so far are kept.
      if (e instanceof HostCallError && e.cause instanceof ResultOverLimit) {
        return { status: 'failed', message: e.cause.message, logs: s.logs };
      }
      // `ebreak` after berm.fail ends the call with that failure: a guest that cannot return
      // from where it failed (the Rust SDK's panic handler) stops this way. Any other trap, or a
      // breakpoint without a failure, stays a trap.
      if (e instanceof Breakpoint && s.failed) {
        return { status: 'failed', message: lossy.decode(s.failed), logs: s.logs };
      }
      throw e;
    } finally {
      inst.dispose();
      if (s.droppedLogs > 0) {
        const note = `[berm: ${s.droppedLogs} more log line(s) dropped; the limit is ${limits.maxLogLines} per call]`;
        s.logs.push(note);
        s.onLog?.(note);
      }
    }
  }

  private checkArgs(decl: ToolDecl, args: string): void {
    let json: unknown;
    try {
      json = JSON.parse(args);
    } catch (e) {
      throw new HarnessError(`arguments are not valid JSON: ${(e as Error).message}`);
    }
    if (quickAccepts(decl.parameters, json)) return;
    let v = this.validators.get(decl.name);
    if (v === undefined) {
      v = Harness.compileSchema(decl);
      this.validators.set(decl.name, v);
    }
    if (!v(json)) {
      const why = (v.errors ?? []).map(describeArgError).join('; ');
      throw new HarnessError(`arguments do not match the parameters of ${decl.name}: ${why}`);
    }
  }
}

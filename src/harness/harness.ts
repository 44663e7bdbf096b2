/**
 * The harness layer (issue 3 "Harness layer"): load a harness ELF, check its manifest against its
 * exports, and invoke tools in fresh instances. Arguments are pulled by the guest
 * (berm.args.len / berm.args.read); the result comes back by (ptr, len) in a0/a1 (ABI 0) or through
 * berm.done (ABI 1); berm.fail gives a Failed result, distinct from a trap.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import { Engine, GuestModule, Linker, type InstantiateOptions } from '../engine/engine.js';
import type { HostCall, HostFunction } from '../engine/host.js';
import { decodeFields, stageReply, type WireReply } from '../wire/fields.js';
import { parseManifest, type Manifest, type ToolDecl } from './manifest.js';

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
  onLog?: (line: string) => void;
  heapStart: number;
  heapSize: number;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
const lossy = new TextDecoder('utf-8');

function state(call: HostCall): CallState {
  return call.data as CallState;
}
function len(v: bigint, what: string, max: number): number {
  if (v > BigInt(max)) throw new HarnessError(`${what} of ${v} bytes is over the limit of ${max}`);
  return Number(v);
}

/** berm.* host calls every harness gets (upstream ABI, issue 2 items 3 and 4). */
const CORE: [string, HostFunction][] = [
  ['berm.args.len', (c) => BigInt(state(c).args.length)],
  [
    'berm.args.read',
    (c) => {
      const s = state(c);
      const n = Math.min(
        s.args.length,
        Number(BigInt.asUintN(32, c.args[1] > 0xffffffffn ? 0xffffffffn : c.args[1])),
      );
      if (n > 0) c.memory.write(c.args[0], s.args.subarray(0, n));
      return BigInt(s.args.length);
    },
  ],
  [
    'berm.done',
    (c) => {
      const s = state(c);
      if (s.done || s.failed) throw new HarnessError('berm.done after the result was already given');
      s.done = c.memory.read(c.args[0], len(c.args[1], 'result', s.limits.maxResultBytes));
      return 0n;
    },
  ],
  [
    'berm.fail',
    (c) => {
      const s = state(c);
      if (s.done || s.failed) throw new HarnessError('berm.fail after the result was already given');
      s.failed = c.memory.read(c.args[0], len(c.args[1], 'failure message', s.limits.maxResultBytes));
      return 0n;
    },
  ],
  [
    'berm.log',
    (c) => {
      const s = state(c);
      const n = Number(
        c.args[1] > BigInt(s.limits.maxLogLineBytes) ? BigInt(s.limits.maxLogLineBytes) : c.args[1],
      );
      const line = lossy.decode(c.memory.read(c.args[0], n));
      if (s.logs.length < s.limits.maxLogLines) s.logs.push(line);
      s.onLog?.(line);
      return 0n;
    },
  ],
  ['berm.heap.start', (c) => BigInt(state(c).heapStart)],
  ['berm.heap.size', (c) => BigInt(state(c).heapSize)],
  [
    'berm.result.read',
    (c) => {
      const s = state(c);
      const cap = c.args[1] > BigInt(s.staged.length) ? s.staged.length : Number(c.args[1]);
      if (cap > 0) c.memory.write(c.args[0], s.staged.subarray(0, cap));
      return BigInt(s.staged.length);
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
    const n = c.args[1];
    let reply: WireReply;
    if (n > BigInt(s.limits.maxRequestBytes)) {
      reply = { refused: `request of ${n} bytes is over the limit of ${s.limits.maxRequestBytes}` };
    } else {
      const bytes = c.memory.read(c.args[0], Number(n));
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

/** A loaded harness: its manifest and compiled module. */
export class Harness {
  private readonly validators = new Map<string, ValidateFunction>();
  private static readonly ajv = new Ajv({ strict: false, allErrors: true });

  private constructor(
    readonly module: GuestModule,
    readonly manifest: Manifest,
  ) {}

  /**
   * Load and check a harness.
   * @throws ElfError for a malformed ELF; ManifestError for a bad manifest; HarnessError when a
   *   declared tool has no `berm_tool_<name>` export or an export is not declared.
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
    return new Harness(module, manifest);
  }

  /** The declared tool, or undefined. */
  tool(name: string): ToolDecl | undefined {
    return this.manifest.tools.find((t) => t.name === name);
  }

  /**
   * Invoke a tool in a fresh instance.
   * @param args the arguments as JSON text (validated against the tool's parameters schema) or raw bytes
   * @returns ok or failed; @throws a Trap when the guest traps, HarnessError for bad arguments, an
   *   unknown tool, a result that is not UTF-8 or over the limit, or an ABI violation.
   */
  invoke(toolName: string, args: string | Uint8Array, opts: InvokeOptions = {}): ToolResult {
    const decl = this.tool(toolName);
    if (!decl) {
      const known = this.manifest.tools.map((t) => t.name).join(', ') || 'none';
      throw new HarnessError(`no tool named ${toolName} (tools: ${known})`);
    }
    const limits = { ...DEFAULT_CALL_LIMITS, ...opts.limits };
    const argBytes = typeof args === 'string' ? new TextEncoder().encode(args) : args;
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
   * @returns ok or failed; @throws a Trap when the guest traps, HarnessError when `symbol` is not
   *   exported, the arguments or result are over the limit, or the result is not UTF-8.
   */
  invokeExport(symbol: string, args: Uint8Array, opts: InvokeOptions = {}): ToolResult {
    if (!this.module.hasExport(symbol)) throw new HarnessError(`the harness exports no function ${symbol}`);
    const limits = { ...DEFAULT_CALL_LIMITS, ...opts.limits };
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
    const linker = new Linker(this.module.engine);
    for (const [name, fn] of CORE) linker.define(name, fn);
    for (const [name, h] of opts.capabilities ?? []) linker.define(name, capabilityHostFunction(h));
    for (const [name, fn] of opts.hostFunctions ?? []) linker.define(name, fn);

    const s: CallState = {
      args: argBytes,
      limits,
      staged: new Uint8Array(0),
      done: null,
      failed: null,
      logs: [],
      onLog: opts.onLog,
      heapStart: this.module.layout.heapStart,
      heapSize: this.module.layout.heapSize,
    };
    const inst = linker.instantiate(this.module, { ...opts, data: s });
    try {
      const [a0, a1] = inst.call(symbol);
      if (s.failed) return { status: 'failed', message: lossy.decode(s.failed), logs: s.logs };
      let out = s.done;
      if (toolName === null) out ??= new Uint8Array(0);
      if (this.manifest.abi_version === 0 && out === null) {
        out = inst.memory.read(a0, len(a1, 'result', limits.maxResultBytes));
      }
      if (out === null)
        throw new HarnessError(`tool ${toolName} returned without calling berm.done or berm.fail`);
      try {
        return { status: 'ok', result: utf8.decode(out), logs: s.logs };
      } catch {
        throw new HarnessError(`${toolName ?? symbol} returned a result that is not valid UTF-8`);
      }
    } finally {
      inst.dispose();
    }
  }

  private checkArgs(decl: ToolDecl, args: string): void {
    let json: unknown;
    try {
      json = JSON.parse(args);
    } catch (e) {
      throw new HarnessError(`arguments are not valid JSON: ${(e as Error).message}`);
    }
    let v = this.validators.get(decl.name);
    if (!v) {
      try {
        v = Harness.ajv.compile(decl.parameters);
      } catch (e) {
        throw new HarnessError(
          `tool ${decl.name} declares an invalid parameters schema: ${(e as Error).message}`,
        );
      }
      this.validators.set(decl.name, v);
    }
    if (!v(json)) {
      const why = (v.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message}`).join('; ');
      throw new HarnessError(`arguments do not match the parameters of ${decl.name}: ${why}`);
    }
  }
}

/**
 * Runs invocations inside one worker thread: the harnesses deployed to it, each invocation in a
 * fresh instance with exactly the capabilities its grant names, and berm.call chains.
 *
 * A chain shares one interrupt flag, one deadline, one fuel account and one invocation budget:
 * a callee runs synchronously in the caller's worker (the caller is blocked in its ecall anyway),
 * starts with what the caller has left, and what it uses is gone for the caller. When a callee
 * ends with Interrupted, OutOfFuel or OutOfGas (the chain's invocation budget is spent), the chain
 * is over: the caller's berm.call does not return to the guest — the caller stops with the same
 * trap. Any other callee trap (MemoryFault, ...) is the callee's own business and reaches the
 * caller as an error reply, as before.
 */
import { Engine, GuestModule } from '../engine/engine.js';
import type { HostFunction } from '../engine/host.js';
import { Interrupted, OutOfFuel, Trap } from '../engine/traps.js';
import { capabilityHostFunction, Harness, HarnessError, type ToolResult } from '../harness/harness.js';
import { ManifestError } from '../harness/manifest.js';
import {
  CALL_DEADLINE,
  ok,
  type CapabilityLimits,
  type CapabilityReply,
  type Grant,
  type ScheduleHost,
} from '../capabilities/types.js';
import { linkerEntries } from '../config/declarations.js';
import type { ChainSpec, RunResult, TrapInfo } from './worker-messages.js';

/** The chain's invocation budget is spent: ends the whole chain like OutOfFuel. */
export class OutOfGas extends Trap {
  constructor(readonly invocations: number) {
    super(`out of gas: the chain's budget of invocations is spent (${invocations} started)`);
  }
}

/** A chain as one worker holds it while its top-level invocation runs. */
export interface ChainState {
  spec: ChainSpec;
  fuel: { left: number; readonly budget: number };
  invocationsLeft: number;
  started: number;
  interrupt: SharedArrayBuffer;
  /** the trap that ended the chain, once one did */
  abort: Trap | null;
}

/** A harness deployed to this worker. */
interface Deployed {
  harness: Harness;
  decl: { name: string; capabilities: string[]; grant: Grant };
}

/** The trap kinds that end a whole chain rather than one invocation of it. */
export function endsChain(t: Trap): boolean {
  return t instanceof Interrupted || t instanceof OutOfFuel || t instanceof OutOfGas;
}

/** A trap as plain data. */
export function trapInfo(t: Trap): TrapInfo {
  return {
    name: t.name,
    message: t.message,
    pc: t.pc,
    symbol: t.symbol ?? null,
    offset: t.offset ?? 0,
    backtrace: t.backtrace.map((f) => ({ symbol: f.symbol, address: f.address })),
  };
}

/** Runs invocations of the harnesses deployed to one thread. */
export class Executor {
  private readonly harnesses = new Map<string, Deployed>();

  /**
   * @param engine the thread's engine (its options must match the compiling engine's)
   * @param capabilityLimits overrides of the capabilities' limits (maxCallDepth included)
   * @param bridge the due-set and the queue's services as seen by `harness` in `chain` (the
   *   worker's synchronous path to the queue's thread); without one, the schedule capability and
   *   the services answer an error (a run outside the queue: `berm call --config`)
   * @param defaultDatabase the storage capability's database for grants that name none
   * @param unknownHarness the error for a harness that is not deployed here (default
   *   UnknownHarness "no harness named X is deployed")
   */
  constructor(
    readonly engine: Engine,
    private readonly capabilityLimits: Partial<CapabilityLimits>,
    private readonly bridge: {
      scheduleFor?: (harness: string, chain: ChainState) => ScheduleHost;
      serviceFor?: (
        harness: string,
        chain: ChainState,
      ) => (name: string, request: unknown) => CapabilityReply;
    },
    private readonly defaultDatabase: string | null,
    private readonly unknownHarness: (name: string) => Error = (name) =>
      new UnknownHarness(`no harness named ${name} is deployed`),
  ) {}

  /**
   * Deploy a harness from its ELF bytes and a module compiled elsewhere (or compile it here when
   * `module` is null).
   * @param warm make an instance now (kept for the first invocation)
   * @throws ElfError, ManifestError or HarnessError for a bad image; RangeError when V8 cannot
   *   allocate the instance's memory (with `warm`; nothing deployed then).
   */
  async deploy(
    name: string,
    elf: Uint8Array,
    module: { wasm: WebAssembly.Module; info: GuestModule['info'] } | null,
    capabilities: string[],
    grant: Grant,
    warm = true,
  ): Promise<Harness> {
    let gm: GuestModule;
    if (module === null) {
      gm = await this.engine.compile(elf);
    } else {
      // the engine parses (or restores from its cache's image summary) and remembers the image
      gm = this.engine.moduleFor(elf, module.wasm, module.info);
    }
    const harness = Harness.fromModule(gm);
    // one instance slot made now (memory + Wasm instance), so the first invocation does not pay it
    if (warm) gm.releaseSlot(gm.takeSlot());
    this.add(name, harness, capabilities, grant);
    return harness;
  }

  /**
   * Deploy an already compiled harness as `name` with `capabilities` and their `grant` (several
   * names may share one Harness: grants are linked per invocation).
   */
  add(name: string, harness: Harness, capabilities: readonly string[], grant: Grant): void {
    const g: Grant = { ...grant };
    if (capabilities.includes('storage') && g.database === undefined && this.defaultDatabase !== null)
      g.database = this.defaultDatabase;
    const before = this.harnesses.get(name)?.harness;
    this.harnesses.set(name, { harness, decl: { name, capabilities: [...capabilities], grant: g } });
    if (before !== undefined && before !== harness) this.released(before);
  }

  undeploy(name: string): void {
    const before = this.harnesses.get(name)?.harness;
    this.harnesses.delete(name);
    if (before !== undefined) this.released(before);
  }

  /** `harness` left a name: its kept instance slots go unless another name still runs its module. */
  private released(harness: Harness): void {
    for (const d of this.harnesses.values()) if (d.harness.module === harness.module) return;
    harness.module.release();
  }

  /**
   * Swap in the optimised tier `wasm` (described by `info`) for every harness deployed with the
   * baseline-tier module whose cache key is `from`: instances made from then on run it (in-flight
   * ones finish on the baseline tier; GuestModule.upgrade).
   */
  upgrade(from: string, wasm: WebAssembly.Module, info: GuestModule['info']): void {
    for (const { harness } of this.harnesses.values()) {
      const gm = harness.module;
      if (gm.info.tier === 'baseline' && gm.info.key === from)
        gm.upgrade(wasm, info.key, info.wasmBytes, 'optimized');
    }
  }

  /**
   * A fresh chain state for a top-level run.
   * @param fuel the chain's fuel account (default a plain one holding the spec's fuel): a worker
   *   passes one that also publishes what the run has taken
   */
  static chain(
    spec: ChainSpec,
    interrupt: SharedArrayBuffer,
    fuel: { left: number; readonly budget: number } = { left: spec.fuelLeft, budget: spec.fuelBudget },
  ): ChainState {
    return {
      spec,
      fuel,
      invocationsLeft: spec.invocationsLeft,
      started: 0,
      interrupt,
      abort: null,
    };
  }

  /**
   * Run one top-level invocation of a chain. Never throws.
   * @param kind 'tool' for a declared tool (text arguments checked against its schema), 'export'
   *   for on_wake / on_notify
   * @param now the invocation's instant, ms since the epoch (its record's `now`, or its start):
   *   the schedule capability counts this invocation's delays from it; a callee it calls
   *   (berm.call) counts from its own start
   */
  run(
    chain: ChainState,
    harness: string,
    kind: 'tool' | 'export',
    entry: string,
    args: string | Uint8Array,
    onLog: ((line: string) => void) | undefined,
    now: number = Date.now(),
  ): { result: RunResult; logs: string[] } {
    // The invocation's own log lines as they happen (the harness hands each line it keeps to its
    // onLog, so they are its result's logs too): a trap (or an ABI error) throws its result away,
    // and the lines that led up to it are the ones worth keeping (the journal's reader, `berm worker
    // --verbose`). A callee's lines are not in it (they stream through onLog only).
    const logs: string[] = [];
    try {
      const r = this.invoke(chain, harness, kind, entry, args, chain.spec.depth, onLog, now, logs);
      if (chain.abort) return { result: { status: 'trapped', trap: trapInfo(chain.abort) }, logs };
      return {
        result:
          r.status === 'ok' ? { status: 'ok', result: r.result } : { status: 'failed', message: r.message },
        logs,
      };
    } catch (e) {
      if (e instanceof Trap) return { result: { status: 'trapped', trap: trapInfo(chain.abort ?? e) }, logs };
      const err = e instanceof Error ? e : new Error(String(e));
      if (err instanceof UnknownHarness)
        return { result: { status: 'error', code: 'unknown-harness', message: err.message }, logs };
      if (err instanceof HarnessError) {
        const code = /^no tool named /.test(err.message)
          ? 'unknown-tool'
          : /^arguments /.test(err.message)
            ? 'bad-args'
            : 'harness';
        return { result: { status: 'error', code, message: err.message }, logs };
      }
      if (err instanceof ManifestError)
        return { result: { status: 'error', code: 'harness', message: err.message }, logs };
      return { result: { status: 'error', code: 'internal', message: `${err.name}: ${err.message}` }, logs };
    }
  }

  /**
   * Run the tool `tool` of `harness` as the top-level invocation of `chain`, at the chain's depth,
   * and throw what ends it (the caller of a run outside the queue reports traps itself).
   * @returns ok or failed
   * @throws the Trap that ended the chain (a callee's Interrupted, OutOfFuel or OutOfGas ends its
   *   caller too); HarnessError for an unknown tool or bad arguments; the unknown-harness error
   */
  call(
    chain: ChainState,
    harness: string,
    tool: string,
    args: string | Uint8Array,
    onLog?: (line: string) => void,
  ): ToolResult {
    try {
      const r = this.invoke(chain, harness, 'tool', tool, args, chain.spec.depth, onLog, Date.now());
      if (chain.abort) throw chain.abort;
      return r;
    } catch (e) {
      if (e instanceof Trap && chain.abort) throw chain.abort;
      throw e;
    }
  }

  /**
   * One invocation of a chain at `depth`; `seen` (when given) gets each of its log lines as it is
   * written. @throws Trap, HarnessError, UnknownHarness.
   */
  private invoke(
    chain: ChainState,
    name: string,
    kind: 'tool' | 'export',
    entry: string,
    args: string | Uint8Array,
    depth: number,
    onLog: ((line: string) => void) | undefined,
    now: number,
    seen?: string[],
  ): ToolResult {
    const d = this.harnesses.get(name);
    if (!d) throw this.unknownHarness(name);
    if (chain.invocationsLeft <= 0) {
      chain.abort ??= new OutOfGas(chain.started);
      throw chain.abort;
    }
    chain.invocationsLeft--;
    chain.started++;
    const here = { ...chain, spec: { ...chain.spec, depth } };
    const entries = linkerEntries(d.decl, {
      depth,
      // host calls are bounded by the chain's deadline too (capabilities clamp their timeouts)
      limits: { ...this.capabilityLimits, [CALL_DEADLINE]: chain.spec.deadline },
      callTool: (callee, tool, argsJson, calleeDepth) =>
        this.callTool(chain, callee, tool, argsJson, calleeDepth, onLog),
      ...(this.bridge.scheduleFor ? { schedule: this.bridge.scheduleFor(name, here) } : {}),
      now,
      ...(this.bridge.serviceFor ? { service: this.bridge.serviceFor(name, here) } : {}),
      ...(chain.spec.authority ? { authority: chain.spec.authority } : {}),
    });
    const hostFunctions = new Map<string, HostFunction>();
    for (const [wire, handler] of entries) {
      const fn = capabilityHostFunction(handler);
      // after any capability call (berm.call above all), a chain that ended stops this guest too
      hostFunctions.set(wire, (c) => {
        const r = fn(c);
        if (chain.abort) throw chainEnded(chain.abort);
        return r;
      });
    }
    const log = seen
      ? (line: string) => {
          seen.push(line);
          onLog?.(line);
        }
      : onLog;
    const opts = {
      hostFunctions,
      interrupt: chain.interrupt,
      fuelAccount: chain.fuel,
      timeoutMs: Math.max(0, chain.spec.deadline - Date.now()),
      ...(log ? { onLog: log } : {}),
    };
    try {
      if (kind === 'tool') return d.harness.invoke(entry, args, opts);
      const bytes = typeof args === 'string' ? new TextEncoder().encode(args) : args;
      return d.harness.invokeExport(entry, bytes, opts);
    } catch (e) {
      if (e instanceof Trap && endsChain(e)) chain.abort ??= e;
      throw e;
    }
  }

  /** berm.call: run the callee one level deeper in this chain; a reply for the caller. */
  private callTool(
    chain: ChainState,
    callee: string,
    tool: string,
    argsJson: string,
    depth: number,
    onLog: ((line: string) => void) | undefined,
  ): CapabilityReply {
    const where = `${callee}.${tool}`;
    if (depth > chain.spec.maxDepth) {
      return { refused: `berm.call: call chain depth ${depth} exceeds the limit of ${chain.spec.maxDepth}` };
    }
    try {
      const r = this.invoke(chain, callee, 'tool', tool, argsJson, depth, onLog, Date.now());
      return r.status === 'ok' ? ok(r.result) : { error: r.message };
    } catch (e) {
      if (e instanceof Trap) return { error: `${where} trapped: ${e.name}: ${e.message} at ${e.where()}` };
      const err = e instanceof Error ? e : new Error(String(e));
      return { error: `${where}: ${err.name}: ${err.message}` };
    }
  }
}

/** The caller's copy of the trap that ended its chain (same name; the callee's place in the message). */
function chainEnded(t: Trap): Trap {
  const c = new Trap(`the chain ended in a callee: ${t.message}${t.pc >= 0 ? ` (at ${t.where()})` : ''}`);
  c.name = t.name;
  return c;
}

/** berm.call or a trigger named a harness this worker does not have. */
export class UnknownHarness extends Error {
  override name = 'UnknownHarness';
}

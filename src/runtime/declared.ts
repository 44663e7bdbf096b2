/**
 * The runtime of an operator's declaration file: every declared harness
 * compiled from its verified bytes, and tool calls that link exactly the capabilities the
 * declaration grants. A capability a harness's manifest asks for but the declaration does not
 * grant is simply not linked (its ecall traps UnknownHostCall): the manifest is documentation.
 *
 * Harnesses with the same {@link imageIdentity} (same ELF bytes, same grants and arguments) share
 * one in-memory {@link Harness}: a rename is not an event. (Sharing goes further: grants are
 * linked per call, so every declaration of the same ELF bytes shares the compiled Harness.)
 *
 * A call runs on the queue's {@link Executor} (executor.ts), with its chain rules: `berm.call` is
 * resolved by name on each call and runs the callee in its own fresh instance with its own grants,
 * one chain level deeper; the call capability refuses chains past the depth limit; the chain
 * shares one deadline and one fuel budget; a callee that fails, names an unknown tool or traps
 * reaches the caller as a reply, except Interrupted and OutOfFuel, which end the whole chain (the
 * caller stops with the same trap). There is no due-set here: the schedule capability and the
 * queue's services answer an error.
 */
import { randomUUID } from 'node:crypto';
import type { Engine } from '../engine/engine.js';
import { Harness, type InvokeOptions, type ToolResult } from '../harness/harness.js';
import { DEFAULT_LIMITS, type CapabilityLimits } from '../capabilities/types.js';
import {
  DeclarationError,
  imageIdentity,
  type Declarations,
  type HarnessDeclaration,
} from '../config/declarations.js';
import { Executor } from './executor.js';

/** A call the runtime cannot make: unknown harness, a harness refused by its declaration, or too deep. */
export class RuntimeError extends Error {
  override name = 'RuntimeError';
}

/** Options of {@link Runtime.create}. */
export interface RuntimeOptions {
  /** capability limits (overrides of DEFAULT_LIMITS), including maxCallDepth */
  limits?: Partial<CapabilityLimits>;
  /**
   * Options of every call: `fuel` is the budget of the whole chain (the call and every berm.call
   * it makes draw on it; default unlimited), `timeoutMs` its deadline from the call's start
   * (default none), `onLog` gets the berm.log lines of the chain as they happen. Capabilities are
   * never taken from here: only the declaration grants.
   */
  invoke?: Pick<InvokeOptions, 'fuel' | 'timeoutMs' | 'onLog'>;
  /**
   * Compile only these harnesses and, transitively, the callees their declarations name (default:
   * every declared harness). A call to a harness left out throws / is answered with an error.
   */
  only?: readonly string[];
}

/** One declared harness as the runtime holds it. */
export interface LoadedHarness {
  declaration: HarnessDeclaration;
  /** {@link imageIdentity} of the declaration */
  identity: string;
  /** the compiled harness, shared by every declaration of the same identity (indeed of the same ELF) */
  harness: Harness;
}

/** Declared harnesses, compiled, and the tool calls between them. */
export class Runtime {
  private constructor(
    /** the engine every harness is compiled with */
    readonly engine: Engine,
    private readonly loaded: ReadonlyMap<string, LoadedHarness>,
    private readonly declared: ReadonlyMap<string, HarnessDeclaration>,
    /** the declaration file: accepted entries and refused ones (each with file:line and the fix) */
    readonly declarations: Declarations,
    private readonly options: RuntimeOptions,
    private readonly executor: Executor,
  ) {}

  /**
   * Compile the declared harnesses (see {@link RuntimeOptions.only}). Declarations with the same
   * image identity (indeed with the same ELF bytes) share one Harness.
   * @param decls the parsed declaration file (its refused entries are kept in `errors`)
   * @throws DeclarationError when a harness in `only` was refused by the file (its error), or a
   *   declaration lacks its verified ELF bytes (parsed with checkFiles false); RuntimeError when a
   *   name in `only` is not declared; whatever Harness.load throws for a malformed harness.
   */
  static async create(engine: Engine, decls: Declarations, options: RuntimeOptions = {}): Promise<Runtime> {
    const declared = new Map(decls.harnesses.map((d) => [d.name, d]));
    const wanted = new Set<string>();
    if (options.only) {
      const queue = [...options.only];
      while (queue.length > 0) {
        const name = queue.shift()!;
        if (wanted.has(name)) continue;
        const d = declared.get(name);
        if (!d) {
          if (options.only.includes(name)) throw Runtime.notDeclared(decls, name);
          continue; // a callee that is not declared: berm.call answers with an error
        }
        wanted.add(name);
        queue.push(...(d.grant.callees ?? []));
      }
    } else {
      for (const name of declared.keys()) wanted.add(name);
    }
    const byElf = new Map<string, Promise<Harness>>();
    const loaded = new Map<string, LoadedHarness>();
    const executor = new Executor(engine, options.limits ?? {}, {}, null, (name) =>
      declared.has(name)
        ? new RuntimeError(`harness ${name} was not compiled by this runtime (see RuntimeOptions.only)`)
        : Runtime.notDeclared(decls, name),
    );
    for (const name of wanted) {
      const d = declared.get(name)!;
      if (!d.elf) {
        throw new DeclarationError(
          d.file,
          d.line,
          `harness ${JSON.stringify(name)}: the ELF bytes were not read`,
          'load the declarations with checkFiles enabled',
        );
      }
      const identity = imageIdentity(d, d.elf);
      // keyed by the ELF digest: grants are linked per call, so equal bytes (every equal identity,
      // and also the same ELF under other grants) share one compiled Harness
      let h = byElf.get(d.sha256);
      if (!h) {
        h = Harness.load(engine, d.elf);
        byElf.set(d.sha256, h);
      }
      const harness = await h;
      loaded.set(name, { declaration: d, identity, harness });
      executor.add(name, harness, d.capabilities, d.grant);
    }
    return new Runtime(engine, loaded, declared, decls, options, executor);
  }

  /** The error for a name that is not among the accepted harnesses: its refusal, or "not declared". */
  private static notDeclared(decls: Declarations, name: string): Error {
    const refused = decls.errors.find((e) => e.problem.startsWith(`harness ${JSON.stringify(name)}:`));
    if (refused) return refused;
    const known = decls.harnesses.map((d) => d.name).join(', ') || 'none';
    return new RuntimeError(`${decls.file}: no harness named ${name} is declared (declared: ${known})`);
  }

  /** Names of the compiled harnesses, in declaration order. */
  names(): string[] {
    return [...this.loaded.keys()];
  }

  /** The compiled harness declared as `name`, or undefined. */
  get(name: string): LoadedHarness | undefined {
    return this.loaded.get(name);
  }

  /** The deepest berm.call chain (a top-level call has depth 0). */
  get maxCallDepth(): number {
    return this.options.limits?.maxCallDepth ?? DEFAULT_LIMITS.maxCallDepth;
  }

  /**
   * Invoke `tool` of the harness declared as `harnessName` in a fresh instance, linking only the
   * capabilities its declaration grants, as the top of a new chain (see the module's comment).
   * @param argsJson the arguments as JSON text (checked against the tool's schema), or raw bytes
   *   handed over unchecked
   * @param depth berm.call chain depth of this call (0 from outside)
   * @returns ok or failed
   * @throws a Trap when the guest traps (UnknownHostCall for an ungranted capability; a callee's
   *   Interrupted or OutOfFuel); HarnessError for an unknown tool or bad arguments;
   *   DeclarationError / RuntimeError for a harness that is not declared, was refused or was not
   *   compiled, or a depth past the limit.
   */
  call(harnessName: string, tool: string, argsJson: string | Uint8Array, depth = 0): ToolResult {
    if (!Number.isInteger(depth) || depth < 0 || depth > this.maxCallDepth) {
      throw new RuntimeError(`call chain depth ${depth} is outside 0..${this.maxCallDepth}`);
    }
    const { fuel, timeoutMs, onLog } = this.options.invoke ?? {};
    const chain = Executor.chain(
      {
        id: randomUUID(),
        depth,
        deadline: timeoutMs !== undefined ? Date.now() + timeoutMs : Infinity,
        fuelLeft: fuel ?? Infinity,
        fuelBudget: fuel ?? 0,
        invocationsLeft: Infinity,
        maxDepth: this.maxCallDepth,
      },
      new SharedArrayBuffer(4),
    );
    return this.executor.call(chain, harnessName, tool, argsJson, onLog);
  }
}

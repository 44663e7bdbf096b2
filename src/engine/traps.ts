/**
 * Typed guest traps. Every trap carries the guest pc, the function symbol
 * and offset, and a short guest backtrace; they are filled in by the engine when the trap leaves
 * the guest, so the success path pays nothing for symbolisation.
 */
import { hostCallName, hostCallOwners } from '../util/host-call-names.js';

/** One guest frame of a trap backtrace. */
export interface GuestFrame {
  /** symbol of the guest function */
  symbol: string;
  /** entry address of the function */
  address: number;
}

/** Base class of everything that ends a guest run abnormally. */
export class Trap extends Error {
  /** guest pc of the trapping instruction (for Interrupted/OutOfFuel: the pc of the check); -1 if unknown */
  pc = -1;
  /** the function containing pc, or '' */
  symbol = '';
  /** pc - function entry, bytes */
  offset = 0;
  /** innermost first */
  backtrace: GuestFrame[] = [];
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
  /** `symbol+0xoffset` or the bare pc. */
  where(): string {
    if (this.pc < 0) return 'unknown pc';
    const at = `pc 0x${this.pc.toString(16)}`;
    return this.symbol ? `${at} (${this.symbol}+0x${this.offset.toString(16)})` : at;
  }
}

/** A load or store outside guest memory (address below the image, null, or past the end). */
export class MemoryFault extends Trap {
  constructor(readonly address: bigint) {
    super(`memory fault at guest address 0x${address.toString(16)}`);
  }
}

/** An indirect call or jump to an address that is not a relocation-named function entry. */
export class BadIndirectTarget extends Trap {
  constructor(readonly target: bigint) {
    super(`indirect jump to 0x${target.toString(16)}, which is not a function entry named by a relocation`);
  }
}

/** `ebreak` (or `c.ebreak`) executed. */
export class Breakpoint extends Trap {
  constructor() {
    super('breakpoint (ebreak)');
  }
}

/** A reserved or illegal encoding executed; `bits` is the raw encoding. */
export class IllegalInstruction extends Trap {
  constructor(readonly bits: number) {
    super(`illegal instruction 0x${bits.toString(16)}`);
  }
}

/**
 * `ecall` with a number nothing is linked under. The message names the call when its name is
 * known and, for a capability's call, the capability whose grant would link it, e.g. `unknown host
 * call 0x29dacfd913edc957 (berm.http.fetch): it is not linked into this instance: capability "http"
 * is not granted to this harness (an operator grants it in the declaration file: capabilities =
 * ["http"]; docs/capabilities.md)`.
 */
export class UnknownHostCall extends Trap {
  constructor(readonly number: bigint) {
    super(`unknown host call 0x${number.toString(16).padStart(16, '0')}` + unknownHostCallReason(number));
  }
}

function unknownHostCallReason(number: bigint): string {
  const name = hostCallName(number);
  if (name === undefined) return ': nothing is registered under it';
  const owners = hostCallOwners(number);
  if (owners.length === 0) return ` (${name}): it is not linked into this instance (not a tool call)`;
  const what =
    owners.length === 1
      ? `capability "${owners[0]}" is not granted`
      : `none of the capabilities answering it (${owners.join(', ')}) is granted`;
  return (
    ` (${name}): it is not linked into this instance: ${what} to this harness (an operator grants ` +
    `it in the declaration file: capabilities = ["${owners[0]}"]; docs/capabilities.md)`
  );
}

/** A host function threw; `cause` is what it threw. */
export class HostCallError extends Trap {
  constructor(
    readonly number: bigint,
    cause: unknown,
  ) {
    super(
      `host call 0x${number.toString(16).padStart(16, '0')} failed: ${cause instanceof Error ? cause.message : String(cause)}`,
    );
    this.cause = cause;
  }
}

/** The interrupt handle was raised, or the run's deadline passed. */
export class Interrupted extends Trap {
  constructor(reason = 'interrupted') {
    super(reason);
  }
}

/** The fuel budget (guest instructions, counted at loop back edges and function entries) ran out. */
export class OutOfFuel extends Trap {
  constructor(readonly budget: number) {
    super(`out of fuel: the budget of ${budget} was used up`);
  }
}

/**
 * The guest's sp was outside the stack at a function entry (below the stack limit, or above the end
 * of memory), or the host's Wasm call stack ran out (deep recursion).
 */
export class StackOverflow extends Trap {
  constructor(detail: string) {
    super(`stack overflow: ${detail}`);
  }
}

/**
 * The trap of a function entry's check, which requires stackLimit <= sp <= end (docs/
 * engine.md, frame accesses): the message names the bound `sp` crossed and its value.
 * (A function, not a static method: a class that refers to itself in a static member is renamed
 * by esbuild, and a trap's name is its class name.)
 * @param sp the guest's sp at the entry, as the trap import reports it (any bigint; read as u64)
 * @param stackLimit the lowest address the stack may reach (guest address)
 * @param end the end of guest memory, base + size (guest address, exclusive)
 */
export function stackOverflowAtEntry(sp: bigint, stackLimit: number, end: number): StackOverflow {
  const u = BigInt.asUintN(64, sp);
  const hex = (v: bigint | number) => `0x${v.toString(16)}`;
  return new StackOverflow(
    u > BigInt(end)
      ? `sp ${hex(u)} is above the end of memory ${hex(end)}`
      : `sp ${hex(u)} is below the stack limit ${hex(stackLimit)}`,
  );
}

/** Execution ran past the last instruction of a function (a missing return). */
export class FellOffFunction extends Trap {
  constructor() {
    super('execution ran past the end of a function');
  }
}

/**
 * A WebAssembly trap of a Wasm harness image, as V8 reported it (an out-of-bounds memory access,
 * an integer division by zero, a failed indirect call, ...): the message is V8's.
 */
export class WasmTrap extends Trap {
  constructor(reason: string) {
    super(`WebAssembly trap: ${reason}`);
  }
}

/**
 * `unreachable` executed in a Wasm harness image: the Wasm form of `ebreak` (a guest's abort), so
 * after berm.fail it ends the call with that failure, as a breakpoint does.
 */
export class Unreachable extends Breakpoint {
  constructor() {
    super();
    this.message = 'unreachable executed (the guest aborted)';
  }
}

/** A Wasm harness image grew its memory past the configured limit (memory.grow). */
export class MemoryLimitExceeded extends Trap {
  constructor(
    readonly pages: number,
    readonly limit: number,
  ) {
    super(
      `memory limit: memory.grow by ${pages} page(s) would pass the configured limit of ${limit} bytes ` +
        `(${limit / 65536} pages)`,
    );
  }
}

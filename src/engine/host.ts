/**
 * What a host function sees of the guest during one `ecall` (RISC-V unprivileged spec, "ECALL";
 * upstream berm ABI: number in a7, arguments in a0..a5, result in a0 and optionally a1).
 */

/** Guest memory as host functions use it. Addresses are guest virtual addresses. */
export interface GuestMemory {
  /**
   * Copy `length` bytes starting at guest address `address`.
   * @throws MemoryFault when any byte of [address, address + length) lies outside guest memory.
   */
  read(address: bigint | number, length: number): Uint8Array;
  /**
   * Copy `bytes` into guest memory at `address`.
   * @throws MemoryFault when any byte of the destination lies outside guest memory.
   */
  write(address: bigint | number, bytes: Uint8Array): void;
}

/**
 * One ecall as seen by the host function registered for its number. The engine reads a0..a5 only
 * when asked: `arg(i)` reads one as a Number without allocating, `args` builds BigInts on first
 * use (prefer `arg` on hot paths).
 */
export interface HostCall {
  /** a7: the call number (FNV-1a-64 of the capability name), unsigned */
  readonly number: bigint;
  /** a0..a5 as unsigned 64-bit values (built on first use) */
  readonly args: readonly [bigint, bigint, bigint, bigint, bigint, bigint];
  /**
   * a0..a5 (i = 0..5) as an unsigned integer Number, exact below 2^53; a register at or above
   * 2^53 reads as Infinity (no guest address or length is that large: read `args[i]` for its
   * exact bits, e.g. to name it in a message).
   * @throws RangeError when i is not 0..5
   */
  arg(i: number): number;
  readonly memory: GuestMemory;
  /** the per-instance value given to Linker.instantiate(), e.g. the harness layer's call state */
  readonly data: unknown;
}

/**
 * A host function: returns the new a0 (a1 unchanged), or [a0, a1]. Numbers must be safe integers;
 * negative values are taken modulo 2^64. Throwing ends the guest with HostCallError{cause}, except
 * that a thrown Trap (for example MemoryFault from `memory.read`) propagates as itself.
 */
export type HostFunction = (
  call: HostCall,
) => bigint | number | readonly [bigint | number, bigint | number] | void;

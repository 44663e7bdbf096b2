/**
 * Host-side view of one instance's guest memory (src/engine/host.ts GuestMemory). Bounds are
 * checked against [base, base + size): the same rule translated code follows.
 */
import type { GuestMemory } from './host.js';
import { MemoryFault } from './traps.js';

/** Guest memory backed by a WebAssembly.Memory; Wasm address = guest address - base. */
export class WasmGuestMemory implements GuestMemory {
  /**
   * Host writes are dirty too, tracked like translated stores: writes at or above `dirtySplit`
   * lower dirtyLo (size when none), writes below raise dirtyHi (0 when none).
   */
  dirtyLo: number;
  dirtyHi = 0;
  constructor(
    readonly memory: WebAssembly.Memory,
    /** guest address of Wasm address 0 */
    readonly base: number,
    /** bytes */
    readonly size: number,
    /** Wasm offset separating the image/heap side from the stack side (the end of the heap) */
    readonly dirtySplit: number = size,
  ) {
    this.dirtyLo = size;
  }

  /** Wasm offset of [address, address + length), or throws MemoryFault naming the first bad byte. */
  offset(address: bigint | number, length: number): number {
    if (!Number.isSafeInteger(length) || length < 0) throw new RangeError(`bad length ${length}`);
    if (typeof address === 'number' && address >= 0 && Number.isSafeInteger(address)) {
      // the common case (an address read with HostCall.arg): no BigInt arithmetic
      const e = address - this.base;
      if (e >= 0 && e + length <= this.size) return e;
    }
    const a = BigInt.asUintN(64, BigInt(address));
    const e = a - BigInt(this.base);
    if (e < 0n) throw new MemoryFault(a);
    if (e + BigInt(length) > BigInt(this.size))
      throw new MemoryFault(e >= BigInt(this.size) ? a : BigInt(this.base + this.size));
    return Number(e);
  }

  /**
   * {@inheritDoc GuestMemory.read}
   * A zero-length range touches no byte, so it never faults, whatever the address: a guest may
   * pass any pointer with length 0 (Rust's empty slices and vectors carry a dangling, non-null one).
   */
  read(address: bigint | number, length: number): Uint8Array {
    if (length === 0) return new Uint8Array(0);
    const off = this.offset(address, length);
    return new Uint8Array(this.memory.buffer, off, length).slice();
  }

  /** {@inheritDoc GuestMemory.write} Like read, writing zero bytes never faults. */
  write(address: bigint | number, bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    const off = this.offset(address, bytes.length);
    const end = off + bytes.length;
    if (end > this.dirtySplit && Math.max(off, this.dirtySplit) < this.dirtyLo)
      this.dirtyLo = Math.max(off, this.dirtySplit);
    if (off < this.dirtySplit && Math.min(end, this.dirtySplit) > this.dirtyHi)
      this.dirtyHi = Math.min(end, this.dirtySplit);
    new Uint8Array(this.memory.buffer, off, bytes.length).set(bytes);
  }
}

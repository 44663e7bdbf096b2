/**
 * Fuel: the charges on function entry and on back edges, the poll when a slice runs out, and the
 * optimising tier's fuel local (read in on entry and after calls, written back before them).
 */
import type { Ref } from './builder.js';
import { L_F, L_FUEL, Names, chargeFuel } from './emit-frame.js';
import { EmitterCore } from './emit-core.js';

/** FuelEmitter: see the module comment. */
export abstract class FuelEmitter extends EmitterCore {
  protected fuel(cost: number, pc: number): Ref {
    return this.fuelBy(this.c32(cost), pc);
  }
  /** Charge `cost` (an i32 expression) of fuel; poll the engine when the slice runs out. */
  protected fuelBy(cost: Ref, pc: number): Ref {
    this.charged = true;
    if (!this.fuelLocal) return chargeFuel(this.m, this.t, cost, this.c32(pc), L_F);
    const m = this.m;
    return m.block(null, [
      m.local.set(L_FUEL, m.i32.sub(m.local.get(L_FUEL, this.t.i32), cost)),
      m.if(
        m.i32.lt_s(m.local.get(L_FUEL, this.t.i32), m.i32.const(0)),
        m.local.set(L_FUEL, m.call(Names.poll, [this.c32(pc)], this.t.i32)),
      ),
    ]);
  }
  /**
   * A back edge's charge without the test and the poll (see {@link pollsOnBackEdge}): the count
   * may go below 0 here; the next charge polls.
   */
  protected fuelNoPoll(cost: number): Ref {
    this.charged = true;
    const m = this.m;
    const i32 = this.t.i32;
    return this.fuelLocal
      ? m.local.set(L_FUEL, m.i32.sub(m.local.get(L_FUEL, i32), this.c32(cost)))
      : m.global.set(Names.fuel, m.i32.sub(m.global.get(Names.fuel, i32), this.c32(cost)));
  }
  /** Before control leaves for another guest function: the global takes the local (L_FUEL). */
  protected fuelOut(): Ref {
    return this.fuelLocal
      ? this.m.global.set(Names.fuel, this.m.local.get(L_FUEL, this.t.i32))
      : this.m.nop();
  }
  /** After a call to a guest function returned: the local takes the global (L_FUEL). */
  protected fuelIn(): Ref {
    return this.fuelLocal
      ? this.m.local.set(L_FUEL, this.m.global.get(Names.fuel, this.t.i32))
      : this.m.nop();
  }
  /**
   * Charge the fuel of entering the function at `address`, at the site (`pc`) that transfers
   * control there. The caller charges rather than the callee: the poll's call then sits next to
   * the real call, where the caller's live values are saved anyway, instead of at every callee
   * entry, where V8 would save the callee's parameters on every call to keep them across it.
   */
  protected enterFuel(address: number, pc: number): Ref {
    return this.fuel(this.ctx.entryCosts.get(address)!, pc);
  }
}

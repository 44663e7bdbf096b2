// Guest memory ends where the guest's bytes end: the page after them in the Wasm memory holds the
// ecall argument area (a0..a5 of the current ecall, src/translate/abi.ts ECALL_ARGS), which no
// guest access and no host access through GuestMemory may reach. Every access kind
// (test/data/bounds.s: loads, stores, compressed forms, LR/SC, AMOs, large imm) on both tiers: an
// access of w bytes at a is allowed iff base <= a and a + w <= base + size (the rule the RISC-V
// privileged spec's PMA/PMP checks apply to the whole access); otherwise a MemoryFault at the
// access's pc naming its address, as qemu-riscv64 faults on the unmapped page after a mapping.
import { join } from 'node:path';
import t from 'tap';
import { Engine, Linker } from '../src/engine/engine.js';
import type { HostCall } from '../src/engine/host.js';
import { MemoryFault } from '../src/engine/traps.js';
import { ROOT } from './helpers/fixtures.js';

const BOUNDS = join(ROOT, 'test', 'data', 'bounds.elf');
const ECALL = join(ROOT, 'test', 'data', 'ecall.elf');
const MEMORY = 1 << 20;

// [function, width, kind, imm]: the access is at a0 + imm
const ACCESSES: [string, number, 'load' | 'store' | 'amo' | 'sc', number][] = [
  ['ld8', 8, 'load', 0],
  ['lw4', 4, 'load', 0],
  ['lhu2', 2, 'load', 0],
  ['lbu1', 1, 'load', 0],
  ['sd8', 8, 'store', 0],
  ['sw4', 4, 'store', 0],
  ['sh2', 2, 'store', 0],
  ['sb1', 1, 'store', 0],
  ['cld8', 8, 'load', 0],
  ['clw4', 4, 'load', 0],
  ['csd8', 8, 'store', 0],
  ['csw4', 4, 'store', 0],
  ['lrd8', 8, 'load', 0],
  ['lrw4', 4, 'load', 0],
  ['scd8', 8, 'sc', 0],
  ['scw4', 4, 'sc', 0],
  ['amoaddd8', 8, 'amo', 0],
  ['amoswapw4', 4, 'amo', 0],
  ['amomaxud8', 8, 'amo', 0],
  ['ldhi8', 8, 'load', 2040],
  ['sdlo8', 8, 'store', -2048],
];
const VALUE = 0x1122_3344_5566_7788n;

for (const tier of ['baseline', 'optimized'] as const) {
  t.test(`${tier} tier: accesses at and past the end of guest memory`, async (t) => {
    const engine = new Engine({ cacheDir: null, tier, memorySize: MEMORY });
    const mod = await engine.compile(BOUNDS);
    const { base, size } = mod.layout;
    const end = base + size;
    const linker = new Linker(engine);
    for (const [fn, w, kind, imm] of ACCESSES) {
      // AMOs and LR/SC need natural alignment, so their misaligned probes are left out
      const offsets = [-w, ...(kind === 'load' || kind === 'store' ? [-w + 1] : []), 0, 8, 40, 48, 65536 - w];
      for (const d of offsets) {
        const at = end + d; // the access's address
        const inst = linker.instantiate(mod);
        let err: unknown = null;
        let r: [bigint, bigint] = [0n, 0n];
        try {
          r = inst.call(fn, BigInt(at - imm), VALUE);
        } catch (e) {
          err = e;
        }
        const inside = at >= base && at + w <= end;
        const what = `${fn} at end${d >= 0 ? '+' : ''}${d}`;
        if (kind === 'sc' && !inside) {
          // no reservation is held, so an SC may fail without touching memory (A extension,
          // LR/SC) or fault; it never succeeds
          if (err === null) t.equal(r[0], 1n, `${what}: SC failed`);
          else t.type(err, MemoryFault, `${what}: MemoryFault`);
        } else if (inside) {
          t.equal(err, null, `${what}: inside`);
          if (kind === 'store' || kind === 'amo') {
            const bytes = inst.memory.read(at, w);
            let v = 0n;
            for (let i = w - 1; i >= 0; i--) v = (v << 8n) | BigInt(bytes[i]);
            t.equal(v, BigInt.asUintN(8 * w, VALUE), `${what}: stored`);
          }
        } else {
          t.type(err, MemoryFault, `${what}: MemoryFault`);
          if (err instanceof MemoryFault) {
            t.equal(err.address, BigInt(at), `${what}: names the access's address`);
            t.same([err.symbol, err.offset], [fn, 0], `${what}: at the access (${err.where()})`);
          }
        }
        inst.dispose();
      }
    }
    // the host's view follows the same rule (capabilities read and write through it)
    const inst = linker.instantiate(mod);
    t.same(inst.memory.read(end - 8, 8), new Uint8Array(8), 'host reads the last 8 bytes');
    for (const [a, n] of [
      [end - 8, 16],
      [end, 48],
      [end + 8, 8],
    ]) {
      t.throws(() => inst.memory.read(a, n), MemoryFault, `host read of ${n} at end+${a - end}`);
      t.throws(
        () => inst.memory.write(a, new Uint8Array(n)),
        MemoryFault,
        `host write of ${n} at end+${a - end}`,
      );
    }
    inst.dispose();
  });
}

// Arguments are read from the area lazily, when the host function asks: they must still be the
// ecall's own after the host function wrote guest memory (its last bytes, next to the area) and
// after a nested call of another instance of the same module made an ecall of its own.
t.test('lazily read arguments survive host writes and a nested ecall', async (t) => {
  for (const tier of ['baseline', 'optimized'] as const) {
    const engine = new Engine({ cacheDir: null, tier, memorySize: MEMORY });
    const mod = await engine.compile(ECALL);
    const end = mod.layout.base + mod.layout.size;
    const NUM = 0x77n;
    const outer = [11n, 2n ** 64n - 2n, 2n ** 53n + 1n, 0xdead_beefn, 5n, 6n];
    const inner = [101n, 102n, 103n, 104n, 105n, 106n];
    const seen: bigint[][] = [];
    const linker = new Linker(engine);
    let depth = 0;
    linker.define(NUM, (c: HostCall) => {
      if (depth === 0) {
        depth++;
        const nested = linker.instantiate(mod);
        try {
          t.same(nested.call('ecall_pass', ...inner, 0n, NUM), [inner[0], inner[1]], `${tier}: nested call`);
        } finally {
          nested.dispose();
          depth--;
        }
        c.memory.write(end - 8, new Uint8Array(8).fill(0xff));
      }
      seen.push([...c.args]);
      return undefined; // a0 unchanged: the engine reads a0 from the area after this returns
    });
    const inst = linker.instantiate(mod);
    const r = inst.call('ecall_pass', ...outer, 0n, NUM);
    inst.dispose();
    t.same(seen, [inner, outer], `${tier}: each call saw its own arguments`);
    t.same(r, [outer[0], outer[1]], `${tier}: a0 and a1 unchanged`);
  }
});

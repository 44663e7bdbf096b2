// The host-call boundary: the call number crosses from translated code to the engine as three i32
// pieces, a0..a5 through the ecall argument area (read when the host function asks), and the result
// comes back as an f64 or through globals (src/translate/abi.ts Imports.ecall, ECALL_ARGS). Every 64-bit pattern must arrive and return exactly. The guest
// (test/data/ecall.s) is one bare `ecall; ret`: the caller's a0..a7 go to the host unchanged and
// the host's a0/a1 are returned, so the expected values are the RISC-V register values themselves.
import { join } from 'node:path';
import t from 'tap';
import { Engine, Linker } from '../src/engine/engine.js';
import type { HostCall, HostFunction } from '../src/engine/host.js';
import { HostCallError, MemoryFault, UnknownHostCall } from '../src/engine/traps.js';
import { IMPORT_SIGNATURES } from '../src/translate/abi.js';
import { ROOT, TEST_CACHE } from './helpers/fixtures.js';

const engine = new Engine({ cacheDir: TEST_CACHE, memorySize: 1 << 20 });
const elf = join(ROOT, 'test', 'data', 'ecall.elf');
const U64 = (v: bigint) => BigInt.asUintN(64, v);
const NUM = 0xfedc_ba98_7654_3210n; // a call number using all four pieces' bits

async function run(fn: HostFunction, regs: bigint[], a7: bigint = NUM): Promise<[bigint, bigint]> {
  const mod = await engine.compile(elf);
  const inst = new Linker(engine).define(a7, fn).instantiate(mod);
  try {
    const a = [...regs, ...new Array<bigint>(6 - regs.length).fill(0n)];
    return inst.call('ecall_pass', a[0], a[1], a[2], a[3], a[4], a[5], 0n, a7);
  } finally {
    inst.dispose();
  }
}

const PATTERNS = [
  0n,
  1n,
  0x7fff_ffffn,
  0x8000_0000n,
  0xffff_ffffn,
  0x1_0000_0000n,
  2n ** 53n - 1n,
  2n ** 53n,
  2n ** 63n,
  0xdead_beef_cafe_baben,
  2n ** 64n - 1n,
];

t.test('arguments arrive exactly: args as bigints, arg() as Numbers below 2^53', async (t) => {
  for (let k = 0; k + 6 <= PATTERNS.length + 5; k++) {
    const regs = [0, 1, 2, 3, 4, 5].map((i) => PATTERNS[(k + i) % PATTERNS.length]);
    let seen: HostCall | null = null;
    let args: bigint[] = [];
    let nums: number[] = [];
    await run((c) => {
      seen = c;
      args = [...c.args];
      nums = [0, 1, 2, 3, 4, 5].map((i) => c.arg(i));
    }, regs);
    t.ok(seen, 'the host function ran');
    t.same(args, regs, `args ${regs.map((r) => r.toString(16)).join(',')}`);
    t.same(
      nums,
      regs.map((r) => (r < 2n ** 53n ? Number(r) : Infinity)),
      'arg(i) is exact below 2^53 and Infinity at or above',
    );
  }
  let num = 0n;
  await run((c) => void (num = c.number), []);
  t.equal(num, NUM, 'the call number arrives whole');
  await t.rejects(
    run((c) => c.arg(6), []),
    HostCallError,
    'arg(6) is a host error (a0..a5 only)',
  );
});

t.test('results come back exactly in a0 (a1 unchanged) or a0 and a1', async (t) => {
  const a0 = 0x1111_2222_3333_4444n;
  const a1 = 0x8888_9999_aaaa_bbbbn;
  const cases: [string, ReturnType<HostFunction>, [bigint, bigint]][] = [
    ['number 0', 0, [0n, a1]],
    ['number 42', 42, [42n, a1]],
    ['number -1 (modulo 2^64)', -1, [2n ** 64n - 1n, a1]],
    ['largest safe number', Number.MAX_SAFE_INTEGER, [2n ** 53n - 1n, a1]],
    ['most negative safe number', -Number.MAX_SAFE_INTEGER, [U64(-(2n ** 53n - 1n)), a1]],
    ['bigint 0n', 0n, [0n, a1]],
    ['bigint 2^53', 2n ** 53n, [2n ** 53n, a1]],
    ['bigint with bit 63 (an error reply word)', (2n ** 63n) | 17n, [(2n ** 63n) | 17n, a1]],
    ['bigint -5n', -5n, [U64(-5n), a1]],
    ['bigint 2^64 - 1', 2n ** 64n - 1n, [2n ** 64n - 1n, a1]],
    ['pair of bigints', [0xdead_beefn, 2n ** 63n], [0xdead_beefn, 2n ** 63n]],
    ['pair of numbers', [-1, 7], [2n ** 64n - 1n, 7n]],
  ];
  for (const [what, r, want] of cases) {
    t.same(await run(() => r, [a0, a1]), want, what);
  }
  t.same(await run(() => undefined, [a0, a1]), [a0, a1], 'undefined keeps a0 (beyond 2^53) and a1');
  t.same(await run(() => undefined, [5n, 6n]), [5n, 6n], 'undefined keeps a small a0');
  t.same(await run(() => undefined, [U64(-3n), 6n]), [U64(-3n), 6n], 'undefined keeps a negative a0');
});

t.test('a result that is not an integer is a HostCallError; unknown numbers trap', async (t) => {
  for (const bad of [1.5, NaN, Infinity, 2 ** 60]) {
    await t.rejects(
      run(() => bad, []),
      HostCallError,
      `returning ${bad}`,
    );
  }
  await t.rejects(
    run(() => [1.5, 0], []),
    HostCallError,
    'a pair with a fraction',
  );
  const mod = await engine.compile(elf);
  const inst = new Linker(engine).define('berm.log', () => 0).instantiate(mod);
  t.throws(() => inst.call('ecall_pass', 0n, 0n, 0n, 0n, 0n, 0n, 0n, NUM), UnknownHostCall);
});

t.test('host memory helpers take Numbers from arg() and bigints alike', async (t) => {
  const mod = await engine.compile(elf);
  const at = BigInt(mod.layout.heapStart);
  const back = await run(
    (c) => {
      c.memory.write(c.arg(0), new TextEncoder().encode('hello'));
      const a = c.memory.read(c.args[0], c.arg(1));
      return new TextDecoder().decode(a) === 'hello' ? 1 : 0;
    },
    [at, 5n],
  );
  t.same(back[0], 1n, 'written with a Number address, read back with the bigint');
});

t.test("the ecall argument area past the guest memory is out of a host function's reach", async (t) => {
  // a0..a5 wait in the page after the guest's last byte (abi.ts ECALL_ARGS); the host's memory
  // view is bounded by the guest memory (docs/engine.md, Guest memory), so reading there
  // faults at the first byte past the end while the arguments still arrive exactly
  const mod = await engine.compile(elf);
  const end = BigInt(mod.layout.base + mod.layout.size);
  let fault: unknown = null;
  let args: readonly bigint[] = [];
  await run(
    (c) => {
      args = c.args;
      try {
        c.memory.read(end, 8);
      } catch (e) {
        fault = e;
      }
      return 0;
    },
    [PATTERNS[10], PATTERNS[9], 0n, 0n, 0n, PATTERNS[8]],
  );
  t.ok(fault instanceof MemoryFault, 'reading past the guest memory faults');
  t.equal((fault as MemoryFault).address, end, 'at the first byte past it');
  t.same(args, [PATTERNS[10], PATTERNS[9], 0n, 0n, 0n, PATTERNS[8]], 'the arguments are intact');
});

t.test('the four function imports share one signature (one V8 import wrapper)', async (t) => {
  const sigs = Object.values(IMPORT_SIGNATURES).map((s) => JSON.stringify(s));
  t.equal(new Set(sigs).size, 1, sigs.join(' '));
});

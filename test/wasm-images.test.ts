// Wasm harness images (docs/wasm.md): picked by their magic bytes, checked against the harness ABI
// at deploy (each refusal below), instrumented so the timeout and the fuel budget stop a guest
// that loops or recurses for ever, bounded in memory, run in a fresh instance per call, and never
// able to crash the host however their bytes are damaged. The guests are written in WAT and
// assembled by wabt (test/helpers/wat.ts).
import t from 'tap';
import { Engine } from '../src/engine/engine.js';
import { imageKind, readImage, WasmImageError } from '../src/engine/image.js';
import { Interrupted, MemoryLimitExceeded, OutOfFuel, Trap, WasmTrap } from '../src/engine/traps.js';
import { Harness, HarnessError } from '../src/harness/harness.js';
import { manifestOf, num, SYSCALL, wat } from './helpers/wat.js';

const LIMIT = 1 << 22; // 4 MiB: 64 pages
const engine = new Engine({ cacheDir: null, memorySize: LIMIT });

/** A tool that answers with its arguments (berm.args.len, berm.args.read, berm.done). */
const ECHO = `(func (export "berm_tool_echo") (local $n i32)
  (local.set $n (i32.wrap_i64 (call $sys (i64.const ${num('berm.args.len')}) (i32.const 0) (i32.const 0))))
  (drop (call $sys (i64.const ${num('berm.args.read')}) (i32.const 64) (local.get $n)))
  (drop (call $sys (i64.const ${num('berm.done')}) (i32.const 64) (local.get $n))))`;

/** A module with the syscall import, a 1-page exported memory and `body`. */
function guest(body: string, memory = '(memory (export "memory") 1)'): string {
  return `(module ${SYSCALL} ${memory} ${body})`;
}

async function load(bytes: Uint8Array): Promise<Harness> {
  return Harness.fromModule(await engine.compile(bytes));
}

t.test('the magic bytes pick the image kind', async (t) => {
  const w = await wat(guest(ECHO), manifestOf('echo'));
  t.equal(imageKind(w), 'wasm');
  t.equal(imageKind(Uint8Array.of(0x7f, 0x45, 0x4c, 0x46, 2, 1)), 'elf');
  t.equal(imageKind(new TextEncoder().encode('#!/bin/sh\n')), null);
  t.throws(
    () => readImage(new TextEncoder().encode('#!/bin/sh\n')),
    /not an ELF file \(bad magic\) nor a WebAssembly module/,
  );
  const image = readImage(w);
  t.same(
    image.functions.filter((f) => f.global).map((f) => f.name),
    ['berm_tool_echo'],
  );
});

t.test('a tool answers through berm.done, a fresh instance each call', async (t) => {
  const h = await load(
    await wat(
      guest(`${ECHO}
      (global $calls (mut i32) (i32.const 0))
      (func (export "berm_tool_count")
        (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
        (i32.store8 (i32.const 0) (i32.add (i32.const 48) (global.get $calls)))
        (drop (call $sys (i64.const ${num('berm.done')}) (i32.const 0) (i32.const 1))))`),
      manifestOf('echo', 'count'),
    ),
  );
  t.same(h.invoke('echo', '{"a":[1,2,3]}'), { status: 'ok', result: '{"a":[1,2,3]}', logs: [] });
  // a global that survived between calls would count up: each call sees the module's initial state
  t.same(h.invoke('count', '{}').status === 'ok' && h.invoke('count', '{}'), {
    status: 'ok',
    result: '1',
    logs: [],
  });
  t.equal(h.module.info.format, 'wasm');
});

t.test(
  'each call sees the memory the module defines: zero, its data segments, its initial size',
  async (t) => {
    // `dirty` answers byte 300 (0 in a new memory), byte 16 (the data segment's 'b') and the page
    // count, then writes over both bytes and grows the memory by a page; `clean` leaves it alone
    const h = await load(
      await wat(
        guest(`
      (func (export "berm_tool_dirty")
        (i32.store8 (i32.const 0) (i32.add (i32.const 48) (i32.load8_u (i32.const 300))))
        (i32.store8 (i32.const 1) (i32.load8_u (i32.const 16)))
        (i32.store8 (i32.const 2) (i32.add (i32.const 48) (memory.size)))
        (i32.store8 (i32.const 300) (i32.const 7))
        (i32.store8 (i32.const 16) (i32.const 120))
        (drop (memory.grow (i32.const 1)))
        (i32.store8 (i32.const 65536) (i32.const 9))
        (drop (call $sys (i64.const ${num('berm.done')}) (i32.const 0) (i32.const 3))))
      (func (export "berm_tool_clean")
        (i32.store8 (i32.const 0) (i32.add (i32.const 48) (i32.load8_u (i32.const 300))))
        (i32.store8 (i32.const 1) (i32.load8_u (i32.const 16)))
        (i32.store8 (i32.const 2) (i32.add (i32.const 48) (memory.size)))
        (i32.store8 (i32.const 300) (i32.const 5))
        (drop (call $sys (i64.const ${num('berm.done')}) (i32.const 0) (i32.const 3))))
      (data (i32.const 16) "berm")`),
        manifestOf('dirty', 'clean'),
      ),
    );
    // '0' = byte 300 is zero, 'b' = the data segment, '1' = one page: a new memory's state, every call
    for (const tool of ['dirty', 'clean', 'clean', 'dirty', 'dirty', 'clean', 'clean']) {
      t.same(h.invoke(tool, '{}'), { status: 'ok', result: '0b1', logs: [] }, tool);
    }
  },
);

t.test('each refusal of the harness ABI, at load', async (t) => {
  const refused = async (name: string, text: string, re: RegExp, manifest: object = manifestOf('echo')) => {
    await t.rejects(load(await wat(text, manifest)), re, name);
  };
  await refused(
    'another import',
    `(module ${SYSCALL} (import "env" "clock" (func (result i64))) (memory (export "memory") 1) ${ECHO})`,
    /imports function env\.clock: a Wasm harness may import only the function berm\.syscall/,
  );
  await refused(
    'an imported memory',
    `(module ${SYSCALL} (import "env" "memory" (memory 1)) (export "memory" (memory 0)) ${ECHO})`,
    /imports memory env\.memory/,
  );
  await refused(
    'a syscall import of another type',
    `(module (import "berm" "syscall" (func $sys (param i32 i32 i32) (result i64))) (memory (export "memory") 1))`,
    /berm\.syscall has the type \(i32, i32, i32\) -> \(i64\): it must be \(i64, i32, i32\) -> \(i64\)/,
  );
  await refused(
    'a missing memory export',
    `(module ${SYSCALL} (memory 1) ${ECHO})`,
    /does not export its memory as "memory"/,
  );
  await refused('no memory at all', `(module ${SYSCALL} ${ECHO})`, /does not export its memory as "memory"/);
  await refused(
    'a memory maximum above the limit',
    guest(ECHO, '(memory (export "memory") 1 65)'),
    /memory maximum of 65 pages \(4259840 bytes\) is above the configured limit of 64 pages \(4194304 bytes\)/,
  );
  await refused(
    'an initial memory above the limit',
    guest(ECHO, '(memory (export "memory") 100)'),
    /initial memory of 100 pages .* is above the configured limit of 64 pages/,
  );
  await refused('a start function', guest(`${ECHO} (func $init) (start $init)`), /has a start function/);
  const missing = await load(await wat(guest(ECHO), manifestOf('echo', 'missing'))).catch((e: unknown) => e);
  t.ok(missing instanceof HarnessError, 'a tool without its export: HarnessError');
  t.match((missing as Error).message, /tool missing is declared .* but berm_tool_missing is not exported/);
  await refused(
    'a tool export that takes arguments',
    guest(`(func (export "berm_tool_echo") (param i32))`),
    /tool export berm_tool_echo has the type \(i32\) -> \(\): a tool takes and returns nothing/,
  );
  await t.rejects(load(await wat(guest(ECHO))), /berm\.abi/, 'no manifest');
  await refused(
    'SIMD code',
    guest(`(func (export "berm_tool_echo") (drop (v128.const i32x4 0 0 0 0)))`),
    /SIMD/,
  );
  // the refusals are WasmImageErrors (CLI exit 2, HTTP 400), not crashes
  await t.rejects(load(await wat(guest(ECHO, '(memory 1)'), manifestOf('echo'))), WasmImageError);
});

t.test('a guest that loops for ever is stopped by the timeout and by fuel', async (t) => {
  const h = await load(
    await wat(
      guest(`(func (export "berm_tool_spin") (loop $l (br $l)))
        (func $ping (return_call $pong)) (func $pong (return_call $ping))
        (func (export "berm_tool_bounce") (call $ping))`),
      manifestOf('spin', 'bounce'),
    ),
  );
  for (const tool of ['spin', 'bounce']) {
    const t0 = performance.now();
    t.throws(() => h.invoke(tool, '{}', { timeoutMs: 50 }), Interrupted, `${tool}: the timeout stops it`);
    const ms = performance.now() - t0;
    t.ok(ms >= 50 && ms < 2000, `${tool}: stopped after ${ms.toFixed(1)} ms`);
    try {
      h.invoke(tool, '{}', { fuel: 200_000 });
      t.fail(`${tool}: ran out of fuel`);
    } catch (e) {
      t.ok(e instanceof OutOfFuel, `${tool}: OutOfFuel`);
      t.match((e as Trap).message, /budget of 200000 was used up/);
      t.match((e as Trap).symbol, tool === 'spin' ? 'berm_tool_spin' : /func\[\d+\]|ping|pong/);
    }
  }
});

t.test(
  'memory growth past the limit traps clearly; under the guest own maximum it fails as Wasm does',
  async (t) => {
    const grow = (pages: number) => `(func (export "berm_tool_grow")
      (loop $l (br_if $l (i32.ne (memory.grow (i32.const ${pages})) (i32.const -1))))
      (drop (call $sys (i64.const ${num('berm.done')}) (i32.const 0) (i32.const 2))))`;
    const h = await load(await wat(guest(grow(8)), manifestOf('grow')));
    try {
      h.invoke('grow', '{}');
      t.fail('trapped');
    } catch (e) {
      t.ok(e instanceof MemoryLimitExceeded, 'MemoryLimitExceeded');
      t.match(
        (e as Error).message,
        /memory\.grow by 8 page\(s\) would pass the configured limit of 4194304 bytes \(64 pages\)/,
      );
      t.equal((e as Trap).symbol, 'berm_tool_grow');
    }
    // the guest's own maximum (10 pages) is its business: memory.grow answers -1 and the tool goes on
    const own = await load(await wat(guest(grow(3), '(memory (export "memory") 1 10)'), manifestOf('grow')));
    t.same(own.invoke('grow', '{}'), { status: 'ok', result: '\0\0', logs: [] });
    // a store past the memory is V8's trap, reported as a WasmTrap with the guest's function
    const oob = await load(
      await wat(
        guest('(func (export "berm_tool_oob") (i32.store (i32.const 70000) (i32.const 1)))'),
        manifestOf('oob'),
      ),
    );
    t.throws(() => oob.invoke('oob', '{}'), WasmTrap);
    t.throws(() => oob.invoke('oob', '{}'), /WebAssembly trap: memory access out of bounds/);
  },
);

t.test('fuel is charged as docs/wasm.md counts it, across calls, returns and branches out', async (t) => {
  // Counted by hand from the rule: a function entry is charged its instructions outside loops
  // (each \`end\` and the \`loop\` opcode itself included), each pass through a loop head the
  // instructions directly inside it (its \`end\` included).
  //   $inc: local.get, i32.const, i32.add, return, end                              = 5 per call
  //   loop body: local.get, call, local.set, local.get, i32.const, i32.lt_u, br_if, end = 8 per pass
  //   run outside loops: loop; i64.const, i32.const, i32.const, call, drop; block, br, end; end = 10
  // 100 passes, 100 calls: 10 + 100 * 8 + 100 * 5 = 1310
  const h = await load(
    await wat(
      guest(`
      (func $inc (param i32) (result i32)
        local.get 0
        i32.const 1
        i32.add
        return)
      (func (export "berm_tool_run") (local $i i32)
        loop $l
          local.get $i
          call $inc
          local.set $i
          local.get $i
          i32.const 100
          i32.lt_u
          br_if $l
        end
        i64.const ${num('berm.done')}
        i32.const 0
        i32.const 0
        call $sys
        drop
        block
          br 1
        end)`),
      manifestOf('run'),
    ),
  );
  t.same(
    h.invoke('run', '{}', { fuel: 1310 }),
    { status: 'ok', result: '', logs: [] },
    'a budget of 1310 is enough',
  );
  t.throws(() => h.invoke('run', '{}', { fuel: 1309 }), OutOfFuel, 'a budget of 1309 is not');
  t.throws(() => h.invoke('run', '{}', { fuel: 1000 }), OutOfFuel, 'nor one of 1000');
});

t.test('2,000 mutated Wasm images are refused or run, never crash the host', async (t) => {
  const base = await wat(
    guest(`${ECHO}
      (func (export "berm_tool_spin") (local $i i32)
        (loop $l (local.set $i (i32.add (local.get $i) (i32.const 1))) (br_if $l (i32.lt_u (local.get $i) (i32.const 1000))))
        (i32.store (i32.const 0) (local.get $i))
        (drop (call $sys (i64.const ${num('berm.done')}) (i32.const 0) (i32.const 4))))
      (data (i32.const 16) "berm")`),
    manifestOf('echo', 'spin'),
  );
  // a deterministic generator (xorshift32): the same 2,000 images on every run
  let s = 0x9e3779b9;
  const rnd = (n: number) => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) % n;
  };
  const allowed = new Set([
    'WasmImageError',
    'ManifestError',
    'HarnessError',
    'ElfError',
    'Interrupted',
    'OutOfFuel',
    'WasmTrap',
    'Unreachable',
    'MemoryFault',
    'MemoryLimitExceeded',
    'UnknownHostCall',
    'HostCallError',
    'StackOverflow',
  ]);
  const outcomes = new Map<string, number>();
  const t0 = performance.now();
  for (let i = 0; i < 2000; i++) {
    const m = new Uint8Array(base);
    const edits = 1 + rnd(4);
    for (let k = 0; k < edits; k++) m[8 + rnd(m.length - 8)] = rnd(256);
    let outcome: string;
    try {
      const h = await load(m);
      const r = h.invoke(h.manifest.tools[0]!.name, '{"k":1}', { fuel: 1_000_000, timeoutMs: 200 });
      outcome = r.status;
    } catch (e) {
      outcome = e instanceof Error ? e.name : typeof e;
      if (!allowed.has(outcome)) t.fail(`image ${i}: ${outcome}: ${(e as Error).message}`);
    }
    outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
  }
  const ms = performance.now() - t0;
  t.ok(ms < 60_000, `2,000 images in ${(ms / 1000).toFixed(1)} s`);
  t.ok((outcomes.get('ok') ?? 0) > 0, 'some mutated images still run');
  t.ok((outcomes.get('WasmImageError') ?? 0) > 0, 'some are refused');
  t.comment(JSON.stringify(Object.fromEntries(outcomes)));
  // the host still serves a good image afterwards
  t.same((await load(base)).invoke('echo', '{"x":1}'), { status: 'ok', result: '{"x":1}', logs: [] });
});

// V8's dynamic-tiering budget per compile (src/engine/v8-flags.ts compileWithTieringBudget) and
// the CLI's one-shot budget (src/cli/context.ts ONE_SHOT_TIERING_BUDGET): which functions V8
// recompiles with TurboFan is read from V8 itself, `--trace-wasm-compilation-times` printing one
// line per compiled function and tier, in child processes (the trace goes to stdout). The hot
// module is assembled from WAT by wabt; fib_rec's value is fixtures/expected.json's kind (native).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { Engine } from '../src/engine/engine.js';
import {
  checkTieringBudget,
  V8_WASM_TIERING_BUDGET_DEFAULT,
  wasmTieringBudgetChosen,
} from '../src/engine/v8-flags.js';
import { ONE_SHOT_TIERING_BUDGET } from '../src/cli/context.js';
import { ROOT } from './helpers/fixtures.js';
import { wat } from './helpers/wat.js';

const V8_MAJOR = Number(/^(\d+)\./.exec(process.versions.v8)![1]);
const skip = V8_MAJOR === 11 ? false : `the budget is set on V8 11 only (this is V8 ${process.versions.v8})`;
const REGISTER = pathToFileURL(join(ROOT, 'scripts', 'ts', 'register.mjs')).href;
const FLAGS = pathToFileURL(join(ROOT, 'src', 'engine', 'v8-flags.ts')).href;
const TMP = mkdtempSync(join(tmpdir(), 'berm-tiering-'));
t.teardown(() => rmSync(TMP, { recursive: true, force: true }));

// f(n): sum of i*i for i = n..1, a loop of ~25 bytes of code: each call of f(200000) spends about
// 5 M budget units (V8 charges a loop's back edge by the bytes of its body)
const HOT = `(module
  (func (export "f") (param $n i32) (result i32) (local $s i32)
    (loop $l
      (local.set $s (i32.add (local.get $s) (i32.mul (local.get $n) (local.get $n))))
      (br_if $l (local.tee $n (i32.sub (local.get $n) (i32.const 1)))))
    (local.get $s)))`;

interface Tiers {
  liftoff: number;
  turbofan: number;
  stdout: string;
}

/**
 * Count the Liftoff and TurboFan compiles V8 traces in a child's stdout. V8 prints a background
 * compile's line from its own thread: it may land inside another line, so the output is searched,
 * not split into lines.
 */
function tiers(r: ReturnType<typeof spawnSync>, what: string): Tiers {
  if (r.status !== 0) throw new Error(`${what} exited ${r.status}: ${String(r.stderr)}`);
  const stdout = String(r.stdout);
  const fn = (tier: string): number => stdout.split(`using ${tier},`).length - 1;
  return { liftoff: fn('Liftoff'), turbofan: fn('TurboFan'), stdout };
}

/**
 * In a child node with `nodeFlags`: compile the hot module with compileWithTieringBudget(budget),
 * call f(200000) `calls` times and print the sum.
 */
async function hotRun(budget: number | undefined, calls: number, nodeFlags: string[] = []): Promise<Tiers> {
  const hex = Buffer.from(await wat(HOT)).toString('hex');
  const script = `
    import { compileWithTieringBudget } from ${JSON.stringify(FLAGS)};
    const bytes = Buffer.from(process.env.HOT, 'hex');
    const m = compileWithTieringBudget(bytes, ${budget === undefined ? 'undefined' : budget});
    const f = new WebAssembly.Instance(m).exports.f;
    let s = 0;
    for (let i = 0; i < ${calls}; i++) s = (s + f(200000)) | 0;
    console.log('sum', s);`;
  const r = spawnSync(
    process.execPath,
    [
      ...nodeFlags,
      `--import=${REGISTER}`,
      '--trace-wasm-compilation-times',
      '--input-type=module',
      '-e',
      script,
    ],
    { encoding: 'utf8', env: { ...process.env, HOT: hex }, timeout: 60_000 },
  );
  return tiers(r, 'the hot-module child');
}

// sum over 200000..1 of i*i, mod 2^32, times the number of calls (mod 2^32, signed)
function expectedSum(calls: number): number {
  let one = 0n;
  for (let i = 1n; i <= 200000n; i++) one += i * i;
  return Number(BigInt.asIntN(32, BigInt.asUintN(32, one) * BigInt(calls)));
}

t.test('V8 default budget: the hot function is recompiled with TurboFan', { skip }, async (t) => {
  const r = await hotRun(undefined, 20);
  t.match(r.stdout, `sum ${expectedSum(20)}\n`);
  t.equal(r.liftoff, 1, 'compiled first with Liftoff');
  t.equal(r.turbofan, 1, 'then with TurboFan, ~100 M units into 20 calls');
});

t.test('a budget of 10^9: the same 20 calls stay in Liftoff', { skip }, async (t) => {
  const r = await hotRun(ONE_SHOT_TIERING_BUDGET, 20);
  t.match(r.stdout, `sum ${expectedSum(20)}\n`);
  t.equal(r.liftoff, 1);
  t.equal(r.turbofan, 0, 'not recompiled');
});

t.test('a budget of 10^9: a function that stays hot is still recompiled', { skip }, async (t) => {
  // ~1.5 * 10^9 units: past the budget
  const r = await hotRun(ONE_SHOT_TIERING_BUDGET, 300);
  t.match(r.stdout, `sum ${expectedSum(300)}\n`);
  t.equal(r.turbofan, 1);
});

t.test("the process's own --wasm-tiering-budget is kept", { skip }, async (t) => {
  const r = await hotRun(ONE_SHOT_TIERING_BUDGET, 20, [
    `--wasm-tiering-budget=${V8_WASM_TIERING_BUDGET_DEFAULT}`,
  ]);
  t.match(r.stdout, `sum ${expectedSum(20)}\n`);
  t.equal(r.turbofan, 1, "V8's default stood: recompiled as without a budget");
});

t.test('modules compiled afterwards get the default budget back', { skip }, async (t) => {
  // a second module (other bytes: V8 shares one compiled module between equal bytes) compiled
  // plainly after the budgeted one tiers up as at the default
  const hot = Buffer.from(await wat(HOT)).toString('hex');
  const other = Buffer.from(await wat(HOT.replace('"f"', '"g"'))).toString('hex');
  const script = `
    import { compileWithTieringBudget } from ${JSON.stringify(FLAGS)};
    const a = new WebAssembly.Instance(compileWithTieringBudget(Buffer.from(process.env.HOT, 'hex'), 1e9)).exports.f;
    for (let i = 0; i < 20; i++) a(200000);
    console.log('budgeted done');
    const b = new WebAssembly.Instance(new WebAssembly.Module(Buffer.from(process.env.OTHER, 'hex'))).exports.g;
    for (let i = 0; i < 20; i++) b(200000);`;
  const r = spawnSync(
    process.execPath,
    [`--import=${REGISTER}`, '--trace-wasm-compilation-times', '--input-type=module', '-e', script],
    { encoding: 'utf8', env: { ...process.env, HOT: hot, OTHER: other }, timeout: 60_000 },
  );
  const out = String(r.stdout);
  const done = out.indexOf('budgeted done\n');
  t.ok(done > 0, String(r.stderr));
  // at 10^9 the first module's 20 calls never reach the budget: every TurboFan line is the second's
  t.equal(out.slice(0, done).split('using TurboFan,').length - 1, 0, 'budgeted: Liftoff only');
  t.equal(out.slice(done).split('using TurboFan,').length - 1, 1, 'plain: recompiled');
});

t.test('wasmTieringBudgetChosen reads node options', async (t) => {
  t.equal(wasmTieringBudgetChosen(['--wasm-tiering-budget=5']), true);
  t.equal(wasmTieringBudgetChosen(['--stack-size=4000', '--wasm_tiering_budget=5']), true);
  t.equal(wasmTieringBudgetChosen(['--stack-size=4000']), false);
  t.equal(wasmTieringBudgetChosen(['--wasm-tiering-budget-x=5']), false);
});

t.test('a budget out of range is refused', async (t) => {
  for (const b of [0, -1, 1.5, 2 ** 31, NaN]) {
    t.throws(() => checkTieringBudget(b), RangeError, String(b));
    t.throws(() => new Engine({ cacheDir: null, wasmTieringBudget: b }), RangeError, `Engine ${b}`);
  }
  t.doesNotThrow(() => checkTieringBudget(2 ** 31 - 1));
  t.doesNotThrow(() => checkTieringBudget(1));
});

t.test('berm exec: a short call stays in Liftoff, same result', { skip }, async (t) => {
  // fib_rec(24) = 46368 (fixtures/expected.json has 20 and 27: 6765, 196418; fib(24) by definition)
  const run = (nodeFlags: string[]): Tiers =>
    tiers(
      spawnSync(
        process.execPath,
        [
          ...nodeFlags,
          '--stack-size=4000',
          '--trace-wasm-compilation-times',
          join(ROOT, 'bin', 'berm.js'),
          '--cache-dir',
          join(TMP, 'cache'),
          'exec',
          join(ROOT, 'fixtures', 'build', 'compute-gcc-O2.elf'),
          'fib_rec',
          '24',
        ],
        { encoding: 'utf8', timeout: 60_000 },
      ),
      'berm exec',
    );
  const want = 'a0=0x000000000000b520 a1=0x0000000000000000\n';
  const oneShot = run([]);
  t.match(oneShot.stdout, want);
  t.ok(oneShot.liftoff > 0, 'Liftoff compiled what the call ran');
  t.equal(oneShot.turbofan, 0, 'nothing recompiled with TurboFan');
  // the same call at V8's default budget (the process's own choice, kept) tiers fib_rec up: the
  // check above could fail
  const atDefault = run([`--wasm-tiering-budget=${V8_WASM_TIERING_BUDGET_DEFAULT}`]);
  t.match(atDefault.stdout, want);
  t.ok(atDefault.turbofan > 0, 'at the default: recompiled with TurboFan');
});

/**
 * Which of the optimising tier's Binaryen passes pay for themselves: their optimise time on real
 * guests against what they buy in guest speed and Wasm bytes.
 *
 *   node --stack-size=4000 --import ./scripts/ts/register.mjs bench/opt-passes.ts profile CONFIG ELF...
 *   node --stack-size=4000 --import ./scripts/ts/register.mjs bench/opt-passes.ts compare \
 *     [--rounds N] [--time ELF,ELF] [--programs sha256,fib,qsort,coremark] CONFIG...
 *
 * `profile` builds each ELF into a Binaryen module (src/translate/module.ts buildModule) and runs
 * CONFIG's pipeline pass by pass over every function (pass-major: each pass over all functions,
 * then the next; a function's passes run in the same order as in translate(), so the result is the
 * same), printing each pass's process CPU ms, the build and emit ms and the module's bytes.
 *
 * `compare` translates compute-gcc-O2 with each CONFIG (process CPU ms of translate() and Wasm
 * bytes; with --time also of each listed ELF), checks each module is valid by compiling it with
 * V8 (each --time ELF's module: WebAssembly.validate), stores it in a cache directory of its own
 * under the key the engine looks up, and then measures guest speed as the speed section of
 * bench/run.ts does: the four programs of fixtures/src/compute.c, in N interleaved rounds
 * (default 3), each round running the native gcc -O2 driver (a fresh process: one warm-up call,
 * then 3 timed calls) and, for each CONFIG in an order rotated every round, a fresh bench/child.ts
 * speed process (the module from the cache, one warm-up call, then 3 timed calls, a fresh
 * instance each), all in CPU time. Per CONFIG and program: the best call over all rounds (ms), its
 * ratio to the first CONFIG's best (`vs first`) and to native's, and the geometric means of both
 * ratios; and the median of each process's first (warm-up) call, which runs V8's Liftoff code
 * while TurboFan compiles. Every call's result must equal native's.
 *
 * CONFIG is a named pipeline followed by modifiers separated by '/':
 *   shipped   PIPELINE of src/translate/module.ts (what translate() runs)
 *   o2        Binaryen's -O2 function pipeline (`Module.optimizeFunction`), LINEAR_PASSES for long
 *             functions, then dae-optimizing and remove-unused-module-elements (the pipeline
 *             before this bench)
 *   o2x       the same with O2_FUNCTION_PASSES written out (must give o2's bytes)
 *   daefirst  dae (dead-argument elimination without re-optimising) on the module as built, then
 *             o2x's function passes, then remove-unused-module-elements
 *   linear    as daefirst with LINEAR_PASSES for every function
 *   dae       dae, no function passes, remove-unused-module-elements
 *   none      no function passes; remove-unused-module-elements only
 *   -NAME     removes every occurrence of pass NAME (from every list)
 *   +NAME     appends NAME to the function passes
 *   before=A,B  after=A,B  functions=A,B  long=A,B   replace that list (empty: `after=`)
 * e.g. `o2x/-coalesce-locals/-reorder-locals`, `none/before=dae/+precompute`.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import binaryen from 'binaryen';
import { readElf } from '../src/elf/reader.js';
import { Engine } from '../src/engine/engine.js';
import { DEFAULT_TRANSLATE_OPTIONS } from '../src/translate/abi.js';
import { addBranchHints } from '../src/translate/hints.js';
import {
  buildModule,
  LINEAR_PASSES,
  O2_FUNCTION_PASSES,
  PIPELINE,
  translate,
  type Pipeline,
} from '../src/translate/module.js';
import { geomean, median } from './lib/figures.js';
import { buildDrivers, runDriver, SPEED_PROGRAMS } from './lib/native.js';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const COMPUTE = join(ROOT, 'fixtures/build/compute-gcc-O2.elf');
const MiB = 1 << 20;
const CALLS = 3;
const RUME = 'remove-unused-module-elements';

/** A pipeline to measure: Binaryen's own -O2 function pipeline when `functions` is null. */
interface Config {
  name: string;
  before: string[];
  functions: string[] | null;
  long: string[];
  after: string[];
}

const BASES: Record<string, () => Omit<Config, 'name'>> = {
  shipped: () => ({
    before: [...PIPELINE.before],
    functions: [...PIPELINE.functions],
    long: [...PIPELINE.long],
    after: [...PIPELINE.after],
  }),
  o2: () => ({ before: [], functions: null, long: [...LINEAR_PASSES], after: ['dae-optimizing', RUME] }),
  o2x: () => ({
    before: [],
    functions: [...O2_FUNCTION_PASSES],
    long: [...LINEAR_PASSES],
    after: ['dae-optimizing', RUME],
  }),
  daefirst: () => ({
    before: ['dae'],
    functions: [...O2_FUNCTION_PASSES],
    long: [...LINEAR_PASSES],
    after: [RUME],
  }),
  linear: () => ({ before: ['dae'], functions: [...LINEAR_PASSES], long: [...LINEAR_PASSES], after: [RUME] }),
  dae: () => ({ before: ['dae'], functions: [], long: [], after: [RUME] }),
  none: () => ({ before: [], functions: [], long: [], after: [RUME] }),
};

/** @throws Error for an unknown base or modifier, or -NAME of Binaryen's own pipeline */
function parseConfig(text: string): Config {
  const [base, ...mods] = text.split('/');
  const make = BASES[base];
  if (!make) throw new Error(`unknown pipeline ${base} (one of ${Object.keys(BASES).join(', ')})`);
  const c: Config = { name: text, ...make() };
  const list = (v: string) => (v === '' ? [] : v.split(','));
  for (const mod of mods) {
    const set = /^(before|after|functions|long)=(.*)$/.exec(mod);
    if (set) c[set[1] as 'before'] = list(set[2]);
    else if (mod.startsWith('-') || mod.startsWith('+')) {
      if (c.functions === null) throw new Error(`${text}: modify o2x, not o2 (Binaryen's own list)`);
      const pass = mod.slice(1);
      if (mod[0] === '+') c.functions.push(pass);
      else {
        const keep = (l: string[]) => l.filter((p) => p !== pass);
        const before = [c.before, c.functions, c.long, c.after].flat().length;
        [c.before, c.functions, c.long, c.after] = [
          keep(c.before),
          keep(c.functions),
          keep(c.long),
          keep(c.after),
        ];
        if ([c.before, c.functions, c.long, c.after].flat().length === before) {
          throw new Error(`${text}: no pass ${pass} to remove`);
        }
      }
    } else throw new Error(`${text}: bad modifier ${mod}`);
  }
  return c;
}

/** The pipeline translate() takes; Binaryen's own -O2 list written out for `functions: null`. */
function pipelineOf(c: Config): Pipeline {
  return { before: c.before, functions: c.functions ?? O2_FUNCTION_PASSES, long: c.long, after: c.after };
}

function cpuMs(c0: NodeJS.CpuUsage): number {
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / 1000;
}

/**
 * Translate with `c`. For `functions: null` the function passes are Binaryen's own
 * (`optimizeFunction`), run here the way module.ts ran them before its list was written out.
 */
function translateWith(elf: string, c: Config): { wasm: Uint8Array; cpuMs: number; optimizeMs: number } {
  const image = readElf(new Uint8Array(readFileSync(elf)));
  const c0 = process.cpuUsage();
  if (c.functions !== null) {
    const t = translate(image, DEFAULT_TRANSLATE_OPTIONS, pipelineOf(c));
    return { wasm: t.wasm, cpuMs: cpuMs(c0), optimizeMs: t.timings.optimize };
  }
  const { module: m, long } = buildModule(image, DEFAULT_TRANSLATE_OPTIONS);
  try {
    const t1 = performance.now();
    const whole = (l: string[]) => (long.size === 0 ? l : l.filter((p) => !p.endsWith('-optimizing')));
    if (c.before.length > 0) m.runPasses(whole(c.before));
    for (let i = 0; i < m.getNumFunctions(); i++) {
      const f = m.getFunctionByIndex(i);
      const info = binaryen.getFunctionInfo(f);
      if (info.module) continue;
      if (long.has(info.name)) {
        if (c.long.length > 0) m.runPassesOnFunction(f, c.long);
      } else m.optimizeFunction(f);
    }
    if (c.after.length > 0) m.runPasses(whole(c.after));
    const optimizeMs = performance.now() - t1;
    // written as translate() writes it
    const wasm = addBranchHints(m.emitBinary());
    return { wasm, cpuMs: cpuMs(c0), optimizeMs };
  } finally {
    m.dispose();
  }
}

/** `profile`: each pass's CPU ms over every function of `elf`, pass-major. */
function profile(elf: string, c: Config): void {
  const image = readElf(new Uint8Array(readFileSync(elf)));
  const p = pipelineOf(c);
  let c0 = process.cpuUsage();
  const { module: m, long } = buildModule(image, DEFAULT_TRANSLATE_OPTIONS);
  const rows: { list: string; pass: string; ms: number }[] = [{ list: '', pass: 'build', ms: cpuMs(c0) }];
  try {
    const funcs: { ref: number; long: boolean }[] = [];
    for (let i = 0; i < m.getNumFunctions(); i++) {
      const f = m.getFunctionByIndex(i);
      const info = binaryen.getFunctionInfo(f);
      if (!info.module) funcs.push({ ref: f, long: long.has(info.name) });
    }
    const whole = (l: readonly string[]) =>
      long.size === 0 ? l : l.filter((x) => !x.endsWith('-optimizing'));
    for (const pass of whole(p.before)) {
      c0 = process.cpuUsage();
      m.runPasses([pass]);
      rows.push({ list: 'before', pass, ms: cpuMs(c0) });
    }
    for (const [list, passes, isLong] of [
      ['functions', p.functions, false],
      ['long', p.long, true],
    ] as const) {
      for (const pass of passes) {
        c0 = process.cpuUsage();
        for (const f of funcs) if (f.long === isLong) m.runPassesOnFunction(f.ref, [pass]);
        rows.push({ list, pass, ms: cpuMs(c0) });
      }
    }
    for (const pass of whole(p.after)) {
      c0 = process.cpuUsage();
      m.runPasses([pass]);
      rows.push({ list: 'after', pass, ms: cpuMs(c0) });
    }
    c0 = process.cpuUsage();
    const bytes = m.emitBinary().length;
    rows.push({ list: '', pass: 'emit', ms: cpuMs(c0) });
    const n = funcs.filter((f) => f.long).length;
    console.log(
      `${basename(elf)} (${c.name}): ${funcs.length} functions (${n} long), ${bytes} bytes (without branch hints)`,
    );
  } finally {
    m.dispose();
  }
  const total = rows.reduce((s, r) => s + r.ms, 0);
  for (const r of rows) {
    console.log(`  ${r.list.padEnd(9)} ${r.pass.padEnd(30)} ${r.ms.toFixed(0).padStart(7)} ms`);
  }
  const byName = new Map<string, number>();
  for (const r of rows) if (r.list !== '') byName.set(r.pass, (byName.get(r.pass) ?? 0) + r.ms);
  console.log(`  total ${total.toFixed(0)} ms; by pass, every occurrence:`);
  for (const [pass, ms] of [...byName].sort((a, b) => b[1] - a[1])) {
    console.log(`    ${pass.padEnd(30)} ${ms.toFixed(0).padStart(7)} ms`);
  }
}

/** A fresh bench/child.ts speed process: its calls' CPU ms (warm-up first) and result. */
function bermSpeed(cacheDir: string, symbol: string, args: number[]): { ms: number[]; result: string } {
  const spec = { symbol, args, warm: 1, calls: CALLS };
  const r = spawnSync(
    process.execPath,
    [
      '--stack-size=4000',
      '--import',
      './scripts/ts/register.mjs',
      'bench/child.ts',
      'speed',
      COMPUTE,
      cacheDir,
      String(64 * MiB),
      JSON.stringify(spec),
      'optimized',
    ],
    { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * MiB },
  );
  if (r.status !== 0) throw new Error(`bench/child.ts speed ${symbol} failed:\n${r.stderr}`);
  const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as {
    ms: number[];
    result: string;
    tier: string;
  };
  if (out.tier !== 'optimized') throw new Error(`speed child ran the ${out.tier} tier`);
  return out;
}

async function compare(
  names: string[],
  rounds: number,
  timed: string[],
  only: string[] | null,
): Promise<void> {
  const configs = names.map(parseConfig);
  const SPEED = SPEED_PROGRAMS.filter((p) => only === null || only.includes(p.name));
  if (SPEED.length === 0) throw new Error(`no program among ${only?.join(', ')}`);
  const work = mkdtempSync(join(tmpdir(), 'berm-opt-passes-'));
  try {
    // Binaryen compiled and warmed once, so the first config does not pay for it
    translate(
      readElf(new Uint8Array(readFileSync(join(ROOT, 'fixtures/build/echo-gcc-O2.elf')))),
      DEFAULT_TRANSLATE_OPTIONS,
    );
    const engine = new Engine({ cacheDir: null, memorySize: 64 * MiB, tier: 'optimized' });
    const key = engine.keyFor(new Uint8Array(readFileSync(COMPUTE)), 'optimized');
    const dirs: string[] = [];
    const cost: string[][] = [];
    for (const [i, c] of configs.entries()) {
      const t = translateWith(COMPUTE, c);
      // valid: V8 compiles it (Binaryen validated it before the passes)
      await WebAssembly.compile(t.wasm);
      const dir = join(work, `c${i}`);
      mkdirSync(dir);
      new Engine({ cacheDir: dir, memorySize: 64 * MiB, tier: 'optimized' }).cache!.put(key, t.wasm);
      dirs.push(dir);
      const row = [
        c.name,
        `${t.cpuMs.toFixed(0)} ms CPU, ${t.optimizeMs.toFixed(0)} ms optimise, ${t.wasm.length} B`,
      ];
      for (const elf of timed) {
        const u = translateWith(elf, c);
        if (!WebAssembly.validate(u.wasm))
          throw new Error(`${c.name}: V8 finds ${basename(elf)}'s module invalid`);
        row.push(`${u.cpuMs.toFixed(0)} ms CPU, ${u.optimizeMs.toFixed(0)} ms optimise, ${u.wasm.length} B`);
      }
      cost.push(row);
      console.error(`[opt-passes] translated ${c.name}`);
    }
    console.log(
      `translate() (build + optimise + emit): process CPU ms, optimise wall ms, Wasm bytes; load average ${loadavg()}`,
    );
    console.log(['config', 'compute-gcc-O2', ...timed.map((e) => basename(e))].join(' | '));
    for (const row of cost) console.log(row.join(' | '));
    if (rounds === 0) return;

    const { native } = buildDrivers(work, false);
    // best[config][program] over every timed call of every round; nat[program] the same
    const best = configs.map(() => SPEED.map(() => Infinity));
    const perRound = configs.map(() => SPEED.map(() => [] as number[]));
    // each process's warm-up call: V8's Liftoff code while TurboFan compiles (what a one-shot call runs)
    const firsts = configs.map(() => SPEED.map(() => [] as number[]));
    const nat = SPEED.map(() => Infinity);
    console.log(`speed: ${rounds} rounds from load average ${loadavg()}`);
    for (let round = 0; round < rounds; round++) {
      for (const [pi, p] of SPEED.entries()) {
        const n = runDriver([native], p, CALLS);
        nat[pi] = Math.min(nat[pi], ...n.ms.slice(1));
        for (let k = 0; k < configs.length; k++) {
          const ci = (k + round) % configs.length;
          const b = bermSpeed(dirs[ci], p.symbol, p.args);
          if (b.result !== n.result) {
            throw new Error(`${configs[ci].name} ${p.name}: berm ${b.result}, native ${n.result}`);
          }
          const m = Math.min(...b.ms.slice(1));
          best[ci][pi] = Math.min(best[ci][pi], m);
          perRound[ci][pi].push(m);
          firsts[ci][pi].push(b.ms[0]);
        }
      }
      console.error(`[opt-passes] round ${round + 1} of ${rounds} done, load average ${loadavg()}`);
    }
    console.log(`speed to load average ${loadavg()}: best call ms (median of the rounds' bests)`);
    console.log(['config', ...SPEED.map((p) => p.name), 'geomean vs first', 'geomean vs native'].join(' | '));
    console.log(['native gcc -O2', ...nat.map((n) => n.toFixed(1)), '', ''].join(' | '));
    for (const [ci, c] of configs.entries()) {
      const vsFirst = geomean(best[ci].map((b, pi) => b / best[0][pi]));
      const vsNative = geomean(best[ci].map((b, pi) => b / nat[pi]));
      console.log(
        [
          c.name,
          ...best[ci].map((b, pi) => `${b.toFixed(1)} (${median(perRound[ci][pi]).toFixed(1)})`),
          vsFirst.toFixed(3),
          `${vsNative.toFixed(2)}x`,
        ].join(' | '),
      );
    }
    console.log('first call (the warm-up call of each process), median over the rounds, ms');
    console.log(['config', ...SPEED.map((p) => p.name), 'geomean vs first'].join(' | '));
    for (const [ci, c] of configs.entries()) {
      const med = firsts[ci].map((f) => median(f));
      const vsFirst = geomean(med.map((f, pi) => f / median(firsts[0][pi])));
      console.log([c.name, ...med.map((f) => f.toFixed(1)), vsFirst.toFixed(3)].join(' | '));
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function loadavg(): string {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
}

const [mode, ...rest] = process.argv.slice(2);
if (mode === 'profile') {
  const [config, ...elfs] = rest;
  if (config === undefined || elfs.length === 0) throw new Error('usage: profile CONFIG ELF...');
  const c = parseConfig(config);
  if (c.functions === null) throw new Error('profile needs a written-out pipeline (o2x, not o2)');
  console.log(`load average ${loadavg()}`);
  for (const elf of elfs) profile(elf, c);
  console.log(`load average ${loadavg()}`);
} else if (mode === 'compare') {
  let rounds = 3;
  let timed: string[] = [];
  let programs: string[] | null = null;
  const names: string[] = [];
  for (let i = 0; i < rest.length; i++) {
    if (rest[i] === '--rounds') rounds = Number(rest[++i]);
    else if (rest[i] === '--time') timed = rest[++i].split(',');
    else if (rest[i] === '--programs') programs = rest[++i].split(',');
    else names.push(rest[i]);
  }
  if (names.length === 0 || !Number.isInteger(rounds) || rounds < 0) {
    throw new Error('usage: compare [--rounds N] [--time ELF,ELF] CONFIG...');
  }
  await compare(names, rounds, timed, programs);
} else {
  throw new Error(
    'usage: opt-passes.ts profile CONFIG ELF... | compare [--rounds N] [--time ELF,ELF] CONFIG...',
  );
}

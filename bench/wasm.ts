// `make bench` section "wasm": WebAssembly harness images against translated ELFs, in one process.
// The guest-speed programs (fixtures/src/compute.c, wrapped as tools by bench/wasm/speed.c) built
// once as a Wasm harness (clang --target=wasm32 -O2) and once as an ELF (gcc -O2, translated by
// the optimising tier), each call a fresh instance, best of the timed calls; and the tool-call
// latency (p50/p99) of the echo fixture in both forms. The native baseline of the same programs
// is the "speed" section's (speed.<program>.native_ms in the same run).
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine } from '../src/engine/engine.js';
import { Harness } from '../src/harness/harness.js';
import { median, percentile } from './lib/figures.js';

type Fig = (name: string, value: number, unit: string, label: string, better?: 'lower' | 'higher') => void;

const ROOT = join(import.meta.dirname, '..');
const MiB = 1 << 20;

const PROGRAMS = [
  { name: 'sha256', args: `${16 * MiB} 1`, what: 'SHA-256 of 16 MiB' },
  { name: 'fib', args: '32 0', what: 'recursive fib(32)' },
  {
    name: 'qsort',
    args: '1000000 1',
    what: 'qsort of 1M ints (the SDK libc qsort on wasm32, picolibc on RISC-V)',
  },
  { name: 'coremark', args: '20000 1', what: 'CoreMark-like mix, 20000 iterations' },
];

function build(dir: string, target: 'wasm32' | 'riscv64'): string {
  const extra = target === 'wasm32' ? ['BERM_TARGET=wasm32'] : ['BERM_CC=gcc'];
  execFileSync(
    'make',
    [
      '--no-print-directory',
      '-s',
      '-f',
      'guest-sdk/berm.mk',
      'all',
      'HARNESS=speed',
      'SRCS=bench/wasm/speed.c',
      `BUILD=${dir}`,
      'OPT=-O2',
      ...extra,
    ],
    { cwd: ROOT, stdio: 'inherit' },
  );
  return join(dir, target === 'wasm32' ? 'speed.wasm' : 'speed.elf');
}

/** Best ms of `calls` timed invocations after one warm-up; the result of the last. */
function timed(h: Harness, tool: string, args: string, calls: number): { ms: number; result: string } {
  let result = '';
  const ms: number[] = [];
  for (let i = 0; i <= calls; i++) {
    const t0 = performance.now();
    const r = h.invoke(tool, new TextEncoder().encode(args));
    const dt = performance.now() - t0;
    if (r.status !== 'ok') throw new Error(`${tool}: ${r.status === 'failed' ? r.message : ''}`);
    result = r.result;
    if (i > 0) ms.push(dt);
  }
  return { ms: Math.min(...ms), result };
}

/** The "wasm" section (see the module comment). */
export async function benchWasm(fig: Fig, progress: (msg: string) => void, quick = false): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'berm-bench-wasm-'));
  progress('wasm: build bench/wasm/speed.c for wasm32 (clang) and riscv64 (gcc -O2)');
  const wasmFile = build(dir, 'wasm32');
  const elfFile = build(dir, 'riscv64');
  const engine = new Engine({ cacheDir: null, tier: 'optimized' });
  const wasm = await Harness.load(engine, wasmFile);
  const elf = await Harness.load(engine, elfFile);
  const calls = quick ? 1 : 3;
  const ratios: number[] = [];
  for (const p of PROGRAMS) {
    progress(`wasm: ${p.name}, 1+${calls} calls each`);
    const w = timed(wasm, p.name, p.args, calls);
    const e = timed(elf, p.name, p.args, calls);
    if (w.result !== e.result) throw new Error(`${p.name}: wasm ${w.result}, translated ${e.result}`);
    fig(
      `wasm.speed.${p.name}.wasm_ms`,
      w.ms,
      'ms',
      `${p.what}: Wasm harness (clang -O2 wasm32), wall, best call`,
    );
    fig(
      `wasm.speed.${p.name}.translated_ms`,
      e.ms,
      'ms',
      `${p.what}: translated ELF (gcc -O2, optimising tier), wall, best call`,
    );
    fig(`wasm.speed.${p.name}.vs_translated`, w.ms / e.ms, 'x', 'Wasm harness / translated ELF, best calls');
    ratios.push(w.ms / e.ms);
  }
  fig(
    'wasm.speed.geomean.vs_translated',
    Math.exp(ratios.reduce((a, r) => a + Math.log(r), 0) / ratios.length),
    'x',
    'geometric mean of the four',
  );

  progress('wasm: echo latency, Wasm and ELF');
  for (const [tag, file] of [
    ['wasm', join(ROOT, 'fixtures/build/echo-wasm32-O2.wasm')],
    ['elf', join(ROOT, 'fixtures/build/echo-gcc-O2.elf')],
  ] as const) {
    const h = await Harness.load(engine, file);
    const n = quick ? 200 : 2000;
    const us: number[] = [];
    for (let i = 0; i < n + 100; i++) {
      const t0 = performance.now();
      h.invoke('echo', '{"x":1}');
      if (i >= 100) us.push((performance.now() - t0) * 1000);
    }
    fig(
      `wasm.echo.${tag}.p50_us`,
      median(us),
      'us',
      `echo tool call p50, ${tag === 'wasm' ? 'Wasm harness' : 'translated ELF'} (fresh instance)`,
    );
    fig(
      `wasm.echo.${tag}.p99_us`,
      percentile(us, 99),
      'us',
      `echo tool call p99, ${tag === 'wasm' ? 'Wasm harness' : 'translated ELF'}`,
    );
  }
  await engine.close();
}

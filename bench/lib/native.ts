/**
 * The native baseline of the guest-speed programs (fixtures/src/compute.c): a driver built with
 * the host's gcc -O2 against the SDK's stand-in host (bench/native/compute_driver.c), run in a
 * fresh process per round. Used by the "speed" section and, for the same programs built as Wasm
 * harnesses, by the "wasm" section.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..', '..');
const SDK = join(ROOT, 'guest-sdk');

/** One guest-speed program: the driver's entry symbol and its two arguments. */
export interface SpeedProgram {
  name: string;
  symbol: string;
  args: number[];
  what: string;
}

const MiB = 1 << 20;

/** The guest-speed programs of fixtures/src/compute.c and the arguments every bench gives them. */
export const SPEED_PROGRAMS: readonly SpeedProgram[] = [
  { name: 'sha256', symbol: 'sha256_seed', args: [16 * MiB, 1], what: 'SHA-256 of 16 MiB' },
  { name: 'fib', symbol: 'fib_rec', args: [32], what: 'recursive fib(32)' },
  {
    name: 'qsort',
    symbol: 'qsort_ints',
    args: [1_000_000, 1],
    what: 'qsort of 1M ints (picolibc/glibc qsort)',
  },
  {
    name: 'coremark',
    symbol: 'coremark_mix',
    args: [20_000, 1],
    what: 'CoreMark-like mix, 20000 iterations',
  },
];

/**
 * Build the native (gcc -O2) driver into `dir`, and with `riscv` also the Linux-user RISC-V one
 * (riscv64-linux-gnu-gcc -O2 -static, for qemu-riscv64).
 * @returns the paths of the executables (`rv` is null without `riscv`)
 * @throws the compiler's failure (execFileSync's error, its output on the inherited stderr)
 */
export function buildDrivers(dir: string, riscv: boolean): { native: string; rv: string | null } {
  const srcs = [
    join(ROOT, 'bench/native/compute_driver.c'),
    join(ROOT, 'fixtures/src/compute.c'),
    join(SDK, 'src/berm_rt.c'),
    join(SDK, 'host/berm_host.c'),
  ];
  const flags = [
    '-O2',
    '-DBERM_HOST',
    '-DBERM_HOST_NO_MAIN',
    '-w',
    '-I',
    join(SDK, 'include'),
    '-I',
    join(SDK, 'host'),
  ];
  const native = join(dir, 'compute-native');
  execFileSync('gcc', [...flags, '-o', native, ...srcs], { stdio: 'inherit' });
  if (!riscv) return { native, rv: null };
  const rv = join(dir, 'compute-rv64');
  execFileSync('riscv64-linux-gnu-gcc', [...flags, '-static', '-o', rv, ...srcs], { stdio: 'inherit' });
  return { native, rv };
}

/**
 * Runs a native or qemu driver once: one warm-up call plus `calls` timed calls in one process,
 * each timed by the driver in CPU time of its process (CLOCK_PROCESS_CPUTIME_ID; under qemu-user
 * that is the qemu process's). Returns the result (hex, no leading zeros) and each call's CPU ms,
 * call 0 first.
 * @throws Error when the driver's output is not the result and calls + 1 timings
 */
export function runDriver(cmd: string[], p: SpeedProgram, calls: number): { result: string; ms: number[] } {
  const out = execFileSync(cmd[0], [...cmd.slice(1), String(calls), p.symbol, ...p.args.map(String)], {
    encoding: 'utf8',
  });
  const [hex, ...ns] = out.trim().split(/\s+/);
  if (ns.length !== calls + 1) throw new Error(`${cmd.join(' ')} ${p.symbol}: unexpected output ${out}`);
  return { result: BigInt('0x' + hex).toString(16), ms: ns.map((n) => Number(n) / 1e6) };
}

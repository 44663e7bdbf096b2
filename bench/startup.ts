/**
 * Process start (bench/run.ts section `startup`; run alone with
 *   node --stack-size=4000 --import ./scripts/ts/register.mjs bench/run.ts section startup):
 * the CLI making one call from the warm cache, as a user meets it, against `node -e 0` measured
 * in the same run (interleaved rounds, medians), and `berm --version`.
 *
 * One call of each of four guests: echo-gcc-O2 (`call echo`), text-clang-O0 (`call stats`, which
 * formats floating point through a 15 KB function), big-gcc-O2 (`exec big_run 1 7`, ~100 KiB of
 * text) and rs_json-O0 (`call order_total`, serde_json at opt-level 0, ~400 KB of text), each
 * from a cache holding the optimised tier, as `berm compile` (CI) leaves it. For each: time from
 * spawn to the first byte on stdout (the answer) and to the process's exit, and exit over
 * `node -e 0`'s. The process's exit is what a script or agent waits for; the gap between the two
 * is what the process does after answering (V8's background compiles, teardown). The echo call
 * also runs from an installed copy of the package; its figures and `--version`'s keep their
 * earlier names (`startup.cli_call_*`, `startup.installed_cli_call_*`, `startup.cli_version_*`).
 *
 * Every answer is checked against the one computed natively: fixtures/expected.json,
 * fixtures/rust/expected.json, and big_run(1, 7) from big.c built with the host's gcc
 * (fixtures/big/Makefile `expected`; the same value test/translate-valid.test.ts holds).
 */
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, symlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { builtIsCurrent } from '../bin/launch.js';
import { median } from './lib/figures.js';

type Fig = (name: string, value: number, unit: string, label: string, better?: 'lower' | 'higher') => void;

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const QUICK = process.env.BENCH_QUICK === '1';

/** One guest call of the section: the CLI's arguments after the global options, and its answer. */
interface StartupCall {
  /** figure name part */
  name: string;
  /** what the label says */
  what: string;
  args: string[];
  /** stdout, trimmed */
  expect: string;
}

/** A tool's case and native result from an expected.json (fixtures/ or fixtures/rust/). */
function expectedTool(
  file: string,
  match: (t: Record<string, unknown>) => boolean,
): { args: string; result: string } {
  const doc = JSON.parse(readFileSync(join(ROOT, file), 'utf8')) as { tools: Record<string, unknown>[] };
  const t = doc.tools.find((c) => match(c) && c.ok === true);
  if (!t) throw new Error(`${file}: no case for the startup section`);
  return { args: String(t.args), result: String(t.result) };
}

/** The four calls (see the module comment). */
function startupCalls(): StartupCall[] {
  const text = expectedTool(
    'fixtures/expected.json',
    (t) => t.source === 'text.c' && t.tool === 'stats' && (t.abi ?? 1) === 1,
  );
  const json = expectedTool(
    'fixtures/rust/expected.json',
    (t) => t.harness === 'rs_json' && t.tool === 'order_total',
  );
  const elf = (f: string): string => join(ROOT, 'fixtures', f);
  return [
    {
      name: 'echo',
      what: 'call echo-gcc-O2.elf echo \'{"x":1}\'',
      args: ['call', elf('build/echo-gcc-O2.elf'), 'echo', '{"x":1}'],
      expect: '{"x":1}',
    },
    {
      name: 'text-clang-O0',
      what: 'call text-clang-O0.elf stats',
      args: ['call', elf('build/text-clang-O0.elf'), 'stats', text.args],
      expect: text.result,
    },
    {
      name: 'big-gcc-O2',
      what: 'exec big-gcc-O2.elf big_run 1 7',
      args: ['exec', elf('big/big-gcc-O2.elf'), 'big_run', '1', '7'],
      // 16983176686899154273: big_run(1, 7) natively; a1 is not part of the function's result
      expect: `a0=0x${16983176686899154273n.toString(16).padStart(16, '0')} a1=`,
    },
    {
      name: 'rs_json-O0',
      what: 'call rs_json-O0.elf order_total',
      args: ['call', elf('rust/build/rs_json-O0.elf'), 'order_total', json.args],
      expect: json.result,
    },
  ];
}

/** Times of one process, ms from spawn: first byte on stdout (NaN: none) and exit. */
interface Timed {
  firstByte: number;
  exit: number;
}

/**
 * Run `node ARGS` (stdout and stderr piped, stdin closed) and time it.
 * @param expect the trimmed stdout must start with it
 * @throws Error when the process fails or prints something else
 */
function timed(args: string[], env: NodeJS.ProcessEnv, expect?: string): Promise<Timed> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let firstByte = NaN;
    let exit = NaN;
    let code: number | null = null;
    let out = '';
    let err = '';
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      if (Number.isNaN(firstByte)) firstByte = performance.now() - t0;
      out += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    child.on('error', reject);
    child.on('exit', (c) => {
      exit = performance.now() - t0;
      code = c;
    });
    // the output is whole once the pipes closed, after 'exit'
    child.on('close', () => {
      if (code !== 0) reject(new Error(`${args.join(' ')} exited ${code}: ${err}`));
      else if (expect !== undefined && !out.trim().startsWith(expect))
        reject(new Error(`${args.join(' ')} printed ${out} (expected ${expect})`));
      else resolve({ firstByte, exit });
    });
  });
}

/** The `startup` section: see the module comment. */
export async function benchStartup(
  fig: Fig,
  progress: (msg: string) => void,
  work: string,
  cache: string,
): Promise<void> {
  const n = QUICK ? 5 : 21;
  const berm = join(ROOT, 'bin', 'berm.js');
  const calls = startupCalls();
  const built = builtIsCurrent();
  const argsOf = (bin: string, c: StartupCall): string[] => [
    '--stack-size=4000',
    bin,
    '--cache-dir',
    cache,
    ...c.args,
  ];
  const version = ['--stack-size=4000', berm, '--version'];
  // What `npm install` leaves (the package's files: bin/, dist/, package.json; no src/), in a scratch
  // folder with node_modules linked: bin/launch.js then runs dist/ as built, without the walk of
  // src/ that a checkout makes at every start to find edits made after the build (bin/launch.js
  // currentBuild; ~2 ms for its ~150 files).
  let installed: string | null = null;
  if (built) {
    const dir = join(work, 'installed');
    mkdirSync(dir);
    for (const p of ['bin', 'dist', 'package.json']) cpSync(join(ROOT, p), join(dir, p), { recursive: true });
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
    installed = join(dir, 'bin', 'berm.js');
  }
  // NODE_EXTRA_CA_CERTS makes every Node process parse that CA bundle at start (~45 ms here with
  // Debian's 220 KB bundle, set by this machine's environment): it would add the same constant to
  // both sides and hide the CLI's own cost, so the target figures are measured without it and the
  // ratio with the inherited environment is reported beside them
  const inherited = process.env.NODE_EXTRA_CA_CERTS;
  const clean = { ...process.env };
  delete clean.NODE_EXTRA_CA_CERTS;
  // the optimised tier in the cache, as `berm compile` (CI) leaves it: with only the baseline tier a
  // short-lived process would translate on every call (a hit after the first run: the cache is kept)
  for (const c of calls) {
    progress(`process start: berm compile ${c.args[1]} (a no-op once cached)`);
    const r = spawnSync(
      process.execPath,
      ['--stack-size=4000', berm, '--cache-dir', cache, 'compile', c.args[1]],
      {
        encoding: 'utf8',
        env: clean,
      },
    );
    if (r.status !== 0) throw new Error(`berm compile ${c.args[1]} exited ${r.status}: ${r.stderr}`);
  }
  progress(
    `process start: node -e 0, ${calls.length} calls, berm --version x${n} (${built ? 'dist/' : 'TS sources'})`,
  );
  // one untimed round: the page cache holds every file the timed rounds read
  for (const c of calls) await timed(argsOf(berm, c), clean, c.expect);
  if (installed !== null) await timed(argsOf(installed, calls[0]), clean, calls[0].expect);
  const node: number[] = [];
  const runs = calls.map(() => ({ firstByte: [] as number[], exit: [] as number[] }));
  const installedCalls: number[] = [];
  const versions: number[] = [];
  const nodeEnv: number[] = [];
  const callsEnv: number[] = [];
  for (let i = 0; i < n; i++) {
    node.push((await timed(['-e', '0'], clean)).exit);
    for (const [k, c] of calls.entries()) {
      const r = await timed(argsOf(berm, c), clean, c.expect);
      runs[k].firstByte.push(r.firstByte);
      runs[k].exit.push(r.exit);
    }
    if (installed !== null)
      installedCalls.push((await timed(argsOf(installed, calls[0]), clean, calls[0].expect)).exit);
    versions.push((await timed(version, clean)).exit);
    if (inherited !== undefined) {
      nodeEnv.push((await timed(['-e', '0'], process.env)).exit);
      callsEnv.push((await timed(argsOf(berm, calls[0]), process.env, calls[0].expect)).exit);
    }
  }
  const base = median(node);
  const bundle = join(ROOT, 'dist', 'berm-cli.cjs');
  const from = !built
    ? 'TS sources (dist/ absent or stale: npm run build)'
    : !existsSync(bundle)
      ? 'compiled dist/, no bundle'
      : existsSync(`${bundle}.v8cache`)
        ? 'dist/berm-cli.cjs with its code cache'
        : 'dist/berm-cli.cjs, no code cache';
  fig('startup.node_e0_ms', base, 'ms', 'node -e 0, process start to exit (same run, interleaved)');
  for (const [k, c] of calls.entries()) {
    const [first, exit] = [median(runs[k].firstByte), median(runs[k].exit)];
    const p = `startup.${c.name}`;
    fig(`${p}.first_byte_ms`, first, 'ms', `berm ${c.what}, warm cache: start to the answer's first byte`);
    fig(`${p}.exit_ms`, exit, 'ms', `berm ${c.what}, warm cache: start to exit (${from})`);
    fig(`${p}.vs_node`, exit / base, 'x', `berm ${c.what}, start to exit / node -e 0 (target <= 2)`);
  }
  // the echo call under its earlier names
  const c = median(runs[0].exit);
  fig('startup.cli_call_ms', c, 'ms', `berm call echo, warm cache, start to exit (${from})`);
  fig('startup.cli_call_vs_node', c / base, 'x', 'berm call / node -e 0 (target <= 2)');
  if (installedCalls.length > 0) {
    const ic = median(installedCalls);
    fig('startup.installed_cli_call_ms', ic, 'ms', 'the same call from an installed copy (no src/ to check)');
    fig('startup.installed_cli_call_vs_node', ic / base, 'x', 'installed berm call / node -e 0');
  }
  const v = median(versions);
  fig('startup.cli_version_ms', v, 'ms', 'berm --version, start to exit');
  fig('startup.cli_version_vs_node', v / base, 'x', 'berm --version / node -e 0');
  if (inherited !== undefined) {
    const [be, ce] = [median(nodeEnv), median(callsEnv)];
    fig('startup.env_node_e0_ms', be, 'ms', 'node -e 0 with NODE_EXTRA_CA_CERTS as inherited');
    fig('startup.env_cli_call_ms', ce, 'ms', 'berm call echo with NODE_EXTRA_CA_CERTS as inherited');
    fig(
      'startup.env_cli_call_vs_node',
      ce / be,
      'x',
      'the same ratio with NODE_EXTRA_CA_CERTS (not the target)',
    );
  }
}

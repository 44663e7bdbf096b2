/**
 * Two bermd builds under the same load at the same time: each gets 32 connections of echo calls
 * (fixtures/build/echo-gcc-O2.elf) for the same seconds, and each one's requests/s and CPU per
 * request (its serving thread, and the whole process) are read from /proc. On a shared machine
 * whose speed drifts from minute to minute, two runs one after the other differ by ±20 %; two
 * daemons loaded together see the same machine, so their ratio is what one build costs against
 * the other. Run it twice with the order swapped (the first daemon started gets a small edge).
 *
 *   node --import ./scripts/ts/register.mjs bench/daemon-ab.ts TREE_A TREE_B [--seconds S]
 *
 * TREE_A and TREE_B are checkouts with a current build (`node scripts/build.mjs` in each); their
 * bin/bermd.js is started with the per-harness rate limit lifted. BERMD_ARGS adds bermd flags to
 * both, ROOTDIR puts their state roots elsewhere than the temporary folder (e.g. /dev/shm, so
 * neither waits on a disk other processes use). Linux only (/proc).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const CONNECTIONS = 32;

interface Daemon {
  tree: string;
  proc: ChildProcess;
  pool: Pool;
  root: string;
}

/** Start `tree`'s bermd and deploy the echo harness as `bench`. */
async function start(tree: string): Promise<Daemon> {
  const root = mkdtempSync(join(process.env.ROOTDIR ?? tmpdir(), 'bermd-ab-'));
  const cache = join(tmpdir(), 'berm-bench-cache');
  mkdirSync(cache, { recursive: true });
  const proc = spawn(
    process.execPath,
    [
      join(tree, 'bin/bermd.js'),
      ...['--addr', '127.0.0.1:0', '--root', root, '--cache-dir', cache],
      ...['--limit', 'harnessRate=1000000', '--limit', 'harnessBurst=1000000'],
      ...(process.env.BERMD_ARGS ?? '').split(/\s+/).filter(Boolean),
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const url = await new Promise<string>((resolve, reject) => {
    let err = '';
    proc.stderr!.on('data', (c: Buffer) => {
      err += c.toString();
      const m = /listening on (http:\/\/\S+)/.exec(err);
      if (m) resolve(m[1]!);
    });
    proc.on('exit', (code) => reject(new Error(`bermd of ${tree} exited (${code}):\n${err}`)));
  });
  const pool = new Pool(url, { connections: CONNECTIONS, pipelining: 1 });
  const elf = readFileSync(join(ROOT, 'fixtures/build/echo-gcc-O2.elf'));
  const put = await pool.request({ method: 'PUT', path: '/harnesses/bench', body: elf });
  const text = await put.body.text();
  if (put.statusCode !== 200) throw new Error(`deploy to ${tree} failed: ${put.statusCode} ${text}`);
  return { tree, proc, pool, root };
}

/** CPU time of a process in clock ticks (1/100 s): its main thread and all its threads. */
function cpuTicks(pid: number): { main: number; all: number } {
  let main = 0;
  let all = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(f[11]) + Number(f[12]); // utime + stime
    all += ticks;
    if (Number(tid) === pid) main = ticks;
  }
  return { main, all };
}

/** Echo calls on every connection for `seconds`; each reply is checked. @returns calls answered */
async function load(d: Daemon, seconds: number): Promise<number> {
  let ok = 0;
  let next = Math.floor(Math.random() * 1e9);
  const end = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < end) {
        const args = `{"i":${next++}}`;
        const res = await d.pool.request({ method: 'POST', path: '/harnesses/bench/tools/echo', body: args });
        const text = await res.body.text();
        if (res.statusCode !== 200 || (JSON.parse(text) as { done?: string }).done !== args)
          throw new Error(`${d.tree}: unexpected reply ${res.statusCode} ${text}`);
        ok++;
      }
    }),
  );
  return ok;
}

const trees = process.argv.slice(2).filter((a, i, all) => !a.startsWith('--') && all[i - 1] !== '--seconds');
const si = process.argv.indexOf('--seconds');
const seconds = si >= 0 ? Number(process.argv[si + 1]) : 10;
if (trees.length !== 2) {
  process.stderr.write('usage: bench/daemon-ab.ts TREE_A TREE_B [--seconds S]\n');
  process.exit(2);
}
const daemons = [await start(trees[0]!), await start(trees[1]!)];
try {
  await Promise.all(daemons.map((d) => load(d, 2))); // warm-up
  const before = daemons.map((d) => cpuTicks(d.proc.pid!));
  const t0 = performance.now();
  const calls = await Promise.all(daemons.map((d) => load(d, seconds)));
  const wall = (performance.now() - t0) / 1000;
  const after = daemons.map((d) => cpuTicks(d.proc.pid!));
  const row = daemons.map((d, i) => {
    const usPerCall = (ticks: number) => ((ticks * 10_000) / calls[i]!).toFixed(1);
    return {
      tree: d.tree,
      rps: Math.round(calls[i]! / wall),
      serving_us_per_call: Number(usPerCall(after[i]!.main - before[i]!.main)),
      process_us_per_call: Number(usPerCall(after[i]!.all - before[i]!.all)),
    };
  });
  for (const r of row)
    console.log(
      `${r.tree}: ${r.rps} req/s, CPU ${r.serving_us_per_call} µs/call on the serving thread, ${r.process_us_per_call} µs/call in all`,
    );
  console.log(`B/A: req/s ${(row[1]!.rps / row[0]!.rps).toFixed(3)}`);
} finally {
  for (const d of daemons) {
    await d.pool.close();
    const exited = new Promise((r) => d.proc.once('exit', r));
    d.proc.kill('SIGTERM');
    await exited;
    rmSync(d.root, { recursive: true, force: true });
  }
}

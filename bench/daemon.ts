/**
 * bermd under load: requests/s and p50/p99 latency of a trivial tool (`echo` of
 * fixtures/build/echo-gcc-O2.elf) at 64 concurrent connections (an undici loop), and the same
 * against `POST /health` and `GET /health`, which do no runtime work: the ratio tool/health shows
 * the runtime's share of a request. Every tool reply is checked (echo returns its unique
 * arguments); afterwards the journal's records of the benchmark harness are counted against the
 * acknowledged calls: nothing may be lost or duplicated.
 *
 *   node --import ./scripts/ts/register.mjs bench/daemon.ts [--seconds S] [--health-seconds S] [--json]
 *
 * bermd runs with the per-harness rate limit lifted (it would refuse most of the load).
 * Defaults: 30 s for the tool, 10 s for each health phase (BENCH_QUICK=1: 3 s and 2 s). bermd runs
 * as a child process with its default pool (a worker per core plus the reserve that one harness may
 * not take); the load generator is this process (both share the machine).
 * With --json the last stdout line is `{"figures": {...}}` (bench/run.ts reads it).
 * BERMD_NODE_ARGS adds Node flags to bermd's command line, e.g. to profile the serving thread:
 * `BERMD_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof' node ... bench/daemon.ts`; BERMD_ARGS adds
 * bermd flags, e.g. `BERMD_ARGS='--workers 2'` to compare pools.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { percentile, type Figure } from './lib/figures.js';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const QUICK = process.env.BENCH_QUICK === '1';
const CONNECTIONS = 64;
const HARNESS = 'bench';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
}
const TOOL_S = arg('--seconds', QUICK ? 3 : 30);
const HEALTH_S = arg('--health-seconds', QUICK ? 2 : 10);
const JSON_OUT = process.argv.includes('--json');

function progress(msg: string): void {
  process.stderr.write(`[bench daemon] ${msg}\n`);
}

function startBermd(root: string, cacheDir: string): Promise<{ proc: ChildProcess; url: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn(
      process.execPath,
      [
        ...(process.env.BERMD_NODE_ARGS ?? '').split(/\s+/).filter(Boolean),
        join(ROOT, 'bin/bermd.js'),
        ...['--addr', '127.0.0.1:0', '--root', root, '--cache-dir', cacheDir],
        // the per-harness rate limit (default 1000/s) would refuse most of the load: lift it, the
        // figure is the throughput of the path, not of the limiter
        ...['--limit', 'harnessRate=1000000', '--limit', 'harnessBurst=1000000'],
        ...(process.env.BERMD_ARGS ?? '').split(/\s+/).filter(Boolean),
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let err = '';
    proc.stderr!.on('data', (c: Buffer) => {
      err += c.toString();
      const m = /listening on (http:\/\/\S+)/.exec(err);
      if (m) resolve({ proc, url: m[1]! });
    });
    proc.on('exit', (code) => reject(new Error(`bermd exited (${code}):\n${err}`)));
  });
}

interface Phase {
  ok: number;
  errors: number;
  rps: number;
  p50: number;
  p99: number;
}

/** CONNECTIONS loops, each one request at a time, for `seconds`. Latencies in ms. */
async function load(
  pool: Pool,
  seconds: number,
  request: (i: number) => { method: 'GET' | 'POST'; path: string; body?: string },
  check: (i: number, status: number, body: string) => boolean,
): Promise<Phase> {
  const lat: number[] = [];
  let ok = 0;
  let errors = 0;
  let next = 0;
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  const loop = async (): Promise<void> => {
    while (performance.now() < end) {
      const i = next++;
      const r = request(i);
      const s = performance.now();
      try {
        const res = await pool.request({ method: r.method, path: r.path, body: r.body ?? null });
        const text = await res.body.text();
        lat.push(performance.now() - s);
        if (check(i, res.statusCode, text)) ok++;
        else errors++;
      } catch {
        errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: CONNECTIONS }, loop));
  const wall = (performance.now() - t0) / 1000;
  return { ok, errors, rps: ok / wall, p50: percentile(lat, 50), p99: percentile(lat, 99) };
}

function journalCount(root: string): number | null {
  const files = readdirSync(root).filter((f) => /^journal(\.\d+)?\.jsonl$/.test(f));
  if (files.length === 0) return null;
  let n = 0;
  for (const f of files) {
    for (const line of readFileSync(join(root, f), 'utf8').split('\n')) {
      if (line === '') continue;
      const r = JSON.parse(line) as { harness: string; entry: string; trigger: string };
      if (r.harness === HARNESS && r.entry === 'echo' && r.trigger === 'call') n++;
    }
  }
  return n;
}

const figures: Record<string, Figure> = {};
function fig(name: string, value: number, unit: string, label: string, better: 'lower' | 'higher'): void {
  figures[name] = { value, unit, better, label };
}

const root = mkdtempSync(join(tmpdir(), 'bermd-bench-'));
const cacheDir = join(tmpdir(), 'berm-bench-cache');
mkdirSync(cacheDir, { recursive: true });
const { proc, url } = await startBermd(root, cacheDir);
const pool = new Pool(url, { connections: CONNECTIONS, pipelining: 1 });
try {
  const elf = readFileSync(join(ROOT, 'fixtures/build/echo-gcc-O2.elf'));
  const put = await pool.request({ method: 'PUT', path: `/harnesses/${HARNESS}`, body: elf });
  if (put.statusCode !== 200) throw new Error(`deploy failed: ${put.statusCode} ${await put.body.text()}`);
  await put.body.text();

  const args = (i: number): string => `{"i":${i}}`;
  const toolReq = (i: number) => ({
    method: 'POST' as const,
    path: `/harnesses/${HARNESS}/tools/echo`,
    body: args(i),
  });
  const toolCheck = (i: number, status: number, body: string): boolean =>
    status === 200 && (JSON.parse(body) as { done?: string }).done === args(i);
  progress('warm-up 1 s');
  const warm = await load(pool, 1, toolReq, toolCheck);
  progress(`tool ${TOOL_S} s at ${CONNECTIONS} connections`);
  const tool = await load(
    pool,
    TOOL_S,
    (i) => toolReq(i + 1e9),
    (i, s, b) => toolCheck(i + 1e9, s, b),
  );
  progress(`POST /health ${HEALTH_S} s`);
  const hpost = await load(
    pool,
    HEALTH_S,
    () => ({ method: 'POST', path: '/health', body: '{}' }),
    (_i, s) => s === 200,
  );
  progress(`GET /health ${HEALTH_S} s`);
  const hget = await load(
    pool,
    HEALTH_S,
    () => ({ method: 'GET', path: '/health' }),
    (_i, s) => s === 200,
  );

  const label = `${CONNECTIONS} connections, ${TOOL_S} s`;
  fig('daemon.tool.rps', tool.rps, 'req/s', `echo tool through bermd, ${label}`, 'higher');
  fig('daemon.tool.p50_ms', tool.p50, 'ms', 'echo tool latency p50', 'lower');
  fig('daemon.tool.p99_ms', tool.p99, 'ms', 'echo tool latency p99', 'lower');
  fig('daemon.tool.errors', tool.errors, 'req', 'non-200 or wrong echo replies', 'lower');
  fig('daemon.health_post.rps', hpost.rps, 'req/s', `POST /health, ${CONNECTIONS} connections`, 'higher');
  fig('daemon.health_post.p50_ms', hpost.p50, 'ms', 'POST /health p50', 'lower');
  fig('daemon.health_post.p99_ms', hpost.p99, 'ms', 'POST /health p99', 'lower');
  fig('daemon.health_get.rps', hget.rps, 'req/s', `GET /health, ${CONNECTIONS} connections`, 'higher');
  fig('daemon.health_get.p50_ms', hget.p50, 'ms', 'GET /health p50', 'lower');
  fig('daemon.health_get.p99_ms', hget.p99, 'ms', 'GET /health p99', 'lower');
  fig('daemon.tool_vs_health_post', tool.rps / hpost.rps, 'x', 'tool req/s / POST /health req/s', 'higher');
  fig('daemon.tool_vs_health_get', tool.rps / hget.rps, 'x', 'tool req/s / GET /health req/s', 'higher');

  // graceful stop, so the journal is complete and closed before it is counted
  await pool.close();
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGTERM');
  await exited;
  const journal = journalCount(root);
  const acked = warm.ok + tool.ok;
  if (journal !== null) {
    fig(
      'daemon.tool.lost',
      Math.max(0, acked - journal),
      'calls',
      'acknowledged calls missing from the journal',
      'lower',
    );
    fig(
      'daemon.tool.duplicated',
      Math.max(0, journal - acked),
      'calls',
      'journal records beyond the acknowledged calls',
      'lower',
    );
  } else {
    progress('no journal under the root: lost/duplicated not counted');
  }
  progress(
    `acknowledged ${acked} calls (${tool.errors + warm.errors} errors); journal records ${journal ?? 'n/a'}`,
  );
} finally {
  if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
  if (existsSync(root)) rmSync(root, { recursive: true, force: true });
}

if (JSON_OUT) process.stdout.write(JSON.stringify({ figures }) + '\n');
else {
  for (const [k, f] of Object.entries(figures)) {
    console.log(
      `${k.padEnd(28)} ${f.value.toFixed(f.unit === 'req/s' ? 0 : 3).padStart(10)} ${f.unit.padEnd(6)} ${f.label}`,
    );
  }
}

/**
 * Scale-out benchmark: wakes/s and trivial tool calls/s with 1, 2 and 3 bermd sharing one
 * PostgreSQL store, as ratios to one daemon, and the single-daemon figures against the SQLite
 * backend (one bermd, its own --root).
 *
 *   node --stack-size=4000 --import ./scripts/ts/register.mjs bench/scale-out.ts [--json]
 *     [--wakes N] [--seconds S]
 *
 * PostgreSQL: BERM_TEST_PG_URL when set (each configuration gets a fresh database on it), else a
 * throwaway cluster started with scripts/pg-cluster.sh and stopped at the end.
 *
 * wakes/s: N wakes (default 3,000; BENCH_QUICK=1: 600) of the queue test guest's on_wake are
 * armed through the daemons' HTTP API (round robin) all due at one instant after the arming; the
 * figure is N / (instant of the last finished wake − the due instant), counted from the daemons'
 * /metrics (invocations by trigger), so every backend is measured the same way.
 * tool calls/s: 32 connections spread over the daemons call `echo` of the queue test guest for S
 * seconds (default 10; quick: 3); every reply is checked.
 * Every daemon runs with 1 worker; the load generator shares the machine (2 cores here), which
 * caps what a third daemon can add: the ratios say how much of the machine the cluster gets, not
 * how it would scale on separate hosts.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { Pool } from 'undici';
import { startBermd, stopBermd, type Bermd } from '../test/helpers/cluster.js';
import type { Figure } from './lib/figures.js';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const QUICK = process.env.BENCH_QUICK === '1';
function arg(name: string, def: number): number {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
}
const WAKES = arg('--wakes', QUICK ? 600 : 3000);
const SECONDS = arg('--seconds', QUICK ? 3 : 10);
const CONNECTIONS = 32;
const JSON_OUT = process.argv.includes('--json');
const QG = readFileSync(join(ROOT, 'test/data/queue-guest.elf'));
const CACHE = join(tmpdir(), 'berm-bench-cache');
mkdirSync(CACHE, { recursive: true });

function progress(msg: string): void {
  process.stderr.write(`[bench scale-out] ${msg}\n`);
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A fresh database on the cluster at `base`. */
async function freshDb(base: string): Promise<string> {
  const name = `berm_bench_${randomBytes(4).toString('hex')}`;
  const c = new pg.Client({ connectionString: base });
  await c.connect();
  await c.query(`CREATE DATABASE ${name}`);
  await c.end();
  const u = new URL(base);
  u.pathname = `/${name}`;
  return u.toString();
}

/** Sum of `berm_invocations_total{trigger="wake"...}` style counters over the daemons' /metrics. */
async function wakesDone(nodes: Bermd[]): Promise<number> {
  let n = 0;
  for (const b of nodes) {
    const text = await (await fetch(`${b.url}/metrics`)).text();
    for (const line of text.split('\n')) {
      if (line.startsWith('#') || !/_invocations_total\{/.test(line) || !/trigger="wake"/.test(line))
        continue;
      n += Number(line.trim().split(/\s+/).pop());
    }
  }
  return n;
}

async function measure(
  store: (i: number) => string | undefined,
  count: number,
): Promise<{ wakes: number; calls: number }> {
  const nodes: Bermd[] = [];
  const roots: string[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const root = mkdtempSync(join(tmpdir(), 'bermd-bench-scale-'));
      roots.push(root);
      const s = store(i);
      nodes.push(
        await startBermd({
          root,
          cacheDir: CACHE,
          workers: 1,
          // the per-harness rate limit (default 1000/s) would refuse part of the load: lifted, the
          // figures are the throughput of the path, not of the limiter (as bench/daemon.ts)
          extra: ['--limit', 'harnessRate=1000000', '--limit', 'harnessBurst=1000000'],
          ...(s !== undefined ? { store: s } : {}),
        }),
      );
    }
    const put = await fetch(`${nodes[0]!.url}/harnesses/qg`, { method: 'PUT', body: QG });
    if (put.status !== 200) throw new Error(`deploy: ${put.status} ${await put.text()}`);
    for (const b of nodes) {
      while ((await fetch(`${b.url}/harnesses/qg`)).status !== 200) await sleep(100);
    }
    const pools = nodes.map((b) => new Pool(b.url, { connections: CONNECTIONS, pipelining: 1 }));

    // wakes: arm all (round robin, 16 at a time) due at one instant after the arming
    const before = await wakesDone(nodes);
    const t0 = Date.now();
    let next = 0;
    // due after the arming (budget: 3 ms per wake, generous); measured from the later of the two
    const due = t0 + 2000 + WAKES * 3;
    const armer = async () => {
      for (;;) {
        const i = next++;
        if (i >= WAKES) return;
        const p = pools[i % pools.length]!;
        const r = await p.request({
          method: 'POST',
          path: '/wakes',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ harness: 'qg', id: `b${i}`, at: due, payload: `b${i}` }),
        });
        const text = await r.body.text();
        if (r.statusCode !== 201) throw new Error(`arm: ${r.statusCode} ${text}`);
      }
    };
    await Promise.all(Array.from({ length: 16 }, armer));
    const armedAt = Date.now();
    if (armedAt > due) progress(`warning: arming took ${armedAt - t0} ms, past the due instant`);
    let done = 0;
    let last = Date.now();
    for (;;) {
      await sleep(100);
      done = (await wakesDone(nodes)) - before;
      last = Date.now();
      if (done >= WAKES) break;
      if (last - due > 300_000) throw new Error(`only ${done}/${WAKES} wakes after 300 s`);
    }
    const wakesPerS = WAKES / ((last - Math.max(due, armedAt)) / 1000);
    progress(`${count} daemon(s): ${WAKES} wakes in ${last - Math.max(due, armedAt)} ms`);

    // tool calls: CONNECTIONS loops spread over the daemons
    let ok = 0;
    let bad = 0;
    let k = 0;
    const end = performance.now() + SECONDS * 1000;
    const tStart = performance.now();
    const loop = async (c: number) => {
      const p = pools[c % pools.length]!;
      while (performance.now() < end) {
        const body = `{"n":"${c}-${k++}"}`;
        const r = await p.request({ method: 'POST', path: '/harnesses/qg/tools/echo', body });
        const text = await r.body.text();
        if (r.statusCode === 200 && (JSON.parse(text) as { done?: string }).done === body) ok++;
        else bad++;
      }
    };
    await Promise.all(Array.from({ length: CONNECTIONS }, (_, c) => loop(c)));
    const callsPerS = ok / ((performance.now() - tStart) / 1000);
    progress(`${count} daemon(s): ${Math.round(callsPerS)} calls/s (${bad} bad replies)`);
    if (bad > 0) throw new Error(`${bad} wrong or failed tool replies`);
    await Promise.all(pools.map((p) => p.close()));
    return { wakes: wakesPerS, calls: callsPerS };
  } finally {
    await Promise.all(nodes.map((b) => stopBermd(b)));
    for (const r of roots) rmSync(r, { recursive: true, force: true });
  }
}

const figures: Record<string, Figure> = {};
function fig(name: string, value: number, unit: string, label: string, better: 'lower' | 'higher'): void {
  figures[name] = { value, unit, better, label };
}

let clusterDir: string | null = null;
let base = process.env.BERM_TEST_PG_URL ?? '';
if (base === '') {
  clusterDir = mkdtempSync(join(tmpdir(), 'berm-bench-pg-'));
  rmSync(clusterDir, { recursive: true });
  progress('starting a throwaway PostgreSQL cluster (scripts/pg-cluster.sh)');
  base = execFileSync(join(ROOT, 'scripts/pg-cluster.sh'), ['start', clusterDir], {
    encoding: 'utf8',
  }).trim();
}
try {
  progress(`SQLite, 1 daemon`);
  const sqlite = await measure(() => undefined, 1);
  const pgRuns: { wakes: number; calls: number }[] = [];
  for (const n of [1, 2, 3]) {
    progress(`PostgreSQL, ${n} daemon(s)`);
    const db = await freshDb(base);
    pgRuns.push(await measure(() => db, n));
  }
  const lbl = `${WAKES} wakes due at once, 1 worker per daemon`;
  fig('scale.sqlite.wakes_per_s', sqlite.wakes, 'wakes/s', `SQLite, 1 daemon: ${lbl}`, 'higher');
  fig(
    'scale.sqlite.calls_per_s',
    sqlite.calls,
    'calls/s',
    `SQLite, 1 daemon: echo, ${CONNECTIONS} connections`,
    'higher',
  );
  pgRuns.forEach((r, i) => {
    const n = i + 1;
    fig(`scale.pg${n}.wakes_per_s`, r.wakes, 'wakes/s', `PostgreSQL, ${n} daemon(s): ${lbl}`, 'higher');
    fig(
      `scale.pg${n}.calls_per_s`,
      r.calls,
      'calls/s',
      `PostgreSQL, ${n} daemon(s): echo, ${CONNECTIONS} connections`,
      'higher',
    );
    if (n > 1) {
      fig(
        `scale.pg${n}.wakes_vs_pg1`,
        r.wakes / pgRuns[0]!.wakes,
        'x',
        `wakes/s, ${n} daemons / 1 daemon`,
        'higher',
      );
      fig(
        `scale.pg${n}.calls_vs_pg1`,
        r.calls / pgRuns[0]!.calls,
        'x',
        `calls/s, ${n} daemons / 1 daemon`,
        'higher',
      );
    }
  });
  fig(
    'scale.pg1.wakes_vs_sqlite',
    pgRuns[0]!.wakes / sqlite.wakes,
    'x',
    'wakes/s, 1 daemon: PostgreSQL / SQLite',
    'higher',
  );
  fig(
    'scale.pg1.calls_vs_sqlite',
    pgRuns[0]!.calls / sqlite.calls,
    'x',
    'calls/s, 1 daemon: PostgreSQL / SQLite',
    'higher',
  );
} finally {
  if (clusterDir) execFileSync(join(ROOT, 'scripts/pg-cluster.sh'), ['stop', clusterDir]);
}

if (JSON_OUT) process.stdout.write(JSON.stringify({ figures }) + '\n');
else {
  for (const [k, f] of Object.entries(figures)) {
    console.log(
      `${k.padEnd(28)} ${f.value.toFixed(f.unit === 'x' ? 2 : 0).padStart(10)} ${f.unit.padEnd(8)} ${f.label}`,
    );
  }
}

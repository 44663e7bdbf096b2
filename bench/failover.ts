/**
 * make bench section failover: three bermd on one PostgreSQL.
 *
 * - kill-to-refire: a wake whose guest spins is armed; the daemon that claimed it is SIGKILLed;
 *   the time until another daemon holds the claim (attempt 2) is one sample
 *   (test/helpers/failover.ts; the claim table polled every 2 ms). ROUNDS samples (default 12;
 *   BENCH_QUICK=1: 5), the killed daemon restarted between rounds. Default lease (10 s): without
 *   the owners' session locks (src/store/pg-liveness.ts) a sample would be 10-20 s.
 * - wakes/s during a failover: WAKES wakes (default 600; quick: 300) due at one instant; one daemon
 *   SIGKILLed 200 ms after it; the figure is WAKES / (the last wake journaled − the due instant, or
 *   the end of the arming when that came later),
 *   counted in the shared journal (distinct wake ids), against the same run without a kill.
 *
 * PostgreSQL: BERM_TEST_PG_URL when set (a fresh database per measurement), else a throwaway
 * cluster started with scripts/pg-cluster.sh and stopped at the end. Every daemon has 2 workers
 * and a 2 s deadline (`--limit timeoutMs=2000`: the spinning wake ends then).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { http, startBermd, stopBermd, type Bermd, type BermdOptions } from '../test/helpers/cluster.js';
import { failoverRound } from '../test/helpers/failover.js';
import { percentile } from './lib/figures.js';

type Fig = (name: string, value: number, unit: string, label: string, better?: 'lower' | 'higher') => void;

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const QUICK = process.env.BENCH_QUICK === '1';
const ROUNDS = QUICK ? 5 : 12;
const WAKES = QUICK ? 300 : 600;
const QG = readFileSync(join(ROOT, 'test/data/queue-guest.elf'));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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

/** Three daemons on `url` with qg deployed on each. */
async function three(
  url: string,
  cache: string,
): Promise<{ nodes: Bermd[]; opts: (i: number) => BermdOptions }> {
  const roots = [0, 1, 2].map(() => mkdtempSync(join(tmpdir(), 'bermd-bench-failover-')));
  const opts = (i: number): BermdOptions => ({
    root: roots[i]!,
    store: url,
    cacheDir: cache,
    workers: 2,
    extra: ['--limit', 'timeoutMs=2000', '--limit', 'harnessRate=1000000', '--limit', 'harnessBurst=1000000'],
  });
  const nodes = [await startBermd(opts(0))];
  nodes.push(...(await Promise.all([1, 2].map((i) => startBermd(opts(i))))));
  const put = await http(`${nodes[0]!.url}/harnesses/qg`, 'PUT', new Uint8Array(QG));
  if (put.status !== 200) throw new Error(`deploy: ${put.status} ${JSON.stringify(put.body)}`);
  for (const b of nodes) while ((await http(`${b.url}/harnesses/qg`, 'GET')).status !== 200) await sleep(100);
  return { nodes, opts };
}

/** WAKES wakes due at one instant; with `kill`, one daemon SIGKILLed 200 ms after it. @returns wakes/s */
async function burst(base: string, cache: string, kill: boolean): Promise<number> {
  const url = await freshDb(base);
  const { nodes } = await three(url, cache);
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  try {
    // due after the arming (budget 15 ms a wake: arming is a database round trip and a rescan on
    // every daemon); measured from the later of the due instant and the end of the arming
    const due = Date.now() + 2000 + WAKES * 15;
    let next = 0;
    const armer = async () => {
      for (let i = next++; i < WAKES; i = next++) {
        const a = await http(`${nodes[i % 3]!.url}/wakes`, 'POST', {
          harness: 'qg',
          id: `b${i}`,
          at: due,
          payload: `b${i}`,
        });
        if (a.status !== 201) throw new Error(`arm b${i}: ${a.status} ${JSON.stringify(a.body)}`);
      }
    };
    await Promise.all(Array.from({ length: 8 }, armer));
    const from = Math.max(due, Date.now());
    await sleep(from - Date.now() + 200);
    if (kill) nodes[1]!.proc.kill('SIGKILL');
    for (const end = Date.now() + 300_000; ; await sleep(50)) {
      const r = await db.query<{ n: string }>(
        `SELECT count(DISTINCT rec->>'wake') AS n FROM berm_journal WHERE rec->>'trigger' = 'wake'`,
      );
      if (Number(r.rows[0]!.n) >= WAKES) return WAKES / ((Date.now() - from) / 1000);
      if (Date.now() > end) throw new Error(`only ${r.rows[0]!.n}/${WAKES} wakes journaled after 300 s`);
    }
  } finally {
    await db.end();
    await Promise.all(nodes.map((b) => stopBermd(b)));
  }
}

/** The failover section (see the file's comment). */
export async function benchFailover(fig: Fig, progress: (msg: string) => void): Promise<void> {
  const cache = join(tmpdir(), 'berm-bench-cache');
  mkdirSync(cache, { recursive: true });
  let base = process.env.BERM_TEST_PG_URL ?? '';
  let clusterDir = '';
  if (base === '') {
    clusterDir = mkdtempSync(join(tmpdir(), 'berm-bench-pg-'));
    rmSync(clusterDir, { recursive: true });
    progress('failover: starting a throwaway PostgreSQL cluster (scripts/pg-cluster.sh)');
    base = execFileSync(join(ROOT, 'scripts/pg-cluster.sh'), ['start', clusterDir], {
      encoding: 'utf8',
    }).trim();
  }
  try {
    progress(`failover: ${ROUNDS} SIGKILLs of the claiming daemon among 3`);
    const url = await freshDb(base);
    const { nodes, opts } = await three(url, cache);
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    const ms: number[] = [];
    try {
      for (let r = 0; r < ROUNDS; r++) {
        const got = await failoverRound(db, nodes, opts, `f${r}`);
        if (got.attempt !== 2) throw new Error(`f${r} claimed again as attempt ${got.attempt}, not 2`);
        ms.push(got.refireMs);
      }
    } finally {
      await db.end();
      await Promise.all(nodes.map((b) => stopBermd(b)));
    }
    const label = `SIGKILL of the daemon holding a wake's claim to another daemon's claim, 3 bermd on PostgreSQL, lease 10 s, n=${ROUNDS}`;
    fig('failover.refire_p50_ms', percentile(ms, 50), 'ms', `${label}, p50`, 'lower');
    fig('failover.refire_p99_ms', percentile(ms, 99), 'ms', `${label}, p99 (target <= 2000)`, 'lower');

    progress(`failover: ${WAKES} wakes due at once, without and with a SIGKILL`);
    const steady = await burst(base, cache, false);
    const during = await burst(base, cache, true);
    fig(
      'failover.wakes_per_s_steady',
      steady,
      '/s',
      `${WAKES} wakes due at once on 3 bermd (PostgreSQL)`,
      'higher',
    );
    fig(
      'failover.wakes_per_s_during',
      during,
      '/s',
      `the same with one daemon SIGKILLed 200 ms after the due instant`,
      'higher',
    );
    fig('failover.during_vs_steady', during / steady, 'x', 'wakes/s during a failover / without', 'higher');
  } finally {
    if (clusterDir) execFileSync(join(ROOT, 'scripts/pg-cluster.sh'), ['stop', clusterDir]);
  }
}

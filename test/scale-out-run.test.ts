// Three `berm worker --store postgres://...` processes share one due-set on the real test cluster
// (BERM_TEST_PG_URL). 10,000 wakes are armed into the shared due-set (one bulk statement, the
// notification wakes the processes); while they fire, a process is SIGKILLed and restarted again
// and again. From the shared journal: every wake ran; a wake that ran more than once did so only
// as counted retries (distinct attempts, the repeats > 1), the at-least-once contract of the queue.
// Lease 1 s, so a killed process's claims come back within a few seconds.
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as sql from '../src/store/pg-sql.js';
import { TEST_CACHE } from './helpers/fixtures.js';
import { freshDatabase, testPool } from './helpers/pg.js';

const REPO = join(import.meta.dirname, '..');
const WAKES = Number(process.env.BERM_SCALE_WAKES ?? 10_000);
const KILLS = Number(process.env.BERM_SCALE_KILLS ?? 6);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Proc {
  child: ChildProcess;
  exited: Promise<void>;
}

function startRun(config: string, state: string, url: string): Promise<Proc> {
  const child = spawn(
    process.execPath,
    [
      join(REPO, 'bin/berm.js'),
      '--cache-dir',
      TEST_CACHE,
      'worker',
      '--config',
      config,
      '--state',
      state,
      '--store',
      url,
      '--lease',
      '1000',
      '--workers',
      '1',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`berm worker did not get ready:\n${out}`));
    }, 90_000);
    const onData = (c: Buffer) => {
      out += c.toString();
      if (out.includes('berm worker: ready')) {
        clearTimeout(timer);
        resolve({ child, exited });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    void exited.then(() => {
      clearTimeout(timer);
      child.stdout!.off('data', onData);
      reject(new Error(`berm worker exited before it was ready:\n${out}`));
    });
  });
}

t.test('10,000 wakes, three berm worker processes, one SIGKILLed repeatedly', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const dir = mkdtempSync(join(tmpdir(), 'berm-scale-run-'));
  const config = join(dir, 'decl.toml');
  const elf = join(REPO, 'test/data/queue-guest.elf');
  const sha = createHash('sha256').update(readFileSync(elf)).digest('hex');
  writeFileSync(config, `[[harnesses]]\nname = "qg"\nsource = "${elf}"\nsha256 = "${sha}"\n`);
  const states = [0, 1, 2].map((i) => join(dir, `state${i}`));
  const procs: Proc[] = [await startRun(config, states[0]!, url)];
  procs.push(...(await Promise.all([1, 2].map((i) => startRun(config, states[i]!, url)))));
  t.teardown(async () => {
    for (const p of procs) p.child.kill('SIGKILL');
    await Promise.all(procs.map((p) => p.exited));
  });

  const pool = testPool(t, url, 2);
  const now = Date.now();
  const specs = Array.from({ length: WAKES }, (_, i) => ({
    id: `w${i}`,
    kind: 'wake' as const,
    harness: 'qg',
    entry: 'on_wake',
    when: now + 1000 + (i % 5000),
    payload: `w${i}`,
    armedBy: 'api',
    chain: null,
    depth: 0,
    armedAt: now,
  }));
  for (let i = 0; i < specs.length; i += 2500) await sql.arm(pool, specs.slice(i, i + 2500));

  let kills = 0;
  let done = false;
  const killer = (async () => {
    await sleep(1500);
    while (!done && kills < KILLS) {
      const v = kills % 3;
      procs[v]!.child.kill('SIGKILL');
      await procs[v]!.exited;
      kills++;
      procs[v] = await startRun(config, states[v]!, url);
      await sleep(1000);
    }
  })();
  const seen = async () => {
    const r = await pool.query<{ n: string }>(
      "SELECT count(DISTINCT rec->>'wake') AS n FROM berm_journal WHERE rec->>'trigger' = 'wake'",
    );
    return Number(r.rows[0]!.n);
  };
  // Wait while wakes keep being journaled: a fixed total measures the machine (at a load average
  // of 20-30 on 2 cores the three processes journaled 25-70 wakes/s, and a 150 s wait ended with
  // 2,252 of 10,000). A lost wake shows as a stall: none new for 60 s, with 1 s leases.
  const cap = Date.now() + 600_000;
  let last = -1;
  let lastNew = Date.now();
  for (;;) {
    const n = await seen();
    if (n >= WAKES || Date.now() > cap) break;
    if (n !== last) {
      last = n;
      lastNew = Date.now();
    } else if (Date.now() - lastNew > 60_000) break;
    await sleep(500);
  }
  done = true;
  await killer;
  t.ok(kills >= 3, `SIGKILLed ${kills} times`);

  const recs = (await sql.readJournal(pool)).filter((r) => r.trigger === 'wake');
  const byId = new Map<string, number[]>();
  for (const r of recs) {
    const id = r.wake as string;
    byId.set(id, [...(byId.get(id) ?? []), r.attempt as number]);
  }
  const missingIds = specs.filter((s) => !byId.has(s.id)).map((s) => s.id);
  if (missingIds.length > 0) {
    // where the missing ones are (pending or claimed, by whom, lease left): the diagnosis
    const where = await pool.query(
      `SELECT 'pending' AS state, id, seq, attempt, NULL AS owner, NULL AS lease_left FROM berm_wakes WHERE id = ANY($1)
         UNION ALL SELECT 'claimed', id, seq, attempt, owner, lease_until - berm_now_ms() FROM berm_claims WHERE id = ANY($1)`,
      [missingIds.slice(0, 20)],
    );
    t.comment(`live pids ${procs.map((p) => p.child.pid).join(' ')}; ${JSON.stringify(where.rows)}`);
  }
  t.equal(missingIds.length, 0, `every one of ${WAKES} wakes ran`);
  // Duplicates only as counted retries: the deliveries of one wake carry distinct attempt
  // numbers (each claim counts one more), so at most one of them is attempt 1 and every other
  // one is a retry with attempt > 1.
  let repeats = 0;
  const uncounted: string[] = [];
  for (const [id, attempts] of byId) {
    repeats += attempts.length - 1;
    if (new Set(attempts).size !== attempts.length || attempts.some((a) => !Number.isInteger(a) || a < 1))
      uncounted.push(`${id}: ${attempts.join(',')}`);
  }
  t.same(uncounted.slice(0, 10), [], 'no two deliveries of a wake share an attempt number');
  const retries = recs.filter((r) => (r.attempt as number) > 1).length;
  const firstAttempts = recs.filter((r) => r.attempt === 1).length;
  t.ok(firstAttempts <= WAKES, 'at most one first delivery per wake');
  t.ok(repeats <= retries, 'every repeated delivery is a counted retry (attempt > 1)');
  t.ok(new Set(recs.map((r) => r.daemon)).size >= 4, 'wakes ran in several processes (restarts included)');
  t.comment(`${recs.length} wake records, ${repeats} repeats, ${retries} with attempt > 1, ${kills} kills`);
  const pending = await pool.query<{ w: string; c: string }>(
    'SELECT (SELECT count(*) FROM berm_wakes) AS w, (SELECT count(*) FROM berm_claims) AS c',
  );
  t.comment(
    `left: ${pending.rows[0]!.w} pending, ${pending.rows[0]!.c} claims (of killed processes, until their lease expires)`,
  );
});

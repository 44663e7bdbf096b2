/**
 * The PostgreSQL due-set's claim statements alone (no daemon, no guest): N wakes all due, drained
 * by D concurrent connections ("daemons"), each claim followed by the finish of its claim, as a
 * daemon does. Two ways to claim:
 *   seq  pg-sql.ts claim(): one given seq at a time, every daemon walking the same seqs in order
 *        (what every daemon's due heap held before claims took what is due): the losers' claims
 *        come back empty, a wasted round trip each;
 *   due  pg-sql.ts claimDue(): whatever is due, one row per call (a daemon with one free worker),
 *        FOR UPDATE SKIP LOCKED, so the daemons take different rows; each connection starts its
 *        scan after the last row it claimed, as a daemon starts at its earliest heap entry.
 * Prints claims/s for D = 1 and 3 and the wasted claims; the two are interleaved twice.
 *
 *   BERM_TEST_PG_URL=postgres://... node --import ./scripts/ts/register.mjs bench/pg-claims.ts [--wakes N]
 *
 * Needs a running cluster (scripts/pg-cluster.sh start DIR prints the URL); each run gets its own
 * database, dropped afterwards.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import * as sql from '../src/store/pg-sql.js';

const base = process.env.BERM_TEST_PG_URL;
if (!base) {
  process.stderr.write('set BERM_TEST_PG_URL (scripts/pg-cluster.sh start DIR prints it)\n');
  process.exit(2);
}
const i = process.argv.indexOf('--wakes');
const N = i >= 0 ? Number(process.argv[i + 1]) : 3000;

async function admin(q: string): Promise<void> {
  const c = new pg.Client({ connectionString: base });
  await c.connect();
  try {
    await c.query(q);
  } finally {
    await c.end();
  }
}

async function run(mode: 'seq' | 'due', daemons: number): Promise<void> {
  const name = `berm_claims_${randomBytes(4).toString('hex')}`;
  await admin(`CREATE DATABASE ${name}`);
  const u = new URL(base!);
  u.pathname = `/${name}`;
  const pools = Array.from(
    { length: daemons + 1 },
    () => new pg.Pool({ connectionString: u.toString(), max: 1 }),
  );
  // an idle connection ended by the DROP DATABASE at the end is no error of the benchmark
  for (const p of pools) p.on('error', () => {});
  try {
    await sql.migrate(pools[0]!, 'bench', 'bench');
    const now = Date.now();
    const specs = Array.from({ length: N }, (_, k) => ({
      id: `w${k}`,
      kind: 'wake' as const,
      harness: 'h',
      entry: 'on_wake',
      when: now - 1000,
      payload: 'p',
      armedBy: 'api',
      chain: null,
      depth: 0,
      armedAt: now,
    }));
    const seqs = (await sql.arm(pools[0]!, specs)).records.map((r) => r.seq).sort((a, b) => a - b);
    let done = 0;
    let wasted = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: daemons }, async (_, d) => {
        const p = pools[d + 1]!;
        if (mode === 'due') {
          // from: where the daemon's due heap starts, just after the last row it claimed
          let from: [number, number] = [-Infinity, 0];
          for (;;) {
            const got = await sql.claimDue(p, Date.now(), `d${d}`, 10_000, ['h'], 1, from);
            if (got.length === 0) return;
            from = [got[got.length - 1]!.when, got[got.length - 1]!.seq];
            done += got.length;
            await sql.finish(
              p,
              got.map((w) => [w.id, w.seq]),
            );
          }
        }
        for (const s of seqs) {
          const w = await sql.claim(p, s, `d${d}`, 10_000, ['h']);
          if (!w) {
            wasted++;
            continue;
          }
          done++;
          await sql.finish(p, [[w.id, w.seq]]);
        }
      }),
    );
    const ms = performance.now() - t0;
    process.stdout.write(
      `${`pg.claims.${mode}.d${daemons}`.padEnd(22)} ${String(Math.round((done / ms) * 1000)).padStart(6)} claims/s  ` +
        `(${done} claimed in ${Math.round(ms)} ms, ${wasted} empty claims)\n`,
    );
  } finally {
    await Promise.all(pools.map((p) => p.end()));
    await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  }
}

for (let round = 0; round < 2; round++)
  for (const d of [1, 3])
    for (const m of round ? (['due', 'seq'] as const) : (['seq', 'due'] as const)) await run(m, d);

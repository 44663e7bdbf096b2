// Shared by the scale-out tests against real processes (scale-out.test.ts,
// scale-out-restart.test.ts): three bermd on one PostgreSQL, the shared journal, and the check of
// wake records against what was acknowledged.
import type { Test } from 'tap';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { TEST_CACHE } from './fixtures.js';
import { REPO, startBermd, stopBermd, type Bermd, type BermdOptions } from './cluster.js';
export { sleep, until } from './wait.js';

export const QG = new Uint8Array(readFileSync(join(REPO, 'test/data/queue-guest.elf')));
export const NOTES = new Uint8Array(readFileSync(join(REPO, 'test/data/notes.elf')));
export const ECHO = new Uint8Array(readFileSync(join(REPO, 'fixtures/build/echo-gcc-O2.elf')));
export const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');
export const LEASE_MS = 1000;

export function declarations(): string {
  const dir = mkdtempSync(join(tmpdir(), 'berm-scale-'));
  const file = join(dir, 'decl.toml');
  writeFileSync(
    file,
    `[[harnesses]]\nname = "notes"\nsource = "notes.elf"\nsha256 = "${sha(NOTES)}"\ncapabilities = ["storage"]\n`,
  );
  return file;
}

/**
 * Three (or n) daemons on one store, their roots fresh directories under `at.under` (default: the
 * system's temporary directory); stopped (SIGKILL) at teardown. The first starts alone (it creates
 * the schema) and then the others together, or with `at.together` all at once (the schema's
 * creation is serialised by its advisory lock: src/store/pg-schema.ts).
 */
export async function cluster(
  t: Test,
  url: string,
  n = 3,
  extra: Partial<BermdOptions> = {},
  at: { under?: string; together?: boolean } = {},
): Promise<{ nodes: Bermd[]; opts: (i: number) => BermdOptions }> {
  const config = declarations();
  const roots = Array.from({ length: n }, () => mkdtempSync(join(at.under ?? tmpdir(), 'bermd-scale-')));
  const opts = (i: number): BermdOptions => ({
    root: roots[i]!,
    store: url,
    cacheDir: TEST_CACHE,
    config,
    workers: 1,
    leaseMs: LEASE_MS,
    ...extra,
  });
  const nodes = at.together ? [] : [await startBermd(opts(0))];
  const first = nodes.length;
  nodes.push(
    ...(await Promise.all(Array.from({ length: n - first }, (_, i) => startBermd(opts(i + first))))),
  );
  t.teardown(async () => {
    await Promise.all(nodes.map((b) => stopBermd(b)));
  });
  return { nodes, opts };
}

export async function journal(url: string): Promise<Record<string, unknown>[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const r = await c.query<{ rec: Record<string, unknown>; daemon: string }>(
      'SELECT rec, daemon FROM berm_journal ORDER BY n',
    );
    return r.rows.map((x) => ({ ...x.rec, daemon: x.daemon }));
  } finally {
    await c.end();
  }
}

/** Check the journal's wake records against the acknowledged ids: at-least-once, counted retries. */
export function checkWakes(t: Test, recs: Record<string, unknown>[], acked: Set<string>): number {
  const byId = new Map<string, number[]>();
  for (const r of recs) {
    if (r.trigger !== 'wake') continue;
    const id = r.wake as string;
    if (!byId.has(id)) byId.set(id, []);
    byId.get(id)!.push(r.attempt as number);
  }
  let missing = 0;
  let badRetry = 0;
  let extra = 0;
  for (const id of acked) {
    const attempts = byId.get(id);
    if (!attempts) {
      missing++;
      continue;
    }
    if (attempts.length > 1) {
      extra += attempts.length - 1;
      const sorted = [...attempts].sort((a, b) => a - b);
      // every delivery counted: distinct attempts, and a repeat is never attempt 1
      if (new Set(sorted).size !== sorted.length || sorted[sorted.length - 1]! < sorted.length) badRetry++;
    }
  }
  t.equal(missing, 0, `every acknowledged wake fired (${acked.size})`);
  t.equal(badRetry, 0, 'a wake that ran twice did so only as counted retries (distinct attempts, > 1)');
  return extra;
}

// The PostgreSQL test cluster started by .ci/run (scripts/pg-cluster.sh; developers run it the
// same way) is handed to the tests as BERM_TEST_PG_URL. Each test file gets its own database,
// created here and dropped at teardown, so test files running in parallel never see each other's
// rows. Without the URL a test is skipped locally and fails in CI (CI=true): PostgreSQL tests must
// never be skipped silently there.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import type { Test } from 'tap';

/** The URL of the test cluster's database, or null when none is configured. */
export function pgTestUrl(): string | null {
  const u = process.env.BERM_TEST_PG_URL;
  return u === undefined || u === '' ? null : u;
}

const MISSING =
  'BERM_TEST_PG_URL is not set: start a cluster with `d=$(mktemp -d); export BERM_TEST_PG_URL=$(scripts/pg-cluster.sh start $d)`';

/**
 * A fresh database on the test cluster for test `t`, dropped at t's teardown.
 * @returns its URL, or null when there is no cluster (the test was skipped, or failed in CI)
 */
export async function freshDatabase(t: Test): Promise<string | null> {
  const base = pgTestUrl();
  if (base === null) {
    if (process.env.CI === 'true') t.fail(`${MISSING} (CI=true: PostgreSQL tests must run)`);
    else void t.skip(MISSING, () => {});
    return null;
  }
  const name = `berm_t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  t.teardown(async () => {
    const c = new pg.Client({ connectionString: base });
    await c.connect();
    try {
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    } finally {
      await c.end();
    }
  });
  const u = new URL(base);
  u.pathname = `/${name}`;
  return u.toString();
}

/** A throwaway PostgreSQL cluster of one test's own (scripts/pg-cluster.sh), which it may restart. */
export interface OwnCluster {
  /** the URL of its database berm_test */
  url: string;
  /** restart the server (fast shutdown: every connection cut), same port; resolves once it accepts */
  restart(): Promise<void>;
}

/**
 * Start a cluster for `t` alone (never restart the shared one: other test files use it), stopped
 * and deleted at t's teardown. Needs Debian's postgresql package (initdb).
 * @returns the cluster, or null when it cannot start (skipped locally, failed under CI=true)
 */
export async function ownCluster(t: Test): Promise<OwnCluster | null> {
  const script = join(import.meta.dirname, '..', '..', 'scripts', 'pg-cluster.sh');
  const dir = mkdtempSync(join(tmpdir(), 'berm-pg-own-'));
  const run = promisify(execFile);
  let url: string;
  try {
    url = (await run(script, ['start', dir])).stdout.trim();
  } catch (e) {
    const why = `scripts/pg-cluster.sh start failed: ${(e as { stderr?: string }).stderr ?? (e as Error).message}`;
    if (process.env.CI === 'true') t.fail(`${why} (CI=true: PostgreSQL tests must run)`);
    else void t.skip(why, () => {});
    return null;
  }
  t.teardown(() => run(script, ['stop', dir]).then(() => undefined));
  return {
    url,
    restart: async () => {
      await run(script, ['restart', dir]);
    },
  };
}

/**
 * A pool of one connection (`max`, default 1) to `url` for a test's own queries, ended at t's
 * teardown. The database is dropped WITH (FORCE) at teardown, maybe before this pool ends: an
 * idle client cut then is no failure, so the pool's 'error' events are ignored (queries still
 * reject on their own).
 */
export function testPool(t: Test, url: string, max = 1): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on('error', () => {});
  t.teardown(() => pool.end());
  return pool;
}

// Scale-out against real processes: three bermd sharing one PostgreSQL (the test cluster of
// .ci/run, BERM_TEST_PG_URL; each test its own database) on loopback.
//
// - 1,000 wakes armed through all three (round robin); one daemon SIGKILLed and restarted
//   repeatedly while they fire; from the shared journal: every acknowledged wake fired, and a wake
//   that ran more than once did so only as counted retries (distinct attempts, the extra ones > 1).
// - Deployments reach every daemon; a harness's berm.set on one daemon is read by its next
//   invocation on another.
// - A rolling restart (SIGTERM, restart, one by one) under load of invocations, wakes and deploys:
//   no acknowledged one is lost.
// - Bad input: an unreachable database at boot, a schema from a newer berm (both: clear refusal,
//   exit non-zero); the database going away mid-run (through a TCP proxy: invocations refused
//   cleanly, wakes not lost, reconnection).
//
// Counts: 1,000 wakes with 5 kills (the full 10,000 under kills: test/scale-out-run.test.ts); the
// rolling restart runs under load for about three restarts. Lease 1 s so that a killed daemon's
// wakes come back within seconds.
import t, { type Test } from 'tap';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { TEST_CACHE } from './helpers/fixtures.js';
import { freshDatabase } from './helpers/pg.js';
import {
  REPO,
  TcpProxy,
  http,
  startBermd,
  stopBermd,
  viaPort,
  type Bermd,
  type BermdOptions,
} from './helpers/cluster.js';

const QG = new Uint8Array(readFileSync(join(REPO, 'test/data/queue-guest.elf')));
const NOTES = new Uint8Array(readFileSync(join(REPO, 'test/data/notes.elf')));
const ECHO = new Uint8Array(readFileSync(join(REPO, 'fixtures/build/echo-gcc-O2.elf')));
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');
const LEASE_MS = 1000;
// 1,000 here (the full 10,000 under kills runs in test/scale-out-run.test.ts, three berm run
// processes): five bermd kill/restart cycles stay within the suite's time budget on 2 cores.
const WAKES = Number(process.env.BERM_SCALE_BERMD_WAKES ?? 1_000);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function declarations(): string {
  const dir = mkdtempSync(join(tmpdir(), 'berm-scale-'));
  const file = join(dir, 'decl.toml');
  writeFileSync(
    file,
    `[[harnesses]]\nname = "notes"\nsource = "notes.elf"\nsha256 = "${sha(NOTES)}"\ncapabilities = ["storage"]\n`,
  );
  return file;
}

/** Three (or n) daemons on one store; stopped (SIGKILL) at teardown. */
async function cluster(
  t: Test,
  url: string,
  n = 3,
  extra: Partial<BermdOptions> = {},
): Promise<{ nodes: Bermd[]; opts: (i: number) => BermdOptions }> {
  const config = declarations();
  const roots = Array.from({ length: n }, () => mkdtempSync(join(tmpdir(), 'bermd-scale-')));
  const opts = (i: number): BermdOptions => ({
    root: roots[i]!,
    store: url,
    cacheDir: TEST_CACHE,
    config,
    workers: 1,
    leaseMs: LEASE_MS,
    ...extra,
  });
  // one first (creates the schema), then the rest together
  const nodes = [await startBermd(opts(0))];
  nodes.push(...(await Promise.all(Array.from({ length: n - 1 }, (_, i) => startBermd(opts(i + 1))))));
  t.teardown(async () => {
    await Promise.all(nodes.map((b) => stopBermd(b)));
  });
  return { nodes, opts };
}

async function journal(url: string): Promise<Record<string, unknown>[]> {
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

async function until(what: string, cond: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await cond()) return;
    await sleep(250);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

/** Check the journal's wake records against the acknowledged ids: at-least-once, counted retries. */
function checkWakes(t: Test, recs: Record<string, unknown>[], acked: Set<string>): number {
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

t.test('wakes through three bermd, one SIGKILLed repeatedly: none lost, repeats counted', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const { nodes, opts } = await cluster(t, url);
  const put = await http(`${nodes[0]!.url}/harnesses/qg`, 'PUT', QG);
  t.equal(put.status, 200, 'deployed on daemon 0');
  await until(
    'the deployment on every daemon',
    async () =>
      (await Promise.all(nodes.map((b) => http(`${b.url}/harnesses/qg`, 'GET')))).every(
        (a) => a.status === 200,
      ),
    30_000,
  );
  t.pass('daemons 1 and 2 deployed it from the notification');

  const acked = new Set<string>();
  const firstDue = Date.now() + 3000;
  let next = 0;
  let kills = 0;
  let stop = false;
  // arming: 12 concurrent clients round robin; a refused connection (a killed daemon) is retried
  // on the next daemon with the same id (re-arming the same id replaces: never doubles)
  const armer = async (k: number) => {
    for (;;) {
      const i = next++;
      if (i >= WAKES) return;
      const id = `w${i}`;
      for (let attempt = 0; ; attempt++) {
        const b = nodes[(i + k + attempt) % nodes.length]!;
        const a = await http(`${b.url}/wakes`, 'POST', {
          harness: 'qg',
          id,
          delay_ms: Math.max(0, firstDue - Date.now()) + (i % 4000),
          payload: id,
        });
        if (a.status === 201) {
          acked.add(id);
          break;
        }
        if (a.status !== 0 && a.status < 500)
          throw new Error(`arm ${id}: ${a.status} ${JSON.stringify(a.body)}`);
        await sleep(100);
      }
    }
  };
  // one daemon SIGKILLed at intervals while wakes are armed and fire, restarted each time
  const killer = async () => {
    await sleep(2000);
    while (!stop && kills < 5) {
      const victim = 1 + (kills % 2);
      await stopBermd(nodes[victim]!);
      kills++;
      await sleep(300);
      nodes[victim] = await startBermd(opts(victim));
      await sleep(1500);
    }
  };
  const killing = killer();
  await Promise.all(Array.from({ length: 12 }, (_, k) => armer(k)));
  t.equal(acked.size, WAKES, 'every wake acknowledged (retried on another daemon when one was down)');
  await until(
    'every wake in the journal',
    async () => {
      const recs = await journal(url);
      const seen = new Set(recs.filter((r) => r.trigger === 'wake' && r.outcome === 'ok').map((r) => r.wake));
      return seen.size >= WAKES;
    },
    150_000,
  ).catch((e: unknown) => t.fail((e as Error).message));
  stop = true;
  await killing;
  t.ok(kills >= 1, `a daemon was SIGKILLed ${kills} times`);
  const recs = await journal(url);
  const extra = checkWakes(t, recs, acked);
  const daemons = new Set(recs.filter((r) => r.trigger === 'wake').map((r) => r.daemon));
  t.ok(daemons.size >= 3, `wakes ran on ${daemons.size} daemon processes`);
  t.comment(`${recs.length} journal records, ${extra} counted redeliveries, ${kills} kills`);
});

t.test('deployments and storage keys are shared; MCP-visible list follows', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const { nodes } = await cluster(t, url, 3);
  const [a, b, c] = nodes as [Bermd, Bermd, Bermd];
  t.equal((await http(`${a.url}/harnesses/notes`, 'PUT', NOTES)).status, 200);
  await until(
    'notes on daemon 1',
    async () => (await http(`${b.url}/harnesses/notes`, 'GET')).status === 200,
    30_000,
  );
  const info = await http(`${b.url}/harnesses/notes`, 'GET');
  t.same(info.body.granted, { capabilities: ['storage'] }, 'daemon 1 grants from its own declaration');
  t.equal(info.body.digest, sha(NOTES));
  const set = await http(`${a.url}/harnesses/notes/tools/note_put`, 'POST', { text: 'from daemon 0' });
  t.equal(set.status, 200, `note_put on daemon 0: ${JSON.stringify(set.body)}`);
  const got = await http(`${b.url}/harnesses/notes/tools/note_get`, 'POST', {});
  t.equal(got.status, 200, JSON.stringify(got.body));
  t.match(String(got.body.done), 'from daemon 0', 'daemon 1 reads what daemon 0 stored');
  // undeploy on daemon 2 reaches the others
  await until(
    'notes on daemon 2',
    async () => (await http(`${c.url}/harnesses/notes`, 'GET')).status === 200,
    30_000,
  );
  t.equal((await http(`${c.url}/harnesses/notes`, 'DELETE')).status, 204);
  await until(
    'the undeploy everywhere',
    async () =>
      (await Promise.all([a, b].map((x) => http(`${x.url}/harnesses/notes`, 'GET')))).every(
        (r) => r.status === 404,
      ),
    30_000,
  );
  t.pass('undeployed on every daemon');
});

t.test('rolling restart under load: no acknowledged invocation, wake or deploy is lost', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const { nodes, opts } = await cluster(t, url);
  t.equal((await http(`${nodes[0]!.url}/harnesses/qg`, 'PUT', QG)).status, 200);
  await until(
    'qg everywhere',
    async () =>
      (await Promise.all(nodes.map((b) => http(`${b.url}/harnesses/qg`, 'GET')))).every(
        (a) => a.status === 200,
      ),
    30_000,
  );
  const chains = new Set<string>();
  const wakes = new Set<string>();
  const deploys = new Set<string>();
  let stop = false;
  let n = 0;
  const pick = () => nodes[n++ % nodes.length]!;
  const load = async (k: number) => {
    let i = 0;
    while (!stop) {
      i++;
      const b = pick();
      const what = i % 10;
      if (what < 6) {
        const a = await http(`${b.url}/harnesses/qg/tools/echo`, 'POST', { k: `${k}-${i}` });
        if (a.status === 200 && a.chain !== undefined) chains.add(a.chain);
        else if (a.status === 200) chains.add(`?${k}-${i}`);
      } else if (what < 9) {
        const id = `r${k}-${i}`;
        const a = await http(`${b.url}/wakes`, 'POST', { harness: 'qg', id, delay_ms: 500, payload: id });
        if (a.status === 201) wakes.add(id);
      } else {
        const name = `d${k}-${i}`;
        const a = await http(`${b.url}/harnesses/${name}`, 'PUT', ECHO);
        if (a.status === 200) deploys.add(name);
      }
      if (b.proc.exitCode !== null) await sleep(50);
    }
  };
  const loaders = Array.from({ length: 6 }, (_, k) => load(k));
  await sleep(2000);
  for (let i = 0; i < nodes.length; i++) {
    await stopBermd(nodes[i]!, 'SIGTERM');
    const code = await nodes[i]!.exited;
    t.equal(code.code, 0, `daemon ${i} stopped gracefully`);
    nodes[i] = await startBermd(opts(i));
    await sleep(1500);
  }
  stop = true;
  await Promise.all(loaders);
  t.ok(chains.size > 50, `${chains.size} invocations acknowledged`);
  t.ok(wakes.size > 10, `${wakes.size} wakes acknowledged`);
  t.ok(deploys.size > 3, `${deploys.size} deploys acknowledged`);
  t.notOk(
    [...chains].some((c) => c.startsWith('?')),
    'every invocation answer names its chain',
  );
  await until(
    'every acknowledged wake fired',
    async () => {
      const recs = await journal(url);
      const seen = new Set(recs.filter((r) => r.trigger === 'wake').map((r) => r.wake as string));
      return [...wakes].every((w) => seen.has(w));
    },
    60_000,
  ).catch((e: unknown) => t.fail((e as Error).message));
  const recs = await journal(url);
  const journaled = new Set(recs.filter((r) => r.trigger === 'call').map((r) => r.chain as string));
  t.same(
    [...chains].filter((c) => !journaled.has(c)),
    [],
    'every acknowledged invocation is in the journal',
  );
  checkWakes(t, recs, wakes);
  // every acknowledged deploy is in the database at once; the other daemons apply it from the
  // notification (compiling it themselves), so each daemon's list converges
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  const stored = new Set(
    (await c.query<{ name: string }>('SELECT name FROM berm_deployments')).rows.map((r) => r.name),
  );
  await c.end();
  t.same(
    [...deploys].filter((d) => !stored.has(d)),
    [],
    'every acknowledged deploy is in the shared store',
  );
  const missingOn = async (b: Bermd): Promise<string[]> => {
    const ls = await http(`${b.url}/harnesses`, 'GET');
    const names = new Set(((ls.body.harnesses as { name: string }[] | undefined) ?? []).map((h) => h.name));
    return [...deploys].filter((d) => !names.has(d));
  };
  await until(
    'every acknowledged deploy on every daemon',
    async () => (await Promise.all(nodes.map(missingOn))).every((m) => m.length === 0),
    60_000,
  ).catch(() => {});
  for (const b of nodes) t.same(await missingOn(b), [], `every acknowledged deploy is on ${b.url}`);
});

t.test(
  'the database going away mid-run: invocations refused cleanly, wakes kept, reconnection',
  async (t) => {
    const url = await freshDatabase(t);
    if (url === null) return;
    const u = new URL(url);
    const proxy = new TcpProxy(u.hostname, Number(u.port));
    const port = await proxy.listen();
    t.teardown(() => proxy.cut());
    const root = mkdtempSync(join(tmpdir(), 'bermd-away-'));
    const b = await startBermd({
      root,
      store: viaPort(url, port),
      cacheDir: TEST_CACHE,
      workers: 1,
      leaseMs: LEASE_MS,
    });
    t.teardown(() => stopBermd(b));
    t.equal((await http(`${b.url}/harnesses/qg`, 'PUT', QG)).status, 200);
    const ids = Array.from({ length: 20 }, (_, i) => `away${i}`);
    for (const id of ids) {
      const a = await http(`${b.url}/wakes`, 'POST', { harness: 'qg', id, delay_ms: 1500, payload: id });
      t.equal(a.status, 201, `armed ${id}`);
    }
    await proxy.cut();
    // the daemon notices at its next call or lease renewal
    let refused: { status: number; body: Record<string, unknown> } = { status: 0, body: {} };
    await until(
      'an invocation refused',
      async () => {
        refused = await http(`${b.url}/harnesses/qg/tools/echo`, 'POST', { x: '1' });
        return refused.status === 429;
      },
      20_000,
    ).catch((e: unknown) => t.fail((e as Error).message));
    t.match(String(refused.body.error), /shared store is unreachable/);
    t.equal(refused.body.limit, 'store');
    t.equal((await http(`${b.url}/health`, 'GET')).status, 200, 'the daemon itself keeps serving');
    await sleep(2500); // the wakes fall due while the database is away
    await proxy.restore();
    await until(
      'invocations accepted again',
      async () => (await http(`${b.url}/harnesses/qg/tools/echo`, 'POST', { x: '2' })).status === 200,
      30_000,
    ).catch((e: unknown) => t.fail((e as Error).message));
    await until(
      'every wake armed before the outage fired',
      async () => {
        const seen = new Set((await journal(url)).filter((r) => r.trigger === 'wake').map((r) => r.wake));
        return ids.every((i) => seen.has(i));
      },
      30_000,
    ).catch((e: unknown) => t.fail((e as Error).message));
    checkWakes(t, await journal(url), new Set(ids));
  },
);

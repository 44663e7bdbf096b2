// Scale-out against real processes, continued (scale-out.test.ts has the SIGKILL and sharing
// tests): three bermd on one PostgreSQL (BERM_TEST_PG_URL, each test its own database).
//
// - A rolling restart (SIGTERM, restart, one by one, all three) under load of invocations, wakes
//   and deploys through every daemon: no acknowledged one is lost.
// - The database going away mid-run (through a TCP proxy that is cut and restored): invocations
//   refused cleanly (503 with retry_after), the daemon keeps serving, wakes armed before are not
//   lost, and it reconnects (invocations accepted again, the wakes fire).
import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { TEST_CACHE } from './helpers/fixtures.js';
import { freshDatabase } from './helpers/pg.js';
import { TcpProxy, http, startBermd, stopBermd, viaPort, type Bermd } from './helpers/cluster.js';
import { ECHO, LEASE_MS, QG, checkWakes, cluster, journal, sleep, until } from './helpers/scale-out.js';

/** How many harnesses the database at `url` has deployed. */
async function deployments(url: string): Promise<number> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<{ n: number }>('SELECT count(*)::int AS n FROM berm_deployments')).rows[0]!.n;
  } finally {
    await c.end();
  }
}

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
  // a failed check must not leave the loaders running (they would keep the file alive until tap's
  // timeout)
  t.teardown(() => {
    stop = true;
  });
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
    // A restarted daemon deploys every harness in its own store and then those in the database,
    // one at a time, before it listens, so its boot grows with the deploys acknowledged so far: at
    // a load average of 22-25 on 2 cores, 33 s with 6 of them, 60 s with 161 (~0.17 s each), and
    // how many there are by the last restart depends on the machine's speed. The bound is the
    // usual 90 s plus 1 s for each deployment in the database.
    nodes[i] = await startBermd(opts(i), 90_000 + 1_000 * (await deployments(url)));
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
    const names = new Set(((ls.body as unknown as { name: string }[] | undefined) ?? []).map((h) => h.name));
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
    // the daemon notices at its next call or lease renewal; a call that ran before it noticed is
    // refused because its journal record could not be written (nothing unwritten is acknowledged)
    let refused: { status: number; body: Record<string, unknown> } = { status: 0, body: {} };
    const before: { status: number; body: Record<string, unknown> }[] = [];
    await until(
      'an invocation refused as the store unreachable',
      async () => {
        refused = await http(`${b.url}/harnesses/qg/tools/echo`, 'POST', { x: '1' });
        if (refused.status === 503 && /shared store is unreachable/.test(String(refused.body.error)))
          return true;
        if (refused.status !== 200) before.push(refused);
        return false;
      },
      20_000,
    ).catch((e: unknown) => t.fail((e as Error).message));
    t.match(String(refused.body.error), /shared store is unreachable/);
    t.equal(refused.body.retry_after, 1, 'a 503 the client retries');
    for (const r of before) {
      t.equal(r.status, 503, 'a call refused before the outage was noticed is a 503');
      t.match(String(r.body.error), /journal record could not be written/);
      t.equal(r.body.retry_after, 1, 'a 503 the client retries');
    }
    t.equal((await http(`${b.url}/health`, 'GET')).status, 200, 'the daemon itself keeps serving');
    await sleep(2500); // the wakes fall due while the database is away
    await proxy.restore();
    await until(
      'invocations accepted again',
      async () => (await http(`${b.url}/harnesses/qg/tools/echo`, 'POST', { x: '2' })).status === 200,
      90_000,
    ).catch((e: unknown) => t.fail((e as Error).message));
    await until(
      'every wake armed before the outage fired',
      async () => {
        const seen = new Set((await journal(url)).filter((r) => r.trigger === 'wake').map((r) => r.wake));
        return ids.every((i) => seen.has(i));
      },
      90_000,
    ).catch((e: unknown) => t.fail((e as Error).message));
    checkWakes(t, await journal(url), new Set(ids));
  },
);

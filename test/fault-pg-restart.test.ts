// The PostgreSQL server restarted under load (pg_ctl restart -m fast: every connection cut, the
// server away for about a second) while two bermd on it serve tool calls and fire wakes. A cluster
// of this test's own (the shared one is never restarted). Clients see 503 with Retry-After while
// the database is away, never a 500 or a dropped connection; every call answered 200 is in the
// journal exactly once; every wake answered 201 fires, a repeat only as a counted retry (distinct
// attempts); the daemons reconnect by themselves: afterwards each serves calls and fires wakes.
import t from 'tap';
import { http, type Answer } from './helpers/cluster.js';
import { ownCluster } from './helpers/pg.js';
import { QG, checkWakes, cluster, journal, sleep, until } from './helpers/scale-out.js';

const LOAD_MS = 7000;
const RESTART_AT_MS = 2000;

t.test('PostgreSQL restarted under load: nothing acknowledged lost, daemons reconnect', async (t) => {
  const pg = await ownCluster(t);
  if (pg === null) return;
  const { nodes } = await cluster(t, pg.url, 2);
  t.equal((await http(`${nodes[0]!.url}/harnesses/qg`, 'PUT', QG)).status, 200, 'qg deployed');
  await until(
    'qg on both daemons',
    async () => (await http(`${nodes[1]!.url}/harnesses/qg`, 'GET')).status === 200,
    60_000,
  );

  const chains: string[] = [];
  const wakes = new Set<string>();
  const statuses = new Map<number, number>();
  const other: string[] = [];
  let noRetryAfter = 0;
  const count = (what: string, a: Answer, ok: number) => {
    statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
    if (a.status !== ok && a.status !== 503) other.push(`${what} ${a.status} ${JSON.stringify(a.body)}`);
  };
  const end = Date.now() + LOAD_MS;
  /** POST `body`; a network error is status 0 with its cause in the body */
  const post = async (url: string, body: unknown): Promise<Answer & { headers?: Headers }> => {
    try {
      const r = await fetch(url, {
        method: 'POST',
        body: JSON.stringify(body),
        headers: { 'content-type': 'application/json' },
        signal: AbortSignal.timeout(30_000),
      });
      const parsed = (await r.json().catch(() => ({}))) as Record<string, unknown>;
      return { status: r.status, body: parsed, headers: r.headers };
    } catch (e) {
      const c = (e as { cause?: { code?: string; message?: string } }).cause;
      return { status: 0, body: { error: (e as Error).message, cause: c?.code ?? c?.message } };
    }
  };
  const load = async (k: number) => {
    for (let i = 0; Date.now() < end; i++) {
      const b = nodes[(k + i) % 2]!;
      if (i % 3 < 2) {
        const a = await post(`${b.url}/harnesses/qg/tools/echo`, { k: `${k}-${i}` });
        count(`call ${k}-${i}`, a, 200);
        if (a.status === 200) chains.push(a.headers?.get('x-berm-chain') ?? '?');
        if (a.status === 503 && a.headers?.get('retry-after') === null) noRetryAfter++;
      } else {
        const id = `r${k}-${i}`;
        const a = await post(`${b.url}/wakes`, { harness: 'qg', id, delay_ms: 200, payload: id });
        count(`arm ${id}`, a, 201);
        if (a.status === 201) wakes.add(id);
        if (a.status === 503 && a.headers?.get('retry-after') === null) noRetryAfter++;
      }
    }
  };
  const loaders = Array.from({ length: 6 }, (_, k) => load(k));
  await sleep(RESTART_AT_MS);
  const r0 = performance.now();
  await pg.restart();
  t.comment(`the database restarted in ${Math.round(performance.now() - r0)} ms`);
  await Promise.all(loaders);

  t.same(other, [], 'no answer but 200/201 or 503 (no 500, no 400, no dropped connection)');
  t.ok((statuses.get(503) ?? 0) > 0, `some requests met the outage: ${JSON.stringify([...statuses])}`);
  t.equal(noRetryAfter, 0, 'every 503 carries Retry-After');
  t.ok(chains.length >= 10, `${chains.length} calls answered 200`);

  // both daemons reconnected by themselves: each serves a call and fires a wake it armed
  for (const [i, b] of nodes.entries()) {
    await until(
      `daemon ${i} serves calls again`,
      async () =>
        (await http(`${b.url}/harnesses/qg/tools/echo`, 'POST', { after: String(i) })).status === 200,
      30_000,
    ).catch((e: unknown) => t.fail((e as Error).message));
    const a = await http(`${b.url}/wakes`, 'POST', {
      harness: 'qg',
      id: `after${i}`,
      delay_ms: 0,
      payload: 'x',
    });
    t.equal(a.status, 201, `daemon ${i} arms a wake after the restart`);
    if (a.status === 201) wakes.add(`after${i}`);
    t.equal(b.proc.exitCode, null, `daemon ${i} was not restarted`);
  }
  await until(
    'every acknowledged wake fired',
    async () => {
      const seen = new Set((await journal(pg.url)).filter((r) => r.trigger === 'wake').map((r) => r.wake));
      return [...wakes].every((w) => seen.has(w));
    },
    60_000,
  ).catch((e: unknown) => t.fail((e as Error).message));
  const recs = await journal(pg.url);
  const times = new Map<string, number>();
  for (const r of recs)
    if (r.trigger === 'call') times.set(r.chain as string, (times.get(r.chain as string) ?? 0) + 1);
  t.same(
    chains.filter((c) => times.get(c) !== 1),
    [],
    `every one of the ${chains.length} calls answered 200 is in the journal exactly once`,
  );
  const repeats = checkWakes(t, recs, wakes);
  t.comment(`${wakes.size} wakes acknowledged, ${repeats} re-deliveries`);
});

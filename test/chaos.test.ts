// Chaos, bounded: three bermd on one PostgreSQL (a cluster of this test's own) under a load of
// tool calls and wakes from six clients, while daemons are SIGKILLed at random and started again,
// the database is restarted once, and the disk holding the daemons' roots (a small tmpfs the test
// mounts: their deployment images) is filled to the last byte for a few seconds and
// freed. Afterwards: no acknowledged call is missing from the journal (each exactly once), no
// acknowledged wake is lost, and a wake delivered more than once was so only as the documented
// at-least-once re-delivery, each delivery journaled with its own attempt number, and none given
// up on (the dead-letter set is empty: neither fault is one a wake's delivery meets); no answer
// but 200/201, 503 (with Retry-After) or a connection to a killed daemon lost; a deploy while the
// disk is full is refused 503 naming it, and once the space is back it is acknowledged and stored.
import t from 'tap';
import pgLib from 'pg';
import { http, startBermd, stopBermd, type Answer, type Bermd } from './helpers/cluster.js';
import { ownCluster } from './helpers/pg.js';
import { ECHO, QG, checkWakes, cluster, journal, sleep, until } from './helpers/scale-out.js';
import { smallDisk } from './helpers/tmpfs.js';

const LOAD_MS = 16_000;
const RESTART_DB_AT_MS = 6000;
/** the disk-full episode: from, and how long */
const DISK_FULL_AT_MS = 10_000;
const DISK_FULL_MS = 3000;

t.test('chaos: 3 bermd, random SIGKILLs, a database restart, a full disk', async (t) => {
  const t0 = Date.now();
  // where the time goes (seconds since the start), printed at the end
  const phases: string[] = [];
  const phase = (what: string) => phases.push(`${what} ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  const pg = await ownCluster(t);
  if (pg === null) return;
  // the roots take a few MiB (qg's and echo's images, the protocol door's database)
  const disk = smallDisk(t, 32 << 20);
  if (disk === null) return;
  const { nodes, opts } = await cluster(t, pg.url, 3, {}, { under: disk.dir, together: true });
  const put = await fetch(`${nodes[0]!.url}/harnesses/qg`, { method: 'PUT', body: QG });
  t.equal(put.status, 200, 'qg deployed');
  await until(
    'qg on every daemon',
    async () => {
      for (const b of nodes)
        if ((await fetch(`${b.url}/harnesses/qg`).catch(() => null))?.status !== 200) return false;
      return true;
    },
    60_000,
  );

  const chains: string[] = [];
  const wakes = new Set<string>();
  const statuses = new Map<number, number>();
  const other: string[] = [];
  let noRetryAfter = 0;
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
      return { status: 0, body: { error: (e as Error).message } };
    }
  };
  phase('cluster up, qg everywhere');
  const end = Date.now() + LOAD_MS;
  const load = async (k: number) => {
    for (let i = 0; Date.now() < end; i++) {
      const b = nodes[(k + i) % nodes.length]!;
      const ok = i % 3 < 2 ? 200 : 201;
      const a =
        ok === 200
          ? await post(`${b.url}/harnesses/qg/tools/echo`, { k: `${k}-${i}` })
          : await post(`${b.url}/wakes`, { harness: 'qg', id: `c${k}-${i}`, delay_ms: 300, payload: 'x' });
      statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
      if (a.status === 200) chains.push(a.headers?.get('x-berm-chain') ?? '?');
      else if (a.status === 201) wakes.add(`c${k}-${i}`);
      else if (a.status === 503) {
        if (a.headers?.get('retry-after') === null) noRetryAfter++;
      } else if (a.status !== 0) other.push(`${a.status} ${JSON.stringify(a.body)}`);
      // a refused connection (a daemon just killed) is retried on the next daemon
      if (a.status === 0) await sleep(50);
    }
  };
  const loaders = Array.from({ length: 6 }, (_, k) => load(k));
  // the chaos: SIGKILL a random daemon and start it again, over and over; the database restarted
  // once, in the middle of the load
  let kills = 0;
  const starting = new Map<number, Promise<void>>();
  // a daemon that cannot start (its root's disk full) is started again, as a supervisor would,
  // for as long as the disk can stay full (the episode lasts until a deploy is refused naming it,
  // 20 s at most) and then some: 60 tries, 500 ms apart
  const bootFailures: string[] = [];
  const restart = async (i: number): Promise<Bermd> => {
    for (let n = 0; ; n++) {
      try {
        return await startBermd(opts(i));
      } catch (e) {
        if (n === 59) throw e;
        bootFailures.push(
          ((e as Error).message.split('\n').find((l) => /error|cannot/i.test(l)) ?? '?').trim(),
        );
        await sleep(500);
      }
    }
  };
  const killer = async () => {
    // the last kill 5 s before the load ends: its start (seconds under load) overlaps the load
    while (Date.now() < end - 5000) {
      await sleep(1500 + Math.random() * 1500);
      // one daemon is always left up: a start takes seconds under load, and with all three down
      // together nothing would be served (nor refused) for lack of a daemon
      const up = [0, 1, 2].filter((i) => !starting.has(i));
      if (up.length < 2) continue;
      const i = up[Math.floor(Math.random() * up.length)];
      if (i === undefined) continue;
      await stopBermd(nodes[i]!);
      kills++;
      // started again in the background: the kills go on meanwhile
      starting.set(
        i,
        restart(i).then((b) => {
          nodes[i] = b;
          starting.delete(i);
        }),
      );
    }
    await Promise.all(starting.values());
  };
  let restartedAt = -1;
  const dbRestart = async () => {
    await sleep(RESTART_DB_AT_MS);
    await pg.restart();
    restartedAt = LOAD_MS - (end - Date.now());
  };
  // the disk full: deploys meanwhile of an image new to the daemons (echo: its file must be written
  // before its record goes to the database), to every daemon at once, until one is refused naming
  // the full disk; none may be acknowledged. Calls and wakes go to the database.
  const deployFull: string[] = [];
  let okDuringFull = 0;
  let fullMs = -1;
  let filled = 0;
  const deployEcho = (url: string) =>
    fetch(`${url}/harnesses/echo`, { method: 'PUT', body: ECHO, signal: AbortSignal.timeout(10_000) })
      .then(
        async (r) =>
          `${r.status} ${r.headers.get('retry-after') === null ? 'no Retry-After' : 'Retry-After'} ${await r.text()}`,
      )
      .catch(
        (e: unknown) => `0 ${String((e as { cause?: { code?: string } }).cause?.code ?? (e as Error).name)}`,
      );
  const namesDisk = (a: string) => /^503 Retry-After .*(no space|disk is full)/i.test(a);
  const diskFull = async () => {
    await sleep(DISK_FULL_AT_MS);
    filled = disk.fill();
    const from = Date.now();
    const okBefore = statuses.get(200) ?? 0;
    while (Date.now() < from + DISK_FULL_MS || (!deployFull.some(namesDisk) && Date.now() < from + 20_000)) {
      deployFull.push(...(await Promise.all(nodes.map((b) => deployEcho(b.url)))));
      await sleep(200);
    }
    okDuringFull = (statuses.get(200) ?? 0) - okBefore;
    disk.free();
    fullMs = Date.now() - from;
  };
  await Promise.all([...loaders, killer(), dbRestart(), diskFull()]);
  phase('load over, daemons started again');
  t.ok(kills >= 2, `${kills} daemons SIGKILLed and started again under the load`);
  t.ok(
    restartedAt > 0 && restartedAt < LOAD_MS,
    `the database was restarted under the load (back at ${restartedAt} ms)`,
  );
  t.ok(filled > 0 && fullMs > 0, `the disk was full for ${fullMs} ms (${filled} bytes of filler)`);
  t.ok(
    deployFull.some(namesDisk),
    'a deploy while the disk was full was refused 503 with Retry-After, naming the full disk',
  );
  t.same(
    deployFull.filter((a) => !a.startsWith('503 Retry-After') && !a.startsWith('0 ')),
    [],
    'no deploy acknowledged while the disk was full (503 with Retry-After, or a daemon killed)',
  );
  t.comment(`deploys while the disk was full: ${JSON.stringify(deployFull)}`.slice(0, 2000));
  t.comment(`${okDuringFull} calls answered 200 while the disk was full`);
  if (bootFailures.length > 0)
    t.comment(`starts that failed and were tried again: ${bootFailures.join('; ')}`);
  t.same(other, [], 'no answer but 200/201, 503 or a lost connection');
  t.equal(noRetryAfter, 0, 'every 503 carries Retry-After');
  t.comment(`answers: ${JSON.stringify([...statuses])}`);
  t.ok(chains.length >= 10 && wakes.size >= 5, `${chains.length} calls and ${wakes.size} wakes acknowledged`);
  await until(
    'every acknowledged wake fired',
    async () => {
      const seen = new Set((await journal(pg.url)).filter((r) => r.trigger === 'wake').map((r) => r.wake));
      return [...wakes].every((w) => seen.has(w));
    },
    60_000,
  ).catch((e: unknown) => t.fail((e as Error).message));
  phase('every wake fired');
  const recs = await journal(pg.url);
  const times = new Map<string, number>();
  for (const r of recs)
    if (r.trigger === 'call') times.set(r.chain as string, (times.get(r.chain as string) ?? 0) + 1);
  t.same(
    chains.filter((c) => times.get(c) !== 1),
    [],
    `0 of the ${chains.length} calls answered 200 missing from the journal (each exactly once)`,
  );
  const deliveries = new Map<string, string[]>();
  for (const r of recs)
    if (r.trigger === 'wake')
      deliveries.set(r.wake as string, [
        ...(deliveries.get(r.wake as string) ?? []),
        `attempt ${String(r.attempt)} ${String(r.outcome)} by ${String(r.daemon)} at ${String(r.start)}`,
      ]);
  for (const [id, d] of deliveries) if (d.length > 1) t.comment(`${id}: ${d.join('; ')}`);
  const repeats = checkWakes(t, recs, wakes);
  // once the space is back a deploy is acknowledged, and then it is the database's
  let deployed = 0;
  await until(
    'a deploy acknowledged once the space is back',
    async () => {
      for (const b of nodes) {
        deployed = (await http(`${b.url}/harnesses/echo`, 'PUT', ECHO)).status;
        if (deployed === 200) return true;
      }
      return false;
    },
    30_000,
  ).catch((e: unknown) => t.fail((e as Error).message));
  t.equal(deployed, 200, 'a deploy is acknowledged once the space is back');
  t.same(
    await deploymentNames(pg.url),
    ['echo', 'qg'],
    'the deployments in the database: qg, and echo once acknowledged',
  );
  // no wake was given up on: the dead-letter set is empty
  phase('deploy acknowledged');
  const dead = await fetch(`${nodes[0]!.url}/wakes/dead`).then((r) => r.json() as Promise<{ count: number }>);
  t.equal(dead.count, 0, 'the dead-letter set is empty');
  t.comment(`${repeats} re-deliveries, each journaled with its own attempt`);
  t.comment(`phases: ${phases.join(', ')}`);
});

/** The names deployed in the database at `url`. */
async function deploymentNames(url: string): Promise<string[]> {
  const c = new pgLib.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<{ name: string }>('SELECT name FROM berm_deployments ORDER BY name')).rows.map(
      (r) => r.name,
    );
  } finally {
    await c.end();
  }
}

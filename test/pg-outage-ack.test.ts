// Acknowledge only what is durable, on a shared PostgreSQL store (BERM_TEST_PG_URL, its own
// database): bermd under a load of tool calls while the database goes away (a TCP proxy in front
// of the real server, cut), then SIGKILLed before it comes back. Every call answered 200 must be
// in the journal; during the outage calls are answered 503 with Retry-After, never 200.
import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TEST_CACHE } from './helpers/fixtures.js';
import { freshDatabase } from './helpers/pg.js';
import { TcpProxy, http, startBermd, stopBermd, viaPort } from './helpers/cluster.js';
import { QG, journal, sleep } from './helpers/scale-out.js';

t.test('PostgreSQL away, then bermd SIGKILLed: every call answered 200 is journaled', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const u = new URL(url);
  const proxy = new TcpProxy(u.hostname, Number(u.port));
  const port = await proxy.listen();
  t.teardown(() => proxy.cut());
  const b = await startBermd({
    root: mkdtempSync(join(tmpdir(), 'bermd-ack-')),
    store: viaPort(url, port),
    cacheDir: TEST_CACHE,
    workers: 2,
    // a long lease: its renewal (every third of it) does not find the outage first, the calls do
    leaseMs: 60_000,
  });
  t.teardown(() => stopBermd(b));
  t.equal((await http(`${b.url}/harnesses/qg`, 'PUT', QG)).status, 200);

  const acked: string[] = [];
  const statuses = new Map<number, number>();
  const retryAfter = new Set<string | null>();
  let stop = false;
  t.teardown(() => {
    stop = true;
  });
  const load = async () => {
    while (!stop) {
      try {
        const r = await fetch(`${b.url}/harnesses/qg/tools/echo`, {
          method: 'POST',
          body: '{"x":"1"}',
          headers: { 'content-type': 'application/json' },
          signal: AbortSignal.timeout(30_000),
        });
        await r.text();
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        if (r.status === 200) acked.push(r.headers.get('x-berm-chain') ?? '?');
        if (r.status === 503) retryAfter.add(r.headers.get('retry-after'));
      } catch {
        statuses.set(0, (statuses.get(0) ?? 0) + 1); // the daemon was killed under this call
      }
    }
  };
  const loaders = Array.from({ length: 16 }, () => load());
  // the load runs steadily before the database goes away
  const end = Date.now() + 60_000;
  while (acked.length < 200 && Date.now() < end) await sleep(50);
  const before = acked.length;
  await proxy.cut();
  await sleep(2000);
  await stopBermd(b); // SIGKILL while the database is still away
  stop = true;
  await Promise.all(loaders);
  await proxy.restore();

  t.ok(before >= 200, `${before} calls answered 200 before the outage`);
  t.ok(
    (statuses.get(503) ?? 0) > 0,
    `calls during the outage answered 503 (${JSON.stringify([...statuses])})`,
  );
  t.same([...retryAfter], ['1'], 'each 503 carries Retry-After: 1');
  t.notOk(
    [...statuses.keys()].some((s) => s !== 200 && s !== 503 && s !== 0),
    'no other status (no 429, no 500)',
  );
  const journaled = new Set((await journal(url)).filter((r) => r.trigger === 'call').map((r) => r.chain));
  const missing = acked.filter((c) => !journaled.has(c));
  t.same(missing, [], `every one of the ${acked.length} calls answered 200 is in the journal`);
});

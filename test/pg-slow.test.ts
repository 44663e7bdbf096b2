// PostgreSQL answering slowly: two bermd reach the database through a TCP proxy on loopback that
// holds every chunk, both ways, for DELAY_MS before passing it on (so each round trip costs twice
// that), while clients call tools and arm wakes through both. Nothing acknowledged is lost: every
// call answered 200 is in the journal, every wake answered 201 fires, repeats only as counted
// retries; a refusal is a 503 with Retry-After or a 429, never a 500 or a dropped connection.
import { mkdtempSync } from 'node:fs';
import { createServer, connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import t from 'tap';
import { freshDatabase } from './helpers/pg.js';
import { http, startBermd, stopBermd, viaPort, type Bermd } from './helpers/cluster.js';
import { QG, checkWakes, journal, until } from './helpers/scale-out.js';
import { TEST_CACHE } from './helpers/fixtures.js';

const DELAY_MS = 40;
const LOAD_MS = 8000;

/** A proxy to `port` that delays every chunk by `delayMs`, order kept. @returns its port and a closer */
async function slowProxy(port: number, delayMs: number): Promise<{ port: number; close: () => void }> {
  const sockets = new Set<Socket>();
  const relay = (from: Socket, to: Socket) => {
    from.on('data', (chunk: Buffer) => {
      setTimeout(() => {
        if (!to.destroyed) to.write(chunk);
      }, delayMs);
    });
  };
  const server = createServer((client) => {
    const upstream = connect(port, '127.0.0.1');
    sockets.add(client).add(upstream);
    const drop = () => {
      // after the chunks in flight
      setTimeout(() => {
        client.destroy();
        upstream.destroy();
      }, delayMs + 1);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    relay(client, upstream);
    relay(upstream, client);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as { port: number }).port,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

t.test('PostgreSQL slow: nothing acknowledged is lost', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const proxy = await slowProxy(Number(new URL(url).port), DELAY_MS);
  t.teardown(proxy.close);
  const slow = viaPort(url, proxy.port);
  // the proxy really delays: a round trip through it takes at least twice DELAY_MS
  const probe = new pg.Client({ connectionString: slow });
  await probe.connect();
  const q0 = performance.now();
  await probe.query('SELECT 1');
  const rtt = performance.now() - q0;
  await probe.end();
  t.ok(rtt >= 2 * DELAY_MS, `a round trip through the proxy takes ${Math.round(rtt)} ms`);
  const opts = (i: number) => ({
    root: mkdtempSync(join(tmpdir(), `bermd-slow-${i}-`)),
    store: slow,
    cacheDir: TEST_CACHE,
    workers: 1,
  });
  const nodes: Bermd[] = [await startBermd(opts(0))];
  nodes.push(await startBermd(opts(1)));
  t.teardown(() => Promise.all(nodes.map((b) => stopBermd(b))));
  t.equal((await http(`${nodes[0]!.url}/harnesses/qg`, 'PUT', QG)).status, 200);
  await until(
    'qg on both daemons',
    async () => (await http(`${nodes[1]!.url}/harnesses/qg`, 'GET')).status === 200,
    60_000,
  );

  const chains = new Set<string>();
  const wakes = new Set<string>();
  const other: string[] = [];
  const end = Date.now() + LOAD_MS;
  const load = async (k: number) => {
    for (let i = 0; Date.now() < end; i++) {
      const b = nodes[(k + i) % 2]!;
      if (i % 3 < 2) {
        const a = await http(`${b.url}/harnesses/qg/tools/echo`, 'POST', { k: `${k}-${i}` });
        if (a.status === 200 && a.chain !== undefined) chains.add(a.chain);
        else if (a.status !== 503 && a.status !== 429)
          other.push(`call ${a.status} ${JSON.stringify(a.body)}`);
      } else {
        const id = `s${k}-${i}`;
        const a = await http(`${b.url}/wakes`, 'POST', { harness: 'qg', id, delay_ms: 300, payload: id });
        if (a.status === 201) wakes.add(id);
        else if (a.status !== 503 && a.status !== 429)
          other.push(`arm ${a.status} ${JSON.stringify(a.body)}`);
      }
    }
  };
  await Promise.all(Array.from({ length: 6 }, (_, k) => load(k)));
  t.same(other, [], 'no answer other than 200/201, 503 or 429');
  t.ok(chains.size >= 10, `${chains.size} calls acknowledged`);
  t.ok(wakes.size >= 5, `${wakes.size} wakes acknowledged`);
  await until(
    'every acknowledged wake fired',
    async () => {
      const seen = new Set((await journal(url)).filter((r) => r.trigger === 'wake').map((r) => r.wake));
      return [...wakes].every((w) => seen.has(w));
    },
    60_000,
  ).catch((e: unknown) => t.fail((e as Error).message));
  const recs = await journal(url);
  const journaled = new Set(recs.filter((r) => r.trigger === 'call').map((r) => r.chain as string));
  t.same(
    [...chains].filter((c) => !journaled.has(c)),
    [],
    'every acknowledged call is in the journal',
  );
  checkWakes(t, recs, wakes);
});

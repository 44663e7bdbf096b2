// A bermd on a shared PostgreSQL store whose boot could not restore a deployment record (the
// workers refused its instance at that moment) holds the record without serving it. Once its
// LISTEN connection is back after a drop, its catch-up treats that record as boot does: it deploys
// it again (the record is not in place here, though the digest this daemon read at boot is the
// record's); and a record another daemon removed meanwhile is dropped here, image file included,
// whether it was served or not (as it is when the removal's announcement reaches it). Two bermds
// in this process on a real database (BERM_TEST_PG_URL); daemon A's backend refuses the instances
// of the names the test chooses (as the workers do when no memory is left for one:
// DeployRefused), until the test lets them through.
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import t, { type Test } from 'tap';
import { Worker } from 'node:worker_threads';
import { once } from 'node:events';
import { OWNER_LOCK_CLASS } from '../src/store/pg-liveness.js';
import { shutdownBridge } from '../src/sync/bridge.js';
import { viaPort } from './helpers/cluster.js';
import { elf, testDaemon, type TestDaemon } from './helpers/daemon.js';
import { freshDatabase } from './helpers/pg.js';
import { until } from './helpers/wait.js';

t.teardown(() => shutdownBridge());

const ECHO = elf('fixtures/build/echo-gcc-O2.elf');
/** The echo ELF with a suffix past its last section: the same code, another digest. */
const variant = (tag: string): Buffer => Buffer.concat([ECHO, Buffer.from(`\0relisten-restore ${tag}\0`)]);
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

/** The backend pid of `owner`'s listener (the session holding its owner lock), or null. */
async function listenerPid(admin: pg.Client, owner: string): Promise<number | null> {
  const r = await admin.query<{ pid: number }>(
    `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2
       AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND classid = $1::oid AND objid = hashtext($2)::oid`,
    [OWNER_LOCK_CLASS, owner],
  );
  return r.rows[0]?.pid ?? null;
}

/**
 * A TCP proxy on 127.0.0.1 in front of the database, on a thread of its own: the store's calls
 * block this thread (Atomics.wait in src/sync/bridge.ts) while their connection goes through the
 * proxy, so it cannot run on this thread's event loop. `cut` closes every connection and refuses
 * new ones; `restore` accepts again on the same port.
 */
async function threadProxy(host: string, port: number) {
  const w = new Worker(
    `const { parentPort, workerData } = require('node:worker_threads');
     const net = require('node:net');
     const sockets = new Set();
     let server = null;
     let port = 0;
     const listen = () => {
       server = net.createServer((c) => {
         const u = net.connect(workerData.port, workerData.host);
         sockets.add(c).add(u);
         const drop = () => { c.destroy(); u.destroy(); sockets.delete(c); sockets.delete(u); };
         c.on('error', drop).on('close', drop);
         u.on('error', drop).on('close', drop);
         c.pipe(u);
         u.pipe(c);
       });
       server.listen(port, '127.0.0.1', () => {
         port = server.address().port;
         parentPort.postMessage(port);
       });
     };
     parentPort.on('message', (m) => {
       if (m === 'cut') {
         for (const x of sockets) x.destroy();
         sockets.clear();
         server.close(() => parentPort.postMessage('cut'));
       } else listen();
     });
     listen();`,
    { eval: true, workerData: { host, port } },
  );
  const answer = async () => (await once(w, 'message'))[0] as number | string;
  const listening = (await answer()) as number;
  return {
    port: listening,
    cut: async () => {
      w.postMessage('cut');
      await answer();
    },
    restore: async () => {
      w.postMessage('listen');
      await answer();
    },
    close: () => w.terminate(),
  };
}

/** Daemon B (deploying) on `url`, stopped and its root removed at teardown. */
async function daemonB(t: Test, url: string): Promise<TestDaemon> {
  const b = await testDaemon({ store: url });
  t.teardown(async () => {
    await b.stop();
    rmSync(b.root, { recursive: true, force: true });
  });
  return b;
}

/**
 * Daemon A in this process on `url`'s store, whose backend refuses to deploy the names in
 * `refused` (DeployRefused, as the workers when they cannot make an instance).
 */
async function refusingDaemon(t: Test, url: string, refused: Set<string>) {
  const d = await testDaemon(
    { store: url },
    {},
    mkdtempSync(join(tmpdir(), 'bermd-relisten-restore-')),
    (backend) => {
      const deploy = backend.deploy.bind(backend);
      backend.deploy = (name, bytes, grant) => {
        if (!refused.has(name)) return deploy(name, bytes, grant);
        const e = new Error(`no memory left for an instance of ${name} (refused by the test)`);
        e.name = 'DeployRefused';
        return Promise.reject(e);
      };
    },
  );
  const { root, logs } = d;
  t.teardown(async () => {
    await d.stop();
    rmSync(root, { recursive: true, force: true });
  });
  const owner = logs.map((l) => /owner ([^)]+)\)/.exec(l)?.[1]).find((o) => o !== undefined);
  if (owner === undefined) throw new Error(`no owner in the boot log:\n${logs.join('\n')}`);
  const served = async () =>
    ((await (await fetch(`${d.url}/harnesses`)).json()) as { name: string; digest: string }[]).map((h) => [
      h.name,
      h.digest,
    ]);
  /** the image file of `digest` under A's root (src/daemon/daemon.ts, image-files.ts) */
  const imageFile = (digest: string) => join(root, 'deployments', 'images', `${digest}.elf`);
  return { d, logs, owner, root, served, imageFile };
}

const notRestored = (logs: string[], name: string) =>
  logs.some((l) =>
    new RegExp(
      `harness ${name} \\(sha256 [0-9a-f]{64}\\) not restored: no memory left for an instance of ${name}`,
    ).test(l),
  );

t.test('a record that failed to restore at boot is deployed by the catch-up after a relisten', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  t.teardown(() => admin.end());
  const b = await daemonB(t, url);
  const flaky = variant('flaky');
  const steady = variant('steady');
  t.equal((await b.req('/harnesses/flaky', { method: 'PUT', body: flaky })).status, 200, 'B deploys flaky');
  t.equal(
    (await b.req('/harnesses/steady', { method: 'PUT', body: steady })).status,
    200,
    'B deploys steady',
  );

  const refused = new Set(['flaky']);
  const a = await refusingDaemon(t, url, refused);
  t.ok(notRestored(a.logs, 'flaky'), 'A reports flaky not restored at boot');
  t.same(await a.served(), [['steady', sha(steady)]], 'A serves steady only');

  // the workers would make the instance now; nothing changes in the store, only A's listener drops
  refused.clear();
  const pid = await listenerPid(admin, a.owner);
  t.not(pid, null, "A's listener holds its owner lock");
  await admin.query('SELECT pg_terminate_backend($1)', [pid]);
  await until("A's listener session to end", async () => (await listenerPid(admin, a.owner)) !== pid, 10_000);
  await until('A to listen again', async () => (await listenerPid(admin, a.owner)) !== null, 20_000);
  const want = [
    ['flaky', sha(flaky)],
    ['steady', sha(steady)],
  ];
  let caughtUp = true;
  await until(
    'A to serve flaky',
    async () => JSON.stringify(await a.served()) === JSON.stringify(want),
    15_000,
  ).catch(() => (caughtUp = false));
  t.same(await a.served(), want, 'A serves the record its boot could not restore, with its digest');
  t.ok(caughtUp, 'within 15 s of listening again');
  const r = await fetch(`${a.d.url}/harnesses/flaky/tools/echo`, { method: 'POST', body: '{"k":2}' });
  t.same(await r.json(), { done: '{"k":2}' }, 'flaky answers on A');
});

t.test('a record removed elsewhere is dropped here though it was never served here', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const b = await daemonB(t, url);
  const live = variant('removed while A listens');
  const missed = variant('removed while A does not listen');
  const steady = variant('steady');
  for (const [name, img] of [
    ['live', live],
    ['missed', missed],
    ['steady', steady],
  ] as const)
    t.equal(
      (await b.req(`/harnesses/${name}`, { method: 'PUT', body: img })).status,
      200,
      `B deploys ${name}`,
    );

  // A reaches the database through a proxy: cutting it drops A's LISTEN connection (and every
  // other), and A cannot listen again before it is restored
  const u = new URL(url);
  const proxy = await threadProxy(u.hostname, Number(u.port));
  t.teardown(() => proxy.close());
  const a = await refusingDaemon(t, viaPort(url, proxy.port), new Set(['live', 'missed']));
  t.ok(
    notRestored(a.logs, 'live') && notRestored(a.logs, 'missed'),
    'A reports live and missed not restored',
  );
  t.same(await a.served(), [['steady', sha(steady)]], 'A serves steady only');
  t.ok(existsSync(a.imageFile(sha(missed))), "A keeps missed's image file for its record");

  // removed while A listens: the announcement drops A's copy of the record and its image
  t.equal((await b.req('/harnesses/live', { method: 'DELETE' })).status, 204, 'B undeploys live');
  let gone = true;
  await until("A to delete live's image", async () => !existsSync(a.imageFile(sha(live))), 15_000).catch(
    () => (gone = false),
  );
  t.ok(gone, "A deletes live's image once the removal is announced");

  await proxy.cut();
  t.equal((await b.req('/harnesses/missed', { method: 'DELETE' })).status, 204, 'B undeploys missed');
  const marker = variant('marker');
  t.equal(
    (await b.req('/harnesses/marker', { method: 'PUT', body: marker })).status,
    200,
    'B deploys marker',
  );
  await proxy.restore();
  await until(
    'A to catch up (it serves marker)',
    async () => (await a.served()).some(([n]) => n === 'marker'),
    30_000,
  );
  gone = true;
  await until("A to delete missed's image", async () => !existsSync(a.imageFile(sha(missed))), 15_000).catch(
    () => (gone = false),
  );
  t.ok(gone, "the catch-up drops A's record of missed and deletes its image");
  const del = await fetch(`${a.d.url}/harnesses/missed`, { method: 'DELETE' });
  t.equal(del.status, 404, 'A holds no record of missed: undeploying it there is a 404');
  t.same(
    await a.served(),
    [
      ['marker', sha(marker)],
      ['steady', sha(steady)],
    ],
    'A serves what the store records',
  );
});

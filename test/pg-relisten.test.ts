// A bermd on a shared PostgreSQL store whose LISTEN connection drops catches up, once it listens
// again, with the deployment changes other daemons announced meanwhile (a NOTIFY sent while a
// session is not listening is never delivered to it). Two bermds in this process on a real
// database (BERM_TEST_PG_URL); daemon A's listener session is ended with pg_terminate_backend
// while daemon B deploys, redeploys and undeploys. The store's deployment reads of A are counted:
// the catch-up reads the image bytes of the changed records only. A runtime attached to the store
// (PgStore.attach) catches up the same way.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import t, { type Test } from 'tap';
import { BermRuntime } from '../src/runtime/index.js';
import { OWNER_LOCK_CLASS } from '../src/store/pg-liveness.js';
import { PgStore } from '../src/store/pg-store.js';
import { shutdownBridge } from '../src/sync/bridge.js';
import type { DeploymentStore } from '../src/store/store.js';
import { elf, testDaemon } from './helpers/daemon.js';
import { TEST_CACHE } from './helpers/fixtures.js';
import { freshDatabase } from './helpers/pg.js';

t.teardown(() => shutdownBridge());

const ECHO = elf('fixtures/build/echo-gcc-O2.elf');
/** The echo ELF with a suffix past its last section: the same code, another digest. */
const variant = (tag: string): Buffer => Buffer.concat([ECHO, Buffer.from(`\0relisten ${tag}\0`)]);
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

/** Wait until `cond` holds, polling every 50 ms, at most `ms`. @returns whether it held */
async function until(cond: () => Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  for (;;) {
    if (await cond()) return true;
    if (Date.now() >= end) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * The backend pid of `owner`'s listener: the session holding its owner lock
 * (src/store/pg-liveness.ts), taken on that session right after its LISTEN; null when none.
 */
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
 * True when `owner` has no listening session now: it holds no owner lock and no session is
 * between its LISTEN and that lock (the other listeners are past both). Checked after a change
 * was committed, with the listener ended before it, the change's notification never reached it.
 */
async function notListening(admin: pg.Client, owner: string): Promise<boolean> {
  const between = await admin.query(
    `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%'`,
  );
  return (await listenerPid(admin, owner)) === null && between.rowCount === 0;
}

/** A bermd in this process on `url`'s store, the image bytes its store reads hand back counted by name. */
async function countedDaemon(t: Test, url: string, bytesRead: Map<string, number>) {
  const d = await testDaemon(
    { store: url },
    {},
    mkdtempSync(join(tmpdir(), 'bermd-relisten-')),
    (backend) => {
      // the runtime store's deployments: the object bermd's deployments and its cluster sync read
      const store: DeploymentStore = backend.deploymentRecords();
      const count = (r: { name: string; elf: Uint8Array | null } | undefined): void => {
        if (r?.elf) bytesRead.set(r.name, (bytesRead.get(r.name) ?? 0) + r.elf.length);
      };
      const list = store.list.bind(store);
      const get = store.get.bind(store);
      Object.assign(store, {
        list: () => {
          const out = list();
          out.forEach(count);
          return out;
        },
        get: (name: string) => {
          const out = get(name);
          count(out);
          return out;
        },
      });
    },
  );
  const { logs } = d;
  t.teardown(async () => {
    await d.stop();
    rmSync(d.root, { recursive: true, force: true });
  });
  const owner = logs.map((l) => /owner ([^)]+)\)/.exec(l)?.[1]).find((o) => o !== undefined);
  if (owner === undefined) throw new Error(`no owner in the boot log:\n${logs.join('\n')}`);
  return { d, logs, owner };
}

t.test('deployment changes made while the listener was down are applied once it is back', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  t.teardown(() => admin.end());

  const b = await testDaemon({ store: url });
  t.teardown(async () => {
    await b.stop();
    rmSync(b.root, { recursive: true, force: true });
  });
  const put = async (name: string, img: Buffer) =>
    t.equal(
      (await b.req(`/harnesses/${name}`, { method: 'PUT', body: img })).status,
      200,
      `B deploys ${name}`,
    );
  const v1 = variant('h0 v1');
  const kept = variant('kept');
  const gone = variant('gone');
  await put('h0', v1);
  await put('kept', kept);
  await put('gone', gone);

  const bytesRead = new Map<string, number>();
  const a = await countedDaemon(t, url, bytesRead);
  const served = async () =>
    ((await (await fetch(`${a.d.url}/harnesses`)).json()) as { name: string; digest: string }[]).map((h) => [
      h.name,
      h.digest,
    ]);
  t.same(
    await served(),
    [
      ['gone', sha(gone)],
      ['h0', sha(v1)],
      ['kept', sha(kept)],
    ],
    'A restored what B deployed',
  );

  const listenerOf = () => listenerPid(admin, a.owner);
  t.not(await listenerOf(), null, "A's listener holds its owner lock");
  // B's changes land while A has no listening session: A's listener is ended first; a round in
  // which it came back before B was done is repeated with other images
  let missed = false;
  let round = 0;
  let h0 = v1;
  let added = v1;
  let before: string[][] = [];
  for (; round < 5 && !missed; round++) {
    bytesRead.clear();
    const pid = await listenerOf();
    if (pid !== null) await admin.query('SELECT pg_terminate_backend($1)', [pid]);
    t.ok(await until(async () => (await listenerOf()) === null, 10_000), "A's listener session is gone");
    h0 = variant(`h0 v2 round ${round}`);
    added = variant(`fresh round ${round}`);
    await put('h0', h0);
    await put('fresh', added);
    if (round === 0)
      t.equal((await b.req('/harnesses/gone', { method: 'DELETE' })).status, 204, 'B undeploys gone');
    // what A serves now, taken before the check below: then it can only be from before any catch-up
    before = await served();
    // A listened at no moment of B's changes when it holds no owner lock now (taken right after
    // LISTEN, on the same session) and no session is between its LISTEN and that lock (B's
    // listener is past both)
    missed = await notListening(admin, a.owner);
  }
  t.ok(missed, `A's listener was down during all of B's changes (${round} round(s))`);
  t.same(
    before.filter(
      ([n, digest]) => (n === 'h0' && digest === sha(h0)) || (n === 'fresh' && digest === sha(added)),
    ),
    [],
    'A serves neither image of the round yet: the notifications were not delivered to it',
  );

  const want = [
    ['fresh', sha(added)],
    ['h0', sha(h0)],
    ['kept', sha(kept)],
  ];
  t.ok(await until(async () => (await listenerOf()) !== null, 20_000), 'A listens again');
  const caughtUp = await until(async () => JSON.stringify(await served()) === JSON.stringify(want), 15_000);
  t.same(
    await served(),
    want,
    'A serves the new harness and the new image, and no longer the undeployed one',
  );
  t.ok(caughtUp, 'within 15 s of listening again');
  const r = await fetch(`${a.d.url}/harnesses/fresh/tools/echo`, { method: 'POST', body: '{"k":1}' });
  t.same(await r.json(), { done: '{"k":1}' }, 'the new harness answers on A');
  t.same(
    Object.fromEntries(bytesRead),
    { fresh: added.length, h0: h0.length },
    'the image bytes read are those of the changed records, once each',
  );
});

t.test('a runtime attached to the store catches up the same way', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  t.teardown(() => admin.end());
  const record = (name: string, img: Buffer) => ({
    name,
    sha256: sha(img),
    elf: img,
    capabilities: [],
    grant: {},
    deployedAt: Date.now(),
  });
  // B: another daemon's store, writing records (each announced)
  const b = await PgStore.open(url, { owner: 'relisten B' });
  t.teardown(() => b.close());
  const v1 = variant('h0 v1');
  const gone = variant('gone');
  const a = await PgStore.open(url, { owner: 'relisten A' });
  const rt = await BermRuntime.create({ store: a, poolSize: 1, cacheDir: TEST_CACHE });
  t.teardown(() => rt.close(2000));
  a.attach(rt);
  b.deployments.put(record('h0', v1));
  b.deployments.put(record('gone', gone));
  const digest = (name: string) => rt.harness(name)?.sha256;
  await until(async () => digest('h0') === sha(v1) && digest('gone') === sha(gone), 20_000);
  t.equal(digest('h0'), sha(v1), 'A follows the announced deploys');

  let missed = false;
  let round = 0;
  let h0 = v1;
  let added = v1;
  for (; round < 5 && !missed; round++) {
    const pid = await listenerPid(admin, 'relisten A');
    if (pid !== null) await admin.query('SELECT pg_terminate_backend($1)', [pid]);
    t.ok(
      await until(async () => (await listenerPid(admin, 'relisten A')) === null, 10_000),
      "A's listener session is gone",
    );
    h0 = variant(`h0 v2 round ${round}`);
    added = variant(`fresh round ${round}`);
    b.deployments.put(record('h0', h0));
    b.deployments.put(record('fresh', added));
    if (round === 0) t.equal(b.deployments.remove('gone'), true, 'B removes gone');
    missed = await notListening(admin, 'relisten A');
  }
  t.ok(missed, `A's listener was down during all of B's changes (${round} round(s))`);
  t.ok(await until(async () => (await listenerPid(admin, 'relisten A')) !== null, 20_000), 'A listens again');
  const now = () => [digest('fresh'), digest('h0'), digest('gone')];
  const want = [sha(added), sha(h0), undefined];
  const caughtUp = await until(async () => JSON.stringify(now()) === JSON.stringify(want), 15_000);
  t.same(now(), want, 'A deploys the new harness and the new image, and undeploys the removed one');
  t.ok(caughtUp, 'within 15 s of listening again');
});

// The runtime's store is bermd's one record of which name serves which image: a deploy, redeploy
// and undeploy are rows of its deployments table (the images stay content-addressed files), no
// index file is written, and a root of an earlier version, whose index was
// <root>/deployments/deployments.json, is moved into the store at boot (the file deleted).
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { SqliteStore } from '../src/store/sqlite-store.js';
import { openSqlite } from '../src/store/sqlite-driver.js';
import { elf, testDaemon } from './helpers/daemon.js';

const ECHO = elf('fixtures/build/echo-gcc-O2.elf');
/** The echo ELF with a suffix past its last section: the same code, another digest. */
const variant = (i: number): Buffer => Buffer.concat([ECHO, Buffer.from(`\0records ${i}\0`)]);
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

/** The deployment records in the root's store, as name -> [digest, deployed_at, bytes kept]. */
function records(root: string): Record<string, [string, number, boolean]> {
  const store = SqliteStore.open(root);
  try {
    return Object.fromEntries(
      store.deployments.list().map((r) => [r.name, [r.sha256, r.deployedAt, r.elf !== null]]),
    );
  } finally {
    store.close();
  }
}

const images = (root: string): string[] => readdirSync(join(root, 'deployments', 'images')).sort();

t.test('a root with deployments.json is moved into the store at boot', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'bermd-records-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const dir = join(root, 'deployments');
  mkdirSync(join(dir, 'images'), { recursive: true });
  const b = variant(1);
  const orphan = variant(2);
  for (const img of [ECHO, b, orphan]) writeFileSync(join(dir, 'images', `${sha(img)}.elf`), img);
  // the index as the earlier versions wrote it
  writeFileSync(
    join(dir, 'deployments.json'),
    JSON.stringify({
      version: 1,
      deployments: { a: { digest: sha(ECHO), deployed_at: 1111 }, b: { digest: sha(b), deployed_at: 2222 } },
    }),
  );

  const d = await testDaemon({}, {}, root);
  const listed = (await (await d.req('/harnesses')).json()) as {
    name: string;
    digest: string;
    deployed_at: number;
  }[];
  t.same(
    listed.map((h) => [h.name, h.digest, h.deployed_at]),
    [
      ['a', sha(ECHO), 1111],
      ['b', sha(b), 2222],
    ],
    'both deployments are served, with their digests and deploy times',
  );
  const r = await d.req('/harnesses/b/tools/echo', { method: 'POST', body: '{"k":2}' });
  t.same(await r.json(), { done: '{"k":2}' }, 'a moved deployment answers');
  t.notOk(existsSync(join(dir, 'deployments.json')), 'the index file is deleted');
  t.ok(
    d.logs.some((l) => /moved 2 deployments from deployments\/deployments\.json into the store/.test(l)),
    'the boot log says so',
  );
  t.same(images(root), [`${sha(ECHO)}.elf`, `${sha(b)}.elf`].sort(), 'the unreferenced image is deleted');
  await d.stop();
  t.same(
    records(root),
    { a: [sha(ECHO), 1111, false], b: [sha(b), 2222, false] },
    'the store holds both records (the images stay files)',
  );

  // the next boot reads them from the store alone
  const again = await testDaemon({}, {}, root);
  t.teardown(() => again.stop());
  const names = ((await (await again.req('/harnesses')).json()) as { name: string }[]).map((h) => h.name);
  t.same(names, ['a', 'b'], 'restored from the store');
  t.notOk(
    again.logs.some((l) => /moved \d+ deployments/.test(l)),
    'nothing to move the second time',
  );
});

t.test('deploys, redeploys and undeploys are rows of the store, and no index file is written', async (t) => {
  const d = await testDaemon();
  const root = d.root;
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const put = (name: string, body: Buffer): Promise<Response> =>
    d.req(`/harnesses/${name}`, { method: 'PUT', body });
  t.equal((await put('a', variant(10))).status, 200);
  t.equal((await put('b', variant(11))).status, 200);
  t.equal((await put('c', variant(12))).status, 200);
  t.equal((await put('a', variant(13))).status, 200, 'a redeploy');
  t.equal((await d.req('/harnesses/b', { method: 'DELETE' })).status, 204, 'an undeploy');
  const listed = (await (await d.req('/harnesses')).json()) as { name: string; deployed_at: number }[];
  const at = Object.fromEntries(listed.map((h) => [h.name, h.deployed_at]));
  t.notOk(existsSync(join(root, 'deployments', 'deployments.json')), 'no index file');
  t.same(
    images(root),
    [`${sha(variant(13))}.elf`, `${sha(variant(12))}.elf`].sort(),
    'the superseded and the undeployed images are deleted',
  );
  await d.stop();
  t.same(
    records(root),
    { a: [sha(variant(13)), at.a, false], c: [sha(variant(12)), at.c, false] },
    'the store holds what is served',
  );
});

t.test('a legacy index that is not its JSON refuses the boot, naming the file', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'bermd-records-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  mkdirSync(join(root, 'deployments'), { recursive: true });
  writeFileSync(join(root, 'deployments', 'deployments.json'), '{"version":1,"deployments":');
  await t.rejects(testDaemon({}, {}, root), {
    name: 'BootError',
    message: /deployments\.json is not valid JSON .*restore it or move it away/,
  });
  t.ok(existsSync(join(root, 'deployments', 'deployments.json')), 'the file is left as it is');
});

t.test('a state database of schema 3 keeps its deployments and takes records without bytes', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'bermd-records-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  // schema 3's deployments table: elf required
  const db = openSqlite(join(root, 'state.sqlite'));
  db.exec(`CREATE TABLE deployments (
    name TEXT PRIMARY KEY, sha256 TEXT NOT NULL, elf BLOB NOT NULL, capabilities TEXT NOT NULL,
    grant_json TEXT NOT NULL, deployed_at REAL NOT NULL)`);
  db.prepare('INSERT INTO deployments VALUES (?, ?, ?, ?, ?, ?)').run('old', sha(ECHO), ECHO, '[]', '{}', 5);
  db.pragma('user_version = 3');
  db.close();
  const store = SqliteStore.open(root);
  t.teardown(() => store.close());
  const old = store.deployments.get('old')!;
  t.same([old.sha256, Buffer.from(old.elf!).equals(ECHO), old.deployedAt], [sha(ECHO), true, 5], 'kept');
  store.deployments.put({
    name: 'new',
    sha256: sha(ECHO),
    elf: null,
    capabilities: [],
    grant: {},
    deployedAt: 6,
  });
  t.same(
    store.deployments.list().map((r) => [r.name, r.elf === null]),
    [
      ['new', true],
      ['old', false],
    ],
  );
});

// A bermd on a shared PostgreSQL store reads each deployment's bytes from the database once at
// boot: the store's deployments are counted through an instrumented store (every record and every
// image byte its reads hand back), on a real database (BERM_TEST_PG_URL) with an in-process bermd.
// Changes another daemon makes right after the boot's read are not missed.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { startDaemon, type BackendFactory } from '../src/daemon/daemon.js';
import { createRuntimeBackend } from '../src/daemon/runtime-backend.js';
import { resolveSettings } from '../src/daemon/settings.js';
import { PgStore } from '../src/store/pg-store.js';
import type { DeploymentStore } from '../src/store/store.js';
import { elf, testDaemon } from './helpers/daemon.js';
import { TEST_CACHE } from './helpers/fixtures.js';
import { freshDatabase } from './helpers/pg.js';

const ECHO = elf('fixtures/build/echo-gcc-O2.elf');
/** The echo ELF with a suffix past its last section: the same code, another digest. */
const variant = (i: number): Buffer => Buffer.concat([ECHO, Buffer.from(`\0boot reads ${i}\0`)]);
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

/** Start a bermd in this process on `url`'s store with a fresh root, its reads counted. */
async function bootCounted(t: Test, url: string, reads: Reads, afterList?: () => void) {
  const root = mkdtempSync(join(tmpdir(), 'bermd-boot-reads-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const settings = {
    ...resolveSettings({ addr: '127.0.0.1:0', root, workers: '1', cacheDir: TEST_CACHE, store: url }, {}),
    limit: [],
  };
  const logs: string[] = [];
  const d = await startDaemon(settings, counting(reads, afterList), {}, (l) => logs.push(l));
  t.teardown(() => d.stop());
  const served = (
    (await (await fetch(`${d.url}/harnesses`)).json()) as { name: string; digest: string }[]
  ).map((h) => [h.name, h.digest]);
  return { d, logs, served };
}

/** Deploy `images` as h0, h1, ... through another bermd on `url`, then stop it. */
async function deployElsewhere(t: Test, url: string, images: Buffer[]): Promise<void> {
  const first = await testDaemon({ store: url });
  t.teardown(() => rmSync(first.root, { recursive: true, force: true }));
  for (const [i, img] of images.entries())
    t.equal((await first.req(`/harnesses/h${i}`, { method: 'PUT', body: img })).status, 200);
  await first.stop();
}

/** What the daemon read of the store's deployments. */
interface Reads {
  /** records handed back (by list and get), by name */
  records: Record<string, number>;
  /** image bytes handed back */
  bytes: number;
}

/**
 * createRuntimeBackend, with the store's deployment reads counted into `reads`; `afterList` runs
 * once, right after the first listing returned.
 */
function counting(reads: Reads, afterList: () => void = () => {}): BackendFactory {
  let listed = false;
  return async (ctx) => {
    const backend = await createRuntimeBackend(ctx);
    // the runtime store's deployments: the object bermd's deployments and its cluster sync read
    const store: DeploymentStore = backend.deploymentRecords();
    const count = (recs: { name: string; elf?: Uint8Array | null }[]): void => {
      for (const r of recs) {
        reads.records[r.name] = (reads.records[r.name] ?? 0) + 1;
        reads.bytes += r.elf?.length ?? 0;
      }
    };
    const list = store.list.bind(store);
    const get = store.get.bind(store);
    Object.assign(store, {
      list: () => {
        const out = list();
        count(out);
        if (!listed) {
          listed = true;
          afterList();
        }
        return out;
      },
      get: (name: string) => {
        const out = get(name);
        if (out !== undefined) count([out]);
        return out;
      },
    });
    return backend;
  };
}

t.test('a cluster daemon reads each deployment once at boot', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const images = [variant(1), variant(2), variant(3)];
  await deployElsewhere(t, url, images);
  const reads: Reads = { records: {}, bytes: 0 };
  const { served } = await bootCounted(t, url, reads);
  t.same(
    served,
    images.map((img, i) => [`h${i}`, sha(img)]),
    'every deployment is served',
  );
  t.same(reads.records, { h0: 1, h1: 1, h2: 1 }, 'each record was read once');
  t.equal(
    reads.bytes,
    images.reduce((n, img) => n + img.length, 0),
    "each image's bytes were read once",
  );
});

t.test('changes made while the daemon restores are applied once it is done', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const images = [variant(1), variant(2)];
  await deployElsewhere(t, url, images);
  // another daemon, writing as soon as the booting daemon has read the records
  const other = await PgStore.open(url);
  t.teardown(() => other.close());
  const added = variant(9);
  const reads: Reads = { records: {}, bytes: 0 };
  const { served } = await bootCounted(t, url, reads, () => {
    other.deployments.put({
      name: 'late',
      sha256: sha(added),
      elf: added,
      capabilities: [],
      grant: {},
      deployedAt: Date.now(),
    });
    t.equal(other.deployments.remove('h0'), true);
  });
  t.same(
    served,
    [
      ['h1', sha(images[1]!)],
      ['late', sha(added)],
    ],
    'the deploy made meanwhile is served, the undeploy made meanwhile is not',
  );
  t.same(reads.records, { h0: 1, h1: 1, late: 1 }, 'the new record was read once, when announced');
});

// Distinct deployments past the image cap on a real bermd with 16 workers (bin/bermd.js on
// 127.0.0.1, port 0), 8 PUTs in flight: every deploy either works (acknowledged, answers its calls,
// recorded in the store) or is refused 507 naming max-images (never acknowledged, unknown, not
// recorded), and the work is bounded in time. The same check at 1,000 deployments on 16 workers
// takes minutes on a loaded 2-core machine: bench/deploys.ts (`make bench`) runs it.
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { SqliteStore } from '../src/store/sqlite-store.js';
import { startBermd, stopBermd } from './helpers/cluster.js';
import { elf } from './helpers/daemon.js';
import { TEST_CACHE } from './helpers/fixtures.js';
import { call } from './helpers/bermd-load.js';

const ECHO = elf('fixtures/build/echo-gcc-O2.elf');
/** The echo ELF with a suffix past its last section: the same code, another digest. */
const variant = (i: number): Buffer => Buffer.concat([ECHO, Buffer.from(`\0cap ${i}\0`)]);
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');
/**
 * PUT `body` as `name`, bounded at 240 s: the first deploys on a fresh 16-worker bermd wait for
 * every worker to start (each loads the runtime's modules), minutes on a loaded 2-core machine.
 */
const put = (url: string, name: string, body: Uint8Array): Promise<Response> =>
  fetch(`${url}/harnesses/${name}`, { method: 'PUT', body, signal: AbortSignal.timeout(240_000) });
const tmp = mkdtempSync(join(tmpdir(), 'berm-hostile-deploys-cap-'));
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));

t.test('deploys past --max-images on 16 workers: each works or is refused 507', async (t) => {
  const N = 24;
  const CAP = 16;
  const root = join(tmp, 'root');
  const b = await startBermd(
    { root, cacheDir: TEST_CACHE, workers: 16, extra: ['--max-images', String(CAP)] },
    120_000,
  );
  t.teardown(() => stopBermd(b));
  const answers: { status: number; body: { digest?: string; error?: string; limit?: string } }[] = [];
  let next = 0;
  const started = Date.now();
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < N) {
        const i = next++;
        try {
          const r = await put(b.url, `d${i}`, variant(i));
          answers[i] = { status: r.status, body: (await r.json()) as (typeof answers)[number]['body'] };
        } catch (e) {
          answers[i] = { status: 0, body: { error: (e as Error).message } };
        }
      }
    }),
  );
  const deployMs = Date.now() - started;
  const acked = answers.flatMap((a, i) => (a.status === 200 ? [i] : []));
  const refused = answers.flatMap((a, i) => (a.status !== 200 ? [i] : []));
  t.equal(acked.length, CAP, `${CAP} acknowledged: the cap holds exactly that many images`);
  for (const i of acked) t.equal(answers[i]!.body.digest, sha(variant(i)), `d${i}: its digest`);
  for (const i of refused) {
    t.equal(answers[i]!.status, 507, `d${i}: refused 507`);
    t.equal(answers[i]!.body.limit, 'max-images');
    t.match(
      answers[i]!.body.error,
      /^refused by limit max-images = 16: the deployment store holds 16 images/,
    );
  }
  // every acknowledged one answers (the last one among them), a refused one is unknown
  for (const i of acked) {
    const r = await call(b, `d${i}`, 'echo', { i });
    t.same(await r.json(), { done: JSON.stringify({ i }) }, `d${i} answers`);
  }
  for (const i of refused) t.equal((await call(b, `d${i}`, 'echo', {})).status, 404, `d${i} is unknown`);
  t.equal(readdirSync(join(root, 'deployments', 'images')).length, CAP, 'one image file per acknowledged');
  t.comment(`${N} deploys (${acked.length} acknowledged) in ${(deployMs / 1000).toFixed(1)} s`);
  t.ok(deployMs < 480_000, 'bounded in time');
  // after a SIGKILL the store records exactly the acknowledged ones
  await stopBermd(b);
  const store = SqliteStore.open(root);
  t.teardown(() => store.close());
  t.same(
    store.deployments
      .list()
      .map((r) => [r.name, r.sha256])
      .sort(),
    acked.map((i) => [`d${i}`, sha(variant(i))]).sort(),
    'recorded: the acknowledged ones, with their digests',
  );
});

// Disk under hostile use, against bermd over real sockets on loopback, bounded in time: redeploying
// a name 100 times leaves one image on disk (superseded images are deleted once the index no longer
// names them, and calls in flight finish on the image they started with), an undeploy leaves none,
// and images no deployment uses (left by a crash or an older version) are removed at start-up.
import * as fs from 'node:fs';
import * as path from 'node:path';
import t from 'tap';
import { elf, testDaemon } from './helpers/daemon.js';

const ECHO = elf('fixtures/build/echo-gcc-O2.elf');
const HOSTILE = elf('test/data/hostile.elf');

/** A variant of the echo ELF with other bytes (a suffix past the last section): another digest. */
const variant = (i: number): Buffer => Buffer.concat([ECHO, Buffer.from(`\0variant ${i}\0`)]);
const images = (root: string): string[] => fs.readdirSync(path.join(root, 'deployments', 'images')).sort();

t.test('100 redeploys of one name leave one image on disk', async (t) => {
  const d = await testDaemon();
  t.teardown(() => d.stop());
  // four variants, redeployed in turn: each redeploy supersedes the last one's image
  const digests: string[] = [];
  for (let i = 0; i < 100; i++) {
    const put = await d.req('/harnesses/e', { method: 'PUT', body: variant(i % 4) });
    t.equal(put.status, 200);
    if (put.status !== 200) break;
    digests.push(((await put.json()) as { digest: string }).digest);
    if (i % 25 === 24) t.same(images(d.root), [`${digests[i]}.elf`], `after ${i + 1} redeploys: one image`);
  }
  t.equal(new Set(digests).size, 4, 'four distinct images were deployed');
  const call = await d.req('/harnesses/e/tools/echo', { method: 'POST', body: '{"k":1}' });
  t.same(await call.json(), { done: '{"k":1}' }, 'the last one serves');

  // a call in flight on a superseded image finishes: the runtime runs it from memory
  t.equal((await d.req('/harnesses/h', { method: 'PUT', body: HOSTILE })).status, 200);
  const slow = d.req('/harnesses/h/tools/flood', { method: 'POST', body: '{"n":200000}' });
  await new Promise((r) => setTimeout(r, 50));
  const other = Buffer.concat([HOSTILE, Buffer.from('\0other\0')]);
  t.equal((await d.req('/harnesses/h', { method: 'PUT', body: other })).status, 200);
  const done = await slow;
  t.equal(done.status, 200, 'the call that started on the old image finished');
  t.same(await done.json(), { done: 'done' });
  t.equal(images(d.root).length, 2, 'one image per deployed name');

  t.equal((await d.req('/harnesses/h', { method: 'DELETE' })).status, 204);
  t.equal((await d.req('/harnesses/e', { method: 'DELETE' })).status, 204);
  t.same(images(d.root), [], 'undeployed: no image left');
});

t.test('images no deployment uses are removed at start-up', async (t) => {
  const d = await testDaemon();
  const put = await d.req('/harnesses/e', { method: 'PUT', body: ECHO });
  const kept = ((await put.json()) as { digest: string }).digest;
  await d.stop();
  // what a crash between the index write and the deletion leaves, or an older bermd
  const dir = path.join(d.root, 'deployments', 'images');
  const orphan = 'ab'.repeat(32);
  fs.writeFileSync(path.join(dir, `${orphan}.elf`), variant(9));
  fs.writeFileSync(path.join(dir, 'README'), 'not an image: left alone');
  const again = await testDaemon({}, {}, d.root);
  t.teardown(() => again.stop());
  t.same(
    images(d.root),
    ['README', `${kept}.elf`].sort(),
    'the orphan is gone, the used image and other files stay',
  );
  t.ok(
    again.logs.some((l) => /removed 1 stored images no deployment uses/.test(l)),
    'the boot log says so',
  );
  const call = await again.req('/harnesses/e/tools/echo', { method: 'POST', body: '{}' });
  t.equal(call.status, 200, 'the deployment still serves');
});

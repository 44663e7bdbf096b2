// Caps on what the API can make bermd keep, over real sockets on loopback: wakes one harness has
// pending from the API (harnessApiWakes: 429 naming it), a wake's payload (maxPayloadBytes: 413
// naming it) and the images the deployment store holds (--max-images: 507 naming it). Each
// refusal stores nothing; the limits are per harness, so another harness is not affected.
import * as fs from 'node:fs';
import * as path from 'node:path';
import t from 'tap';
import { elf, testDaemon, type TestDaemon } from './helpers/daemon.js';

const QG = elf('test/data/queue-guest.elf');
const ECHO = elf('fixtures/build/echo-gcc-O2.elf');
/** A variant of the echo ELF with other bytes (a suffix past the last section): another digest. */
const variant = (i: number): Buffer => Buffer.concat([ECHO, Buffer.from(`\0variant ${i}\0`)]);

const arm = (d: TestDaemon, body: Record<string, unknown>): Promise<Response> =>
  d.req('/wakes', { method: 'POST', body: JSON.stringify({ delay_ms: 3_600_000, ...body }) });

t.test('wakes armed through the API: per-harness cap and payload limit', async (t) => {
  const d = await testDaemon({ limit: ['harnessApiWakes=5'] });
  t.teardown(() => d.stop());
  t.match(d.logs.join('\n'), /harnessApiWakes +5 +\(flag --limit\)/, 'the boot log names it');
  for (const name of ['qg', 'other'])
    t.equal((await d.req(`/harnesses/${name}`, { method: 'PUT', body: QG })).status, 200);

  // the payload limit (64 KiB, UTF-8 bytes): the largest is taken, one byte more is 413
  const big = await arm(d, { harness: 'qg', id: 'big', payload: 'é'.repeat(32 * 1024) });
  t.equal(big.status, 201, '64 KiB of payload');
  const over = await arm(d, { harness: 'qg', id: 'over', payload: 'é'.repeat(32 * 1024) + 'x' });
  t.equal(over.status, 413, '64 KiB + 1 byte');
  const overBody = (await over.json()) as { error: string; limit: string };
  t.equal(overBody.limit, 'maxPayloadBytes');
  t.match(overBody.error, /refused by limit maxPayloadBytes = 65536: the payload is 65537 bytes/);

  for (let i = 1; i < 5; i++) t.equal((await arm(d, { harness: 'qg', id: `w${i}` })).status, 201);
  const sixth = await arm(d, { harness: 'qg', id: 'w5' });
  t.equal(sixth.status, 429, 'the sixth pending wake of qg is refused');
  const body = (await sixth.json()) as { error: string; limit: string };
  t.equal(body.limit, 'harnessApiWakes');
  t.match(body.error, /refused by limit harnessApiWakes = 5: harness qg has 5 wakes pending/);
  t.equal((await arm(d, { harness: 'qg', id: 'w1', payload: 'again' })).status, 201, 'a re-arm replaces');
  t.equal((await arm(d, { harness: 'other', id: 'o1' })).status, 201, 'another harness is not held');
  const listed = (await (await d.req('/wakes')).json()) as { wakes: { id: string }[]; pending: number };
  t.equal(listed.pending, 6, 'nothing refused was stored');
  t.same(listed.wakes.map((w) => w.id).sort(), ['big', 'o1', 'w1', 'w2', 'w3', 'w4']);

  // one cancelled: room for one more at once
  t.equal((await d.req('/wakes/w2', { method: 'DELETE' })).status, 204);
  t.equal((await arm(d, { harness: 'qg', id: 'w6' })).status, 201, 'armed after a cancel');
  t.equal((await arm(d, { harness: 'qg', id: 'w7' })).status, 429, 'and full again');
});

t.test('the deployment store holds at most --max-images images', async (t) => {
  const d = await testDaemon({ maxImages: '2' });
  t.teardown(() => d.stop());
  t.match(d.logs.join('\n'), /max-images +2 +\(flag --max-images\)/, 'the boot log names it');
  const put = (name: string, bytes: Buffer): Promise<Response> =>
    d.req(`/harnesses/${name}`, { method: 'PUT', body: bytes });
  t.equal((await put('a', variant(1))).status, 200);
  t.equal((await put('b', variant(2))).status, 200);
  const third = await put('c', variant(3));
  t.equal(third.status, 507, 'a third image is refused');
  const body = (await third.json()) as { error: string; limit: string };
  t.equal(body.limit, 'max-images');
  t.match(body.error, /refused by limit max-images = 2: the deployment store holds 2 images/);
  t.equal((await d.req('/harnesses/c')).status, 404, 'nothing deployed');
  t.equal((await put('c', variant(2))).status, 200, 'an image already stored is not a new one');
  t.equal((await put('a', variant(4))).status, 200, 'a redeploy supersedes its own image');
  const images = fs.readdirSync(path.join(d.root, 'deployments', 'images'));
  t.equal(images.length, 2, 'two images on disk');
  t.equal((await d.req('/harnesses/b', { method: 'DELETE' })).status, 204);
  t.equal((await put('d', variant(5))).status, 507, 'c still uses the image b had');
  t.equal((await d.req('/harnesses/c', { method: 'DELETE' })).status, 204);
  t.equal((await put('d', variant(5))).status, 200, 'room once no name uses it');
});

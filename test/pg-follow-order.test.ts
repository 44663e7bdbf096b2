// Two bermds on one real PostgreSQL store (BERM_TEST_PG_URL). A change another daemon announces
// reaches daemon A in order, behind the changes announced before it; meanwhile A may acknowledge a
// deploy of its own for the same name. A removal announced before A's own deploy of that name must
// not undo the deploy: the database holds A's record, the other daemons serve it, and so must A.
// The order is forced, not raced: A's backend holds the deploy of one name (`slow`) until the test
// lets it go, so every announcement after it waits in A's queue while A takes its own deploy.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { shutdownBridge } from '../src/sync/bridge.js';
import { elf, testDaemon } from './helpers/daemon.js';
import { freshDatabase } from './helpers/pg.js';
import { until } from './helpers/wait.js';

t.teardown(() => shutdownBridge());

const ECHO = elf('fixtures/build/echo-gcc-O2.elf');
/** The echo ELF with a suffix past its last section: the same code, another digest. */
const variant = (tag: string): Buffer => Buffer.concat([ECHO, Buffer.from(`\0follow-order ${tag}\0`)]);
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

t.test('an older removal announced late does not undo a deploy acknowledged since', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const b = await testDaemon({ store: url });
  t.teardown(async () => {
    await b.stop();
    rmSync(b.root, { recursive: true, force: true });
  });

  // daemon A, in this process: its backend holds the deploy of `slow` until `letGo`
  let letGo!: () => void;
  const gate = new Promise<void>((r) => (letGo = r));
  let slowHeld = false;
  const a = await testDaemon(
    { store: url },
    {},
    mkdtempSync(join(tmpdir(), 'bermd-follow-order-')),
    (backend) => {
      const deploy = backend.deploy.bind(backend);
      backend.deploy = async (name, bytes, grant) => {
        if (name === 'slow') {
          slowHeld = true;
          await gate;
        }
        return deploy(name, bytes, grant);
      };
    },
  );
  t.teardown(async () => {
    await a.stop();
    rmSync(a.root, { recursive: true, force: true });
  });
  const servedBy = async (base: string): Promise<Map<string, string>> =>
    new Map(
      ((await (await fetch(`${base}/harnesses`)).json()) as { name: string; digest: string }[]).map((h) => [
        h.name,
        h.digest,
      ]),
    );

  const x1 = variant('x1');
  const x2 = variant('x2');
  t.equal((await b.req('/harnesses/x', { method: 'PUT', body: x1 })).status, 200, 'B deploys x');
  await until('A follows x', async () => (await servedBy(a.url)).get('x') === sha(x1), 20_000);

  // A's queue of announced changes stops at `slow`
  t.equal((await b.req('/harnesses/slow', { method: 'PUT', body: variant('slow') })).status, 200);
  await until("A takes slow's deploy (held)", async () => slowHeld, 20_000);
  // B removes x: announced, and waiting in A's queue behind slow
  t.equal((await b.req('/harnesses/x', { method: 'DELETE' })).status, 204, 'B removes x');
  // A deploys x again, acknowledged: its record is in the database
  const put = await fetch(`${a.url}/harnesses/x`, { method: 'PUT', body: x2 });
  t.equal(put.status, 200, 'A deploys x again and acknowledges it');
  // after the removal, one more change: once A serves it, A's queue is past the removal of x
  t.equal((await b.req('/harnesses/marker', { method: 'PUT', body: variant('marker') })).status, 200);
  letGo();
  await until(
    'A is past the removal in its queue',
    async () => (await servedBy(a.url)).has('marker'),
    20_000,
  );

  t.equal((await servedBy(a.url)).get('x'), sha(x2), 'A still serves the x it acknowledged');
  await until('B follows A: x2', async () => (await servedBy(b.url)).get('x') === sha(x2), 20_000);
  const call = await fetch(`${a.url}/harnesses/x/tools/echo`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"k":1}',
  });
  t.equal(call.status, 200, 'a call of x on A is answered');
});

// bermd's index view (src/daemon/index-routes.ts): GET /index lists a real index with "installed"
// per entry, POST /index/install pulls from a real registry (docker-registry), verifies the layer
// digest and the index's published digest, and deploys; refusals leave nothing deployed. Without
// --index both routes answer 404 {"error": "no index configured"}.
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { readElf } from '../src/elf/reader.js';
import { appendEntry } from '../src/index/files.js';
import { pushHarness, parseReference } from '../src/oci/index.js';
import { testDaemon } from './helpers/daemon.js';
import { ROOT } from './helpers/fixtures.js';
import { startRegistry } from './helpers/oci-registry.js';

const BUILD = join(ROOT, 'fixtures', 'build');
const ECHO = new Uint8Array(readFileSync(join(BUILD, 'echo-gcc-O2.elf')));
const TEXT = new Uint8Array(readFileSync(join(BUILD, 'text-gcc-O2.elf')));
const TMP = mkdtempSync(join(tmpdir(), 'berm-index-daemon-'));
t.teardown(() => rmSync(TMP, { recursive: true, force: true }));
const hex = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');
const NOENV = { env: {} };

const reg = await startRegistry();
t.teardown(() => reg.stop());

const push = async (ref: string, elf: Uint8Array): Promise<void> => {
  await pushHarness(parseReference(ref), elf, readElf(elf).manifest!, NOENV);
};

t.test('without --index the routes answer 404 no index configured', async (t) => {
  const d = await testDaemon();
  t.teardown(() => d.stop());
  for (const [path, init] of [
    ['/index?q=x', {}],
    ['/index/install', { method: 'POST', body: '{"reference":"a/b:c","name":"x"}' }],
  ] as const) {
    const r = await d.req(path, init);
    t.equal(r.status, 404, path);
    t.same(await r.json(), { error: 'no index configured' });
  }
});

t.test('GET /index lists entries with installed; POST /index/install verifies and deploys', async (t) => {
  const index = join(TMP, 'index');
  const echoRef = `${reg.host}/berm/echo:v1`;
  const textRef = `${reg.host}/berm/text:v1`;
  await push(echoRef, ECHO);
  await push(textRef, TEXT);
  const tools = [
    { name: 'echo', description: 'Return the arguments unchanged.', parameters: { type: 'object' } },
  ];
  appendEntry(index, { reference: echoRef, digest: `sha256:${hex(ECHO)}`, usage: 'Echo tools', tools });
  // the index says text:v1 is the echo ELF: what the registry serves is not what was published
  appendEntry(index, { reference: textRef, digest: `sha256:${hex(ECHO)}`, usage: 'Text tools', tools: [] });
  const d = await testDaemon({ index });
  t.teardown(() => d.stop());

  let r = await d.req('/index?q=ECHO');
  t.equal(r.status, 200);
  let list = (await r.json()) as { reference: string; installed: boolean }[];
  t.same(
    list.map((e) => [e.reference, e.installed]),
    [[echoRef, false]],
  );

  r = await d.req('/index/install', {
    method: 'POST',
    body: JSON.stringify({ reference: echoRef, name: 'echo' }),
  });
  const body = (await r.json()) as { name: string; digest: string; tools: { name: string }[] };
  t.equal(r.status, 200, JSON.stringify(body));
  t.equal(body.name, 'echo');
  t.equal(body.digest, hex(ECHO), 'answers as a deploy does: the inspect shape');
  t.same(
    body.tools.map((x) => x.name),
    ['echo', 'echo_len'],
  );
  r = await d.req('/harnesses/echo/tools/echo', { method: 'POST', body: '{"x":1}' });
  t.same(await r.json(), { done: '{"x":1}' }, 'the installed harness answers a tool call');

  list = (await (await d.req('/index')).json()) as { reference: string; installed: boolean }[];
  t.same(
    list.map((e) => [e.reference, e.installed]),
    [
      [echoRef, true],
      [textRef, true],
    ],
    'installed is by digest: the text entry names the deployed echo digest',
  );

  // a digest the index did not publish for this reference: refused, nothing deployed
  r = await d.req('/index/install', {
    method: 'POST',
    body: JSON.stringify({ reference: textRef, name: 'text' }),
  });
  t.equal(r.status, 422);
  t.match(
    ((await r.json()) as { error: string }).error,
    /the registry serves sha256:\w+ but the index published/,
  );
  t.equal((await d.req('/harnesses/text')).status, 404, 'nothing deployed');

  for (const [b, status, why] of [
    [{ reference: 'not a ref', name: 'x' }, 400, /invalid reference/],
    [{ reference: echoRef, name: 'Bad.Name' }, 400, /invalid harness name/],
    [{ reference: echoRef }, 400, /name is missing/],
    [{ reference: `${reg.host}/berm/none:v1`, name: 'none' }, 422, /manifest unknown/],
    [{ reference: '127.0.0.1:1/berm/echo:v1', name: 'gone' }, 502, /cannot reach/],
  ] as const) {
    r = await d.req('/index/install', { method: 'POST', body: JSON.stringify(b) });
    t.equal(r.status, status, JSON.stringify(b));
    t.match(((await r.json()) as { error: string }).error, why);
  }
  r = await d.req('/index?limit=1');
  t.equal(((await r.json()) as unknown[]).length, 1);
  const next = r.headers.get('x-next-cursor');
  t.ok(next);
  r = await d.req(`/index?limit=1&cursor=${next}`);
  t.same(
    ((await r.json()) as { reference: string }[]).map((e) => e.reference),
    [textRef],
  );
  t.equal((await d.req('/index?cursor=zz')).status, 400);
});

// bermd over real HTTP on 127.0.0.1: deploy, list, inspect, invoke (plain and SSE), undeploy,
// metrics, health, tokens, grants from the declaration, and bad input. Expected values come from
// the fixtures' specs (echo returns its arguments; hc_checksum is FNV-1a-64 computed here).
import t from 'tap';
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDaemon } from '../src/daemon/daemon.js';
import { createRuntimeBackend } from '../src/daemon/runtime-backend.js';
import { resolveSettings } from '../src/daemon/settings.js';
import { REPO, elf, testDaemon } from './helpers/daemon.js';
import { TEST_CACHE } from './helpers/fixtures.js';

const ECHO = elf('fixtures/build/echo-gcc-O2.elf');
const HOSTCALLS = elf('fixtures/build/hostcalls-gcc-O2.elf');
const MISBEHAVE = elf('fixtures/build/misbehave-gcc-O2.elf');
const TEXT = elf('fixtures/build/text-gcc-O2.elf');
const PROBE = elf('examples/probe.elf');
const OS = elf('examples/os.elf');
const QG = elf('test/data/queue-guest.elf');
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

function fnv1a64(s: string): string {
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(s)) h = BigInt.asUintN(64, (h ^ BigInt(b)) * 0x100000001b3n);
  return h.toString(16).padStart(16, '0');
}

/** Send `head` on a socket (then `trickle` every 100 ms while open); resolves with all bytes read. */
function rawHttp(port: number, head: string, trickle?: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let out = '';
    s.on('data', (c) => (out += c.toString()));
    s.on('error', reject);
    s.write(head);
    const tick = trickle === undefined ? null : setInterval(() => s.writable && s.write(trickle), 100);
    s.on('close', () => {
      if (tick) clearInterval(tick);
      resolve(out);
    });
  });
}

t.test('deploy, list, inspect, invoke, undeploy over HTTP', async (t) => {
  const d = await testDaemon();
  t.teardown(() => d.stop());

  const health = await d.req('/health');
  t.equal(health.status, 200);
  t.same(await health.json(), { status: 'ok' });

  const put = await d.req('/harnesses/echo', { method: 'PUT', body: ECHO });
  t.equal(put.status, 200);
  const info = (await put.json()) as Record<string, unknown>;
  t.equal(info.name, 'echo');
  t.equal(info.digest, sha(ECHO), 'digest is the sha256 of the uploaded bytes');
  t.equal(info.usage, 'Echo tools: return what you send.');
  t.same(
    (info.tools as { name: string }[]).map((x) => x.name),
    ['echo', 'echo_len'],
  );
  t.same(info.deps, []);
  t.same(info.granted, { capabilities: [] }, 'undeclared: no capabilities');

  t.equal((await d.req('/harnesses/mis', { method: 'PUT', body: MISBEHAVE })).status, 200);
  const list = (await (await d.req('/harnesses')).json()) as { name: string }[];
  t.same(
    list.map((h) => h.name),
    ['echo', 'mis'],
  );
  const inspect = (await (await d.req('/harnesses/echo')).json()) as Record<string, unknown>;
  t.same(inspect, info, 'GET returns what PUT returned');

  const args = '{"a":[1,2,3],"s":"héllo"}';
  const r = await d.req('/harnesses/echo/tools/echo', { method: 'POST', body: args });
  t.equal(r.status, 200);
  t.same(await r.json(), { done: args }, 'echo returns its arguments');
  const len = await d.req('/harnesses/echo/tools/echo_len', { method: 'POST', body: '{}' });
  t.same(await len.json(), { done: '2' });

  const failed = await d.req('/harnesses/mis/tools/always_fails', { method: 'POST', body: '{}' });
  t.equal(failed.status, 200);
  const fj = (await failed.json()) as { failed?: string };
  t.type(fj.failed, 'string', 'berm.fail gives {"failed": ...}');

  const del = await d.req('/harnesses/echo', { method: 'DELETE' });
  t.equal(del.status, 204);
  t.equal((await d.req('/harnesses/echo')).status, 404);
  const gone = await d.req('/harnesses/echo/tools/echo', { method: 'POST', body: '{}' });
  t.equal(gone.status, 404);
  t.match(((await gone.json()) as { error: string }).error, /no harness named echo/);
  t.equal((await d.req('/harnesses/echo', { method: 'DELETE' })).status, 404);
});

t.test('a trap is a 500 naming the trap, pc and symbol', async (t) => {
  const d = await testDaemon();
  t.teardown(() => d.stop());
  t.equal((await d.req('/harnesses/probe', { method: 'PUT', body: PROBE })).status, 200);
  const r = await d.req('/harnesses/probe/tools/trap', { method: 'POST', body: '{}' });
  t.equal(r.status, 500);
  const j = (await r.json()) as { error: string; trap: string; pc: number; symbol: string };
  t.equal(j.trap, 'MemoryFault');
  t.ok(j.pc > 0, 'guest pc given');
  t.match(j.symbol, /^berm_tool_trap\+0x[0-9a-f]+$/);
  t.match(j.error, /MemoryFault/);
});

t.test('SSE streams berm.log lines, then the whole result', async (t) => {
  const d = await testDaemon();
  t.teardown(() => d.stop());
  t.equal((await d.req('/harnesses/hc', { method: 'PUT', body: HOSTCALLS })).status, 200);
  const args = JSON.stringify({ pad: 'x'.repeat(150) });
  const r = await d.req('/harnesses/hc/tools/hc_checksum', {
    method: 'POST',
    body: args,
    headers: { accept: 'text/event-stream' },
  });
  t.equal(r.status, 200);
  t.match(r.headers.get('content-type'), /^text\/event-stream/);
  const text = await r.text();
  const events = text
    .split('\n\n')
    .filter((e) => e !== '')
    .map((e) => {
      const lines = e.split('\n');
      return {
        event: lines.find((l) => l.startsWith('event: '))!.slice(7),
        data: lines
          .filter((l) => l.startsWith('data: '))
          .map((l) => l.slice(6))
          .join('\n'),
      };
    });
  const logs = events.filter((e) => e.event === 'log').map((e) => e.data);
  const n = Buffer.byteLength(args);
  t.same(logs, [
    'hc_checksum: start',
    ...Array.from({ length: Math.floor(n / 64) }, () => 'hc_checksum: 64 bytes'),
    'hc_checksum: done',
  ]);
  const last = events[events.length - 1]!;
  t.equal(last.event, 'result', 'the result comes last, in one event');
  const result = JSON.parse(last.data) as Record<string, unknown>;
  delete result.chain; // the runtime's chain id, when it reports one
  t.same(result, { status: 200, done: JSON.stringify({ len: n, fnv: fnv1a64(args) }) });
});

t.test('bad input: each a clear refusal, nothing lost', async (t) => {
  const d = await testDaemon({ maxImageBytes: '1M', bodyTimeoutMs: '400' }, { BERMD_MAX_BODY_BYTES: '64K' });
  t.teardown(() => d.stop());
  // the boot log gives every setting with its source
  t.ok(d.logs.some((l) => /max-image-bytes +1048576 +\(flag --max-image-bytes\)/.test(l)));
  t.ok(d.logs.some((l) => /max-body-bytes +65536 +\(env BERMD_MAX_BODY_BYTES\)/.test(l)));
  t.ok(d.logs.some((l) => /addr +127\.0\.0\.1:0 +\(flag --addr\)/.test(l)));
  t.equal((await d.req('/harnesses/text', { method: 'PUT', body: TEXT })).status, 200);

  const notElf = await d.req('/harnesses/x', { method: 'PUT', body: 'hello, not an ELF' });
  t.equal(notElf.status, 400);
  t.match(((await notElf.json()) as { error: string }).error, /ELF: .*magic/);

  const x86 = Buffer.from(ECHO);
  x86.writeUInt16LE(62, 18); // e_machine = EM_X86_64
  const notRv = await d.req('/harnesses/x', { method: 'PUT', body: x86 });
  t.equal(notRv.status, 400);
  const nr = (await notRv.json()) as { error: string; code: string };
  t.equal(nr.code, 'not-riscv');

  const noManifest = await d.req('/harnesses/x', { method: 'PUT', body: elf('test/data/edge.elf') });
  t.equal(noManifest.status, 400);
  t.match(((await noManifest.json()) as { error: string }).error, /manifest: no \.berm\.abi section/);
  t.equal((await d.req('/harnesses/x', { method: 'PUT', body: '' })).status, 400, 'empty body');

  const big = await d.req('/harnesses/x', { method: 'PUT', body: Buffer.alloc(2 << 20) });
  t.equal(big.status, 413);
  t.match(((await big.json()) as { error: string }).error, /over the limit of 1048576/);
  const bigArgs = await d.req('/harnesses/text/tools/stats', {
    method: 'POST',
    body: JSON.stringify({ values: [], pad: 'x'.repeat(70_000) }),
  });
  t.equal(bigArgs.status, 413);

  for (const bad of ['a.b', 'A', 'a%2Fb', 'x%00']) {
    const r = await d.req(`/harnesses/${bad}`, { method: 'PUT', body: ECHO });
    t.equal(r.status, 400, `name ${bad} refused`);
    t.match(((await r.json()) as { error: string }).error, /invalid harness name/);
  }
  // upstream's rule: such a name is refused on PUT (400) and found nowhere else (404)
  for (const bad of ['a.b', 'A', 'a%2Fb']) {
    for (const [method, path] of [
      ['GET', `/harnesses/${bad}`],
      ['DELETE', `/harnesses/${bad}`],
      ['POST', `/harnesses/${bad}/tools/echo`],
    ] as const) {
      const r = await d.req(path, { method, ...(method === 'POST' ? { body: '{}' } : {}) });
      t.equal(r.status, 404, `${method} ${path}`);
      t.match(((await r.json()) as { error: string }).error, /no harness named/);
    }
  }
  // fetch resolves '..' before sending: speak HTTP on a socket to send it as is
  for (const bad of ['..', '%2e%2e', '..%2f..%2fetc']) {
    const raw = await rawHttp(
      d.address.port,
      `GET /harnesses/${bad} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`,
    );
    // nothing by a name that breaks the rule can be deployed: 404, as upstream answers
    t.match(raw, /^HTTP\/1\.1 404 /, `name ${bad}: not found`);
    t.match(raw, /no harness named/);
  }
  const slash = await d.req('/harnesses/a/b', { method: 'PUT', body: ECHO });
  t.equal(slash.status, 404, 'a/b is no route');

  const unknownTool = await d.req('/harnesses/text/tools/nope', { method: 'POST', body: '{}' });
  t.equal(unknownTool.status, 404);
  t.match(
    ((await unknownTool.json()) as { error: string }).error,
    /no tool named nope \(tools: format, number, stats\)/,
  );
  const unknownHarness = await d.req('/harnesses/nope/tools/x', { method: 'POST', body: '{}' });
  t.equal(unknownHarness.status, 404);

  const notJson = await d.req('/harnesses/text/tools/stats', { method: 'POST', body: '{"values": [1,' });
  t.equal(notJson.status, 400);
  t.match(((await notJson.json()) as { error: string }).error, /not valid JSON/);
  const missing = await d.req('/harnesses/text/tools/stats', { method: 'POST', body: '{}' });
  t.equal(missing.status, 400);
  t.match(
    ((await missing.json()) as { error: string }).error,
    /\/values: must have required property 'values'/,
  );
  const wrongType = await d.req('/harnesses/text/tools/stats', {
    method: 'POST',
    body: '{"values":[1,"x"]}',
  });
  t.equal(wrongType.status, 400);
  t.match(((await wrongType.json()) as { error: string }).error, /\/values\/1: must be number/);

  // a body that trickles in: refused with 408 once the body deadline passes
  const slow = await rawHttp(
    d.address.port,
    'POST /harnesses/text/tools/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{"val',
    ' ',
  );
  t.match(slow, /^HTTP\/1\.1 408 /);
  t.match(slow, /request body timed out/);

  // nothing was lost: the good harness still answers
  const ok = await d.req('/harnesses/text/tools/stats', { method: 'POST', body: '{"values":[2,1]}' });
  t.equal(ok.status, 200);
  t.match(((await ok.json()) as { done: string }).done, /"median":1\.500/);
  t.same(
    ((await (await d.req('/harnesses')).json()) as { name: string }[]).map((h) => h.name),
    ['text'],
  );
});

t.test('bearer token: /health open, everything else 401 without the right token', async (t) => {
  const d = await testDaemon({}, { BERMD_TOKEN: 's3cret-token' });
  t.teardown(() => d.stop());
  t.equal((await d.req('/health', { token: null })).status, 200);
  for (const token of [null, 'wrong', 's3cret-token-', '']) {
    for (const path of ['/harnesses', '/metrics', '/wakes']) {
      const r = await d.req(path, { token });
      t.equal(r.status, 401, `${path} with token ${JSON.stringify(token)}`);
      t.match(((await r.json()) as { error: string }).error, /bearer token/);
    }
    const put = await d.req('/harnesses/echo', { method: 'PUT', body: ECHO, token });
    t.equal(put.status, 401);
    const mcp = await d.req('/mcp', { method: 'POST', body: '{}', token });
    t.equal(mcp.status, 401);
  }
  t.equal((await d.req('/harnesses')).status, 200, 'right token accepted');
  t.same((await (await d.req('/harnesses')).json()) as unknown[], [], 'nothing deployed');
});

t.test(
  "BERM_TOKEN (the index's token, berm publish) is never bermd's: only BERMD_TOKEN or --token-file",
  async (t) => {
    const d = await testDaemon({}, { BERM_TOKEN: 'index-token' });
    t.teardown(() => d.stop());
    t.equal(
      (await d.req('/harnesses', { token: null })).status,
      200,
      'no token required: BERM_TOKEN not read',
    );
    t.match(d.logs.join('\n'), /warning: BERM_TOKEN is set but bermd does not read it/);
    const both = await testDaemon({}, { BERMD_TOKEN: 'daemon-token', BERM_TOKEN: 'index-token' });
    t.teardown(() => both.stop());
    t.equal((await both.req('/harnesses', { token: 'index-token' })).status, 401, 'BERM_TOKEN refused');
    t.equal((await both.req('/harnesses', { token: 'daemon-token' })).status, 200, 'BERMD_TOKEN accepted');
    await t.rejects(
      testDaemon({ addr: '0.0.0.0:0' }, { BERM_TOKEN: 'index-token' }),
      /without a bearer token: set BERMD_TOKEN .*BERM_TOKEN is set, but it is the index's token/,
    );
  },
);

t.test('no token on a non-loopback address: refused at boot', async (t) => {
  await t.rejects(
    testDaemon({ addr: '0.0.0.0:0' }),
    /refusing to listen on 0\.0\.0\.0 without a bearer token/,
  );
});

t.test('grants come only from the declaration; a sha256 mismatch refuses the deploy', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bermd-decl-'));
  const file = join(dir, 'decl.toml');
  writeFileSync(
    file,
    `[[harnesses]]\nname = "os"\nsource = "os.elf"\nsha256 = "${sha(OS)}"\ncapabilities = ["fs"]\nroot = "${REPO}"\n` +
      `[[harnesses]]\nname = "pinned"\nsource = "x.elf"\nsha256 = "${'0'.repeat(64)}"\n`,
  );
  const d = await testDaemon({ config: file });
  t.teardown(() => d.stop());
  const put = await d.req('/harnesses/os', { method: 'PUT', body: OS });
  t.equal(put.status, 200);
  t.same(((await put.json()) as { granted: unknown }).granted, { capabilities: ['fs'], root: REPO });
  const read = await d.req('/harnesses/os/tools/read', {
    method: 'POST',
    body: '{"path":"package.json","limit":9}',
  });
  t.same(await read.json(), { done: '{\n  "name' });
  // exec is in the manifest's request but not granted: its ecall is not linked
  const exec = await d.req('/harnesses/os/tools/exec', { method: 'POST', body: '{"command":"true"}' });
  t.equal(exec.status, 500);
  t.match(((await exec.json()) as { error: string }).error, /UnknownHostCall/);
  // the same bytes under another name: undeclared, no capabilities
  const other = await d.req('/harnesses/os2', { method: 'PUT', body: OS });
  t.same(((await other.json()) as { granted: unknown }).granted, { capabilities: [] });
  const mismatch = await d.req('/harnesses/pinned', { method: 'PUT', body: ECHO });
  t.equal(mismatch.status, 403);
  t.match(((await mismatch.json()) as { error: string }).error, new RegExp(`hashes to sha256 ${sha(ECHO)}`));
  t.equal((await d.req('/harnesses/pinned')).status, 404, 'nothing published');
  t.ok(
    d.logs.some((l) => l.includes(`harness os`) || l.includes('declared os')),
    'boot log names declared harnesses',
  );
});

t.test('the declaration is read at boot: an edit needs a restart, and the 403 says so', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bermd-decl-'));
  const file = join(dir, 'decl.toml');
  const declare = (digest: string): void =>
    writeFileSync(file, `[[harnesses]]\nname = "pinned"\nsource = "x.elf"\nsha256 = "${digest}"\n`);
  declare(sha(OS));
  const root = mkdtempSync(join(tmpdir(), 'bermd-test-'));
  let d = await testDaemon({ config: file }, {}, root);
  t.teardown(() => d.stop());
  // the operator pins the new build in the file while bermd runs: bermd still holds the old pin
  declare(sha(ECHO));
  const put = await d.req('/harnesses/pinned', { method: 'PUT', body: ECHO });
  t.equal(put.status, 403);
  const error = ((await put.json()) as { error: string }).error;
  t.match(error, `declared "pinned" with sha256 ${sha(OS)} when bermd started`);
  t.match(error, `set sha256 = "${sha(ECHO)}" there and restart bermd`);
  t.notMatch(error, file, 'the reply names no path of the operator');
  // the operator, who must act, sees the refusal in bermd's log too, with the declaration's place
  t.ok(d.logs.includes(`refused the deploy of pinned: ${error} (declared at ${file}:1)`), d.logs.join('\n'));
  // the restart the message asks for is what grants it
  await d.stop();
  d = await testDaemon({ config: file }, {}, root);
  t.equal((await d.req('/harnesses/pinned', { method: 'PUT', body: ECHO })).status, 200);
});

t.test('boot refuses an fs root that does not exist, naming the fix', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bermd-decl-'));
  const file = join(dir, 'decl.toml');
  writeFileSync(
    file,
    `[[harnesses]]\nname = "os"\nsource = "os.elf"\nsha256 = "${sha(OS)}"\ncapabilities = ["fs"]\nroot = "missing-dir"\n`,
  );
  await t.rejects(testDaemon({ config: file }), {
    message: new RegExp(`root ${join(dir, 'missing-dir')} is not an existing directory.*mkdir -p`),
  });
});

t.test('deployments survive a restart; re-deploying the same bytes is free', async (t) => {
  const d = await testDaemon();
  t.equal((await d.req('/harnesses/echo', { method: 'PUT', body: ECHO })).status, 200);
  const first = (await (await d.req('/harnesses/echo')).json()) as { deployed_at: number };
  const again = await d.req('/harnesses/echo', { method: 'PUT', body: ECHO });
  t.equal(((await again.json()) as { deployed_at: number }).deployed_at, first.deployed_at, 'no new deploy');
  t.equal(d.logs.filter((l) => l.startsWith('deployed echo')).length, 1, 'logged once');
  await d.stop();
  const d2 = await testDaemon({}, {}, d.root);
  t.teardown(() => d2.stop());
  t.ok(
    d2.logs.some((l) => l.includes(`harness echo sha256 ${sha(ECHO)} capabilities: none`)),
    'boot log',
  );
  const r = await d2.req('/harnesses/echo/tools/echo', { method: 'POST', body: '{"k":1}' });
  t.same(await r.json(), { done: '{"k":1}' });
});

t.test('the boot log says how many wakes came back with the due-set', async (t) => {
  const d = await testDaemon();
  t.ok(d.logs.includes('  wakes            0 pending, 0 to re-deliver'), 'an empty due-set');
  t.equal((await d.req('/harnesses/qg', { method: 'PUT', body: QG })).status, 200);
  for (const id of ['a', 'b', 'c']) {
    const arm = await d.req('/wakes', {
      method: 'POST',
      body: JSON.stringify({ harness: 'qg', delay_ms: 3_600_000, id }),
    });
    t.equal(arm.status, 201);
  }
  t.equal((await d.req('/wakes/b', { method: 'DELETE' })).status, 204);
  await d.stop();
  const d2 = await testDaemon({}, {}, d.root);
  t.teardown(() => d2.stop());
  t.ok(d2.logs.includes('  wakes            2 pending, 0 to re-deliver'), d2.logs.join('\n'));
  t.ok(
    d2.logs.indexOf('  wakes            2 pending, 0 to re-deliver') <
      d2.logs.findIndex((l) => l.startsWith('listening on')),
    'before listening',
  );
});

t.test(
  'a restart restores deployments a few at a time; a damaged image is reported, the rest come back',
  async (t) => {
    const d = await testDaemon({ workers: '2' });
    const images: [string, Buffer, string, string][] = [
      ['echo', ECHO, '/tools/echo', '{"k":1}'],
      ['text', TEXT, '/tools/stats', '{"values":[2,1]}'],
      ['hc', HOSTCALLS, '/tools/hc_checksum', '{"pad":"x"}'],
    ];
    const names: string[] = [];
    for (let i = 0; i < 4; i++)
      for (const [base, bytes] of images) {
        const r = await d.req(`/harnesses/${base}${i}`, { method: 'PUT', body: bytes });
        t.equal(r.status, 200, `${base}${i} deployed`);
        names.push(`${base}${i}`);
      }
    t.equal((await d.req('/harnesses/misbehave', { method: 'PUT', body: MISBEHAVE })).status, 200);
    await d.stop();
    // damage the one image only 'misbehave' uses
    const damaged = join(d.root, 'deployments', 'images', `${sha(MISBEHAVE)}.elf`);
    writeFileSync(damaged, Buffer.concat([MISBEHAVE.subarray(0, 1000), Buffer.from('torn')]));

    // the real backend, with the deploys it is given counted as they overlap
    let inFlight = 0;
    let most = 0;
    const logs: string[] = [];
    const settings = {
      ...resolveSettings({ addr: '127.0.0.1:0', root: d.root, workers: '2', cacheDir: TEST_CACHE }, {}),
      limit: [],
    };
    const d2 = await startDaemon(
      settings,
      async (ctx) => {
        const b = await createRuntimeBackend(ctx);
        const deploy = b.deploy.bind(b);
        b.deploy = async (...a) => {
          most = Math.max(most, ++inFlight);
          try {
            return await deploy(...a);
          } finally {
            inFlight--;
          }
        };
        return b;
      },
      {},
      (l) => logs.push(l),
    );
    t.teardown(() => d2.stop());
    // two workers: four deployments in flight at once (daemon.ts), never one at a time
    t.equal(most, 4, 'deployments restored concurrently, bounded');
    t.ok(
      logs.some((l) => /restored 12 of 13 deployments in \d+ ms/.test(l)),
      'the restore is logged',
    );
    t.ok(
      logs.some((l) => /warning: harness misbehave \(sha256 [0-9a-f]{64}\) not restored: .*damaged/.test(l)),
      'the damaged image is reported',
    );
    const listed = (await (await fetch(`${d2.url}/harnesses`)).json()) as { name: string }[];
    t.same(
      listed.map((h) => h.name),
      [...names].sort(),
      'every other deployment came back',
    );
    for (const [base, , path, body] of images)
      for (const i of [0, 3]) {
        const r = await fetch(`${d2.url}/harnesses/${base}${i}${path}`, { method: 'POST', body });
        t.equal(r.status, 200, `${base}${i} answers`);
      }
  },
);

t.test('metrics in Prometheus text', async (t) => {
  const d = await testDaemon();
  t.teardown(() => d.stop());
  await d.req('/harnesses/echo', { method: 'PUT', body: ECHO });
  for (let i = 0; i < 3; i++) await d.req('/harnesses/echo/tools/echo', { method: 'POST', body: '{}' });
  const r = await d.req('/metrics');
  t.equal(r.status, 200);
  t.match(r.headers.get('content-type'), /^text\/plain/);
  const text = await r.text();
  t.match(text, /^berm_invocations_total\{trigger="call",outcome="ok"\} 3$/m);
  t.match(text, /^berm_invocation_seconds_count\{trigger="call"\} 3$/m);
  t.match(text, /^berm_deployments 1$/m);
  for (const m of [
    'berm_queue_depth',
    'berm_in_flight',
    'berm_wakes_pending',
    'berm_spills_total',
    'berm_translations_total',
  ]) {
    t.match(text, new RegExp(`^${m} \\d+$`, 'm'), m);
  }
  t.match(
    text,
    /^berm_http_requests_total\{route="\/harnesses\/\{name\}\/tools\/\{tool\}",status="200"\} 3$/m,
  );
});

/**
 * A kept-alive raw connection (ASCII answers only): `get(path)` sends one request and resolves with
 * the status, the head and the body (de-chunked).
 */
function keptConnection(port: number): Promise<{
  get(path: string): Promise<{ status: number; head: string; body: string }>;
  closed: Promise<void>;
  destroy(): void;
}> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let buf = '';
    let waiter: (() => void) | null = null;
    s.on('data', (c) => {
      buf += c.toString();
      waiter?.();
    });
    s.on('close', () => waiter?.());
    s.on('error', () => {});
    // bermd closes the connections it refuses: waiting for that is bounded, so a regression fails
    const closed = new Promise<void>((r, fail) => {
      const bound = setTimeout(() => fail(new Error('the connection was not closed within 15 s')), 15_000);
      bound.unref();
      s.on('close', () => {
        clearTimeout(bound);
        r();
      });
    });
    closed.catch(() => {});
    s.once('connect', () =>
      resolve({
        closed,
        destroy: () => s.destroy(),
        get: (path) =>
          new Promise((done, fail) => {
            buf = '';
            s.write(`GET ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: keep-alive\r\n\r\n`);
            waiter = () => {
              const end = buf.indexOf('\r\n\r\n');
              if (end < 0)
                return s.destroyed ? fail(new Error(`closed after ${JSON.stringify(buf)}`)) : undefined;
              const head = buf.slice(0, end);
              let body = buf.slice(end + 4);
              if (/transfer-encoding: *chunked/i.test(head)) {
                if (!body.endsWith('0\r\n\r\n')) return;
                let plain = '';
                for (let at = 0; ;) {
                  const eol = body.indexOf('\r\n', at);
                  const n = parseInt(body.slice(at, eol), 16);
                  if (n === 0) break;
                  plain += body.slice(eol + 2, eol + 2 + n);
                  at = eol + 2 + n + 2;
                }
                body = plain;
              } else {
                const len = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
                if (body.length < len) return;
                body = body.slice(0, len);
              }
              waiter = null;
              done({ status: Number(head.split(' ')[1]), head, body });
            };
          }),
      }),
    );
    s.once('error', reject);
  });
}

t.test('--max-connections: one more connection is answered 503 and closed; bermd stays up', async (t) => {
  const d = await testDaemon({ maxConnections: '2' });
  t.teardown(() => d.stop());
  t.ok(d.logs.some((l) => /max-connections +2 +\(flag --max-connections\)/.test(l)));
  const port = d.address.port;
  // two connections, each served once (so bermd has certainly accepted both), then kept open
  const a = await keptConnection(port);
  const b = await keptConnection(port);
  t.equal((await a.get('/health')).status, 200);
  t.equal((await b.get('/health')).status, 200);

  // the third: a real HTTP client gets 503 with a JSON error, and the connection is closed
  const over = await fetch(`${d.url}/health`);
  t.equal(over.status, 503);
  t.equal(over.headers.get('connection'), 'close');
  t.equal(over.headers.get('retry-after'), '1');
  t.same(await over.json(), {
    error: 'bermd serves at most 2 connections at once (--max-connections); retry later',
  });
  const c = await keptConnection(port);
  const refused = await c.get('/harnesses');
  t.equal(refused.status, 503, 'refused before auth or routing');
  t.match(refused.head, /connection: close/i);
  await c.closed;

  // a connection over the cap that sends nothing is dropped after the grace period
  const idle = await keptConnection(port);
  const t0 = Date.now();
  await idle.closed;
  t.ok(Date.now() - t0 < 10_000, `dropped after ${Date.now() - t0} ms`);

  // the served connections are unaffected; a freed slot is served again
  t.equal((await a.get('/health')).status, 200);
  t.equal((await b.get('/harnesses')).status, 200);
  a.destroy();
  await a.closed;
  let e = await keptConnection(port);
  let status = (await e.get('/health')).status;
  for (let i = 0; i < 100 && status !== 200; i++) {
    // bermd had not yet seen the other connection close: this one was over the cap
    await e.closed;
    await new Promise((r) => setTimeout(r, 20));
    e = await keptConnection(port);
    status = (await e.get('/health')).status;
  }
  t.equal(status, 200, 'served once a slot is free');
  const metrics = await e.get('/metrics');
  t.equal(metrics.status, 200);
  t.match(metrics.body, /^berm_http_requests_total\{route="over-capacity",status="503"\} [2-9]\d*$/m);
  e.destroy();
  b.destroy();
});

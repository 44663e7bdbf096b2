// bermd as a process: SIGTERM and SIGINT stop it gracefully (a request in flight gets its reply,
// exit 0, state persisted); a refused boot exits 2 with the reason.
import t from 'tap';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO, elf } from './helpers/daemon.js';
import { TEST_CACHE } from './helpers/fixtures.js';
import { until } from './helpers/wait.js';

const BERMD = join(REPO, 'bin/bermd.js');

function start(
  root: string,
  extra: string[] = [],
): Promise<{ proc: ChildProcess; url: string; stderr: () => string; exit: Promise<number | null> }> {
  return new Promise((resolve, reject) => {
    const proc = spawn(
      process.execPath,
      [BERMD, '--addr', '127.0.0.1:0', '--root', root, '--cache-dir', TEST_CACHE, '--workers', '1', ...extra],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let err = '';
    const exit = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
    proc.stderr!.on('data', (c: Buffer) => {
      err += c.toString();
      const m = /listening on (http:\/\/\S+)/.exec(err);
      if (m) resolve({ proc, url: m[1]!, stderr: () => err, exit });
    });
    void exit.then((code) => reject(new Error(`bermd exited ${code}:\n${err}`)));
  });
}

for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  t.test(`${sig}: drain, persist, exit 0`, { timeout: 120_000 }, async (t) => {
    const root = mkdtempSync(join(tmpdir(), 'bermd-sig-'));
    const b = await start(root);
    const put = await fetch(`${b.url}/harnesses/echo`, {
      method: 'PUT',
      body: elf('fixtures/build/echo-gcc-O2.elf'),
    });
    t.equal(put.status, 200);
    b.proc.kill(sig);
    t.equal(await b.exit, 0, 'exit code 0');
    t.match(b.stderr(), new RegExp(`${sig} received`));
    t.match(b.stderr(), /stopped after \d+ ms; state persisted/);
    await t.rejects(fetch(`${b.url}/health`), 'no longer listening');
    const again = await start(root);
    t.teardown(() => void again.proc.kill('SIGKILL'));
    t.match(again.stderr(), /harness echo sha256 [0-9a-f]{64} capabilities: none/);
    const r = await fetch(`${again.url}/harnesses/echo/tools/echo`, {
      method: 'POST',
      body: '{"after":"restart"}',
    });
    t.same(await r.json(), { done: '{"after":"restart"}' });
  });
}

t.test('SIGTERM while a call runs: the call gets its reply, then exit 0', { timeout: 120_000 }, async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'bermd-sig-'));
  const b = await start(root, ['--limit', 'timeoutMs=5000']);
  t.equal(
    (await fetch(`${b.url}/harnesses/qg`, { method: 'PUT', body: elf('test/data/queue-guest.elf') })).status,
    200,
  );
  const inFlight = fetch(`${b.url}/harnesses/qg/tools/spin`, { method: 'POST', body: '{}' });
  // the signal comes once the call runs on a worker (a fixed pause may end before bermd has even
  // read the request on a loaded machine); its 5 s deadline leaves that poll room, and ends the
  // call well within the drain's 10 s
  await until('the spin call to run', async () => {
    const m = await (await fetch(`${b.url}/metrics`)).text();
    return /^berm_in_flight 1$/m.test(m);
  });
  b.proc.kill('SIGTERM');
  const r = await inFlight;
  t.equal(r.status, 500, 'the spinning call ended at its deadline and was answered');
  t.match(((await r.json()) as { trap: string }).trap, 'Interrupted');
  t.equal(await b.exit, 0);
  t.match(b.stderr(), /stopped after \d+ ms; state persisted/);
});

t.test('a refused boot exits 2 naming the reason', { timeout: 60_000 }, async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'bermd-sig-'));
  const r = spawnSync(process.execPath, [BERMD, '--addr', '0.0.0.0:0', '--root', root], {
    encoding: 'utf8',
    env: { ...process.env, BERMD_TOKEN: '' },
  });
  t.equal(r.status, 2);
  t.match(r.stderr, /refusing to start: refusing to listen on 0\.0\.0\.0 without a bearer token/);
  const bad = spawnSync(process.execPath, [BERMD, '--addr', 'nonsense', '--root', root], {
    encoding: 'utf8',
  });
  t.equal(bad.status, 2);
  t.match(bad.stderr, /--addr: "nonsense" is not host:port/);
});

t.test('--version prints the package version and exits 0 without booting', async (t) => {
  const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string };
  const r = spawnSync(process.execPath, [BERMD, '--version'], { encoding: 'utf8', timeout: 60_000 });
  t.equal(r.status, 0, r.stderr);
  t.equal(r.stdout.trim(), pkg.version);
});

t.test(
  'one process per --root: a second bermd or berm worker is refused; SIGKILL frees it',
  { timeout: 120_000 },
  async (t) => {
    const root = mkdtempSync(join(tmpdir(), 'bermd-lock-'));
    const first = await start(root);
    t.teardown(() => void first.proc.kill('SIGKILL'));
    const put = await fetch(`${first.url}/harnesses/echo`, {
      method: 'PUT',
      body: elf('fixtures/build/echo-gcc-O2.elf'),
    });
    t.equal(put.status, 200);
    const holder = `bermd --addr 127.0.0.1:0 (pid ${first.proc.pid})`;

    const second = spawnSync(
      process.execPath,
      [BERMD, '--addr', '127.0.0.1:0', '--root', root, '--workers', '1'],
      {
        encoding: 'utf8',
        timeout: 60_000,
      },
    );
    t.equal(second.status, 1, 'a conflict with a running process, as an address in use');
    t.match(
      second.stderr,
      `bermd: cannot start: --root ${root} is in use by ${holder}: one process owns a state directory`,
    );
    t.notMatch(second.stderr, /listening on/);

    const run = spawnSync(
      process.execPath,
      [join(REPO, 'bin/berm.js'), 'worker', '--config', join(REPO, 'examples/runtime.toml'), '--state', root],
      { encoding: 'utf8', timeout: 60_000 },
    );
    t.equal(run.status, 2);
    t.match(run.stderr, `berm: --state ${root} is in use by ${holder}`);

    // the first one was never disturbed
    const r = await fetch(`${first.url}/harnesses/echo/tools/echo`, { method: 'POST', body: '{"still":1}' });
    t.same(await r.json(), { done: '{"still":1}' });
    t.same(readdirSync(join(root, 'deployments', 'images')).length, 1);

    // the kernel drops the lock with the process, however it ends
    first.proc.kill('SIGKILL');
    await first.exit;
    const next = await start(root);
    t.teardown(() => void next.proc.kill('SIGKILL'));
    t.match(next.stderr(), /harness echo sha256 [0-9a-f]{64}/);
  },
);

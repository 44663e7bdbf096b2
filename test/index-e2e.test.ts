// End to end over real processes on loopback: a real registry (docker-registry), a real
// berm-indexd (bin/berm-indexd.js), the berm CLI and bermd as a user runs them. berm push →
// berm publish → berm search finds it by a word of a tool description → berm install → bermd
// --config serves it → a tool call answers; the same through a git-backed index (a commit per
// publish, berm search from a .git clone). Then the refusals, each a clear error with nothing
// written: a non-berm image, a malformed reference, an unreachable registry, a wrong token, a POST
// over the rate limit, a takedown by a non-operator, a tampered layer at install, a sha256 that
// differs between the index and the registry.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { runBerm } from './helpers/berm-cli.js';
import { ROOT } from './helpers/fixtures.js';
import { startRegistry } from './helpers/oci-registry.js';

const BUILD = join(ROOT, 'fixtures', 'build');
const ECHO_FILE = join(BUILD, 'echo-gcc-O2.elf');
const TEXT_FILE = join(BUILD, 'text-gcc-O2.elf');
const ECHO = readFileSync(ECHO_FILE);
const TMP = mkdtempSync(join(tmpdir(), 'berm-index-e2e-'));
t.teardown(() => rmSync(TMP, { recursive: true, force: true }));
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');
const ENV = {
  BERM_DATA_DIR: join(TMP, 'data'),
  BERM_TOKEN: '',
  BERM_INDEX: '',
  BERMD_TOKEN: '',
  GIT_CONFIG_NOSYSTEM: '1',
  HOME: TMP,
};
const berm = (args: string[], env: Record<string, string> = {}) =>
  runBerm(args, join(TMP, 'cache'), { ...ENV, ...env });

const reg = await startRegistry();
t.teardown(() => reg.stop());

interface Proc {
  url: string;
  log: () => string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/** Start a bin (berm-indexd, bermd) and wait for the line naming its URL. */
function startBin(bin: string, args: string[], ready: RegExp): Promise<Proc> {
  const child = spawn(process.execPath, ['--stack-size=4000', join(ROOT, 'bin', bin), ...args], {
    cwd: TMP,
    env: { ...process.env, ...ENV },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  child.stdout!.on('data', (b: Buffer) => (log += b.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${bin} did not start:\n${log}`)), 60_000);
    child.stderr!.on('data', (b: Buffer) => {
      log += b.toString();
      const m = ready.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve({
          url: m[1]!,
          log: () => log,
          child,
          stop: async () => {
            if (child.exitCode !== null) return;
            const done = new Promise((r) => child.once('exit', r));
            child.kill('SIGTERM');
            await done;
          },
        });
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${bin} exited ${code}:\n${log}`));
    });
  });
}

const indexd = (args: string[]) =>
  startBin('berm-indexd.js', ['--addr', '127.0.0.1:0', ...args], /on (http:\/\/[\d.:]+)/);
const bermd = (args: string[]) =>
  startBin(
    'bermd.js',
    ['--addr', '127.0.0.1:0', '--workers', '1', ...args],
    /listening on (http:\/\/[\d.:]+)/,
  );

/** push → publish → search → install → bermd --config → a tool call, against index `url` (search from `searchFrom`). */
async function roundTrip(t: Test, url: string, searchFrom: string, repo: string): Promise<void> {
  const ref = `${reg.host}/${repo}:v1`;
  let r = await berm(['push', ref, ECHO_FILE]);
  t.equal(r.code, 0, r.stderr);
  r = await berm(['publish', ref, '--index', url]);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, `${ref}\n  digest     sha256:${sha(ECHO)}\n  tool       echo\n  tool       echo_len\n`);
  r = await berm(['search', 'unchanged', '--index', searchFrom]);
  t.equal(r.code, 0, r.stderr);
  const lines = r.stdout.trimEnd().split('\n');
  t.match(lines[0], /^HARNESS\s+DIGEST\s+TOOLS$/);
  t.ok(
    lines.some((l) => l.split(/\s+/).join(' ') === `${ref} ${sha(ECHO).slice(0, 12)} echo, echo_len`),
    'found by a word of a tool description',
  );
  const config = join(TMP, `${repo.replace(/\W/g, '-')}.toml`);
  r = await berm(['install', ref, '--index', url, '--name', 'echo', '--config', config]);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /no capabilities granted/);
  const toml = readFileSync(config, 'utf8');
  t.match(toml, `source = "oci:${ref}"`);
  t.match(toml, `sha256 = "${sha(ECHO)}"`);
  t.match(toml, 'capabilities = []');
  t.ok(
    readFileSync(join(TMP, 'data', 'harnesses', 'sha256', `${sha(ECHO)}.elf`)).equals(ECHO),
    'stored by sha256',
  );
  const d = await bermd(['--config', config, '--root', join(TMP, `root-${repo.replace(/\W/g, '-')}`)]);
  try {
    const res = await fetch(`${d.url}/harnesses/echo/tools/echo`, {
      method: 'POST',
      body: '{"hello":"index"}',
    });
    t.equal(res.status, 200);
    t.same(await res.json(), { done: '{"hello":"index"}' }, 'the installed harness answers a tool call');
  } finally {
    await d.stop();
  }
}

t.test('push, publish, search, install, serve: a directory index', async (t) => {
  const svc = await indexd(['--index', join(TMP, 'plain')]);
  t.teardown(() => svc.stop());
  await roundTrip(t, svc.url, svc.url, 'berm/echo');
  // what berm-indexd wrote reads back with a plain line-by-line JSON parse
  const file = join(TMP, 'plain', reg.host, 'berm', 'echo.json');
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '');
  t.equal(lines.length, 1);
  const e = JSON.parse(lines[0]!) as Record<string, unknown>;
  t.same(Object.keys(e), ['reference', 'digest', 'usage', 'tools']);
  t.equal(e.digest, `sha256:${sha(ECHO)}`);
  // the same directory, read in place by berm search without any service
  const r = await berm(['search', 'echo', '--index', join(TMP, 'plain')]);
  t.match(r.stdout, `${reg.host}/berm/echo:v1`);
  // publishing the same digest again is a no-op
  const again = await berm(['publish', `${reg.host}/berm/echo:v1`, '--index', svc.url]);
  t.equal(again.code, 0, again.stderr);
  t.equal(
    readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l !== '').length,
    1,
    'no second line',
  );
  // both route spellings answer
  for (const p of ['harnesses', 'berm']) {
    const res = await fetch(`${svc.url}/${p}/${reg.host}/berm/echo`);
    t.equal(res.status, 200, p);
    t.equal(((await res.json()) as unknown[]).length, 1);
  }
  const none = await fetch(`${svc.url}/berm/${reg.host}/berm/none`);
  t.equal(none.status, 404);
  t.same(await none.json(), { error: `nothing published under "${reg.host}/berm/none"` });
  const nothing = await berm(['search', 'no such words', '--index', svc.url]);
  t.equal(nothing.stdout, 'nothing published matches "no such words"\n');
});

t.test('the same through a git-backed index: a commit per publish, search from a .git clone', async (t) => {
  const dir = join(TMP, 'gitindex');
  mkdirSync(dir);
  const git = (args: string[], cwd = dir) => spawnSync('git', args, { cwd, encoding: 'utf8' });
  t.equal(git(['init', '--quiet', '-b', 'main']).status, 0);
  writeFileSync(join(dir, 'README.md'), 'berm index\n');
  t.equal(git(['-c', 'user.name=op', '-c', 'user.email=op@x', 'add', '.']).status, 0);
  t.equal(git(['-c', 'user.name=op', '-c', 'user.email=op@x', 'commit', '--quiet', '-m', 'start']).status, 0);
  const token = 'secret-token-of-alice';
  const tokens = join(TMP, 'tokens');
  writeFileSync(tokens, `# publishers\n${sha(Buffer.from(token))} alice\n`);
  const svc = await indexd(['--index', dir, '--tokens', tokens]);
  t.teardown(() => svc.stop());
  t.match(svc.log(), /a commit per publish/);
  // a bare repository the service's tree is pushed to, as an index is shared
  const bare = join(TMP, 'shared.git');
  t.equal(git(['clone', '--quiet', '--bare', dir, bare], TMP).status, 0);
  const ref = `${reg.host}/team/echo:v1`;
  let r = await berm(['push', ref, ECHO_FILE]);
  t.equal(r.code, 0, r.stderr);
  r = await berm(['publish', ref, '--index', svc.url], { BERM_TOKEN: token });
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, '  publisher  alice\n');
  const logLines = git(['log', '--format=%an|%s']).stdout.trim().split('\n');
  t.same(logLines, [`alice|publish ${ref}`, 'op|start'], 'one commit per publish, authored by the publisher');
  t.equal(git(['status', '--porcelain']).stdout, '', 'nothing left uncommitted');
  t.equal(git(['push', '--quiet', bare, 'main']).status, 0);
  const url = `file://${bare}`;
  r = await berm(['search', 'unchanged', '--index', url]);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, ref);
  const clone = join(TMP, 'cache', 'index', ...bare.split('/').filter((p) => p !== '')).replace(/\.git$/, '');
  t.ok(existsSync(join(clone, '.git')), 'cloned into the cache directory');
  t.equal(
    spawnSync('git', ['rev-parse', '--is-shallow-repository'], {
      cwd: clone,
      encoding: 'utf8',
    }).stdout.trim(),
    'true',
  );
  // a second publish reaches the clone only with --update
  const ref2 = `${reg.host}/team/text:v1`;
  r = await berm(['push', ref2, TEXT_FILE]);
  t.equal(r.code, 0, r.stderr);
  r = await berm(['publish', ref2, '--index', svc.url], { BERM_TOKEN: token });
  t.equal(r.code, 0, r.stderr);
  t.equal(git(['push', '--quiet', bare, 'main']).status, 0);
  r = await berm(['search', 'text', '--index', url]);
  t.notMatch(r.stdout, ref2, 'the copy is not refreshed behind the user');
  r = await berm(['search', 'text', '--index', url, '--update']);
  t.match(r.stdout, ref2);
  // a publisher's entry, installed and served from the git clone as index
  await roundTripInstallOnly(t, url, ref);
});

/** install from a .git index and serve it */
async function roundTripInstallOnly(t: Test, index: string, ref: string): Promise<void> {
  const config = join(TMP, 'git.toml');
  const r = await berm(['install', ref, '--index', index, '--name', 'gecho', '--config', config]);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, 'as the index published it');
  const d = await bermd(['--config', config, '--root', join(TMP, 'root-git')]);
  try {
    const res = await fetch(`${d.url}/harnesses/gecho/tools/echo_len`, { method: 'POST', body: '{"a":1}' });
    t.same(await res.json(), { done: '7' });
  } finally {
    await d.stop();
  }
}

t.test('refusals: each a clear error, nothing written', async (t) => {
  const root = join(TMP, 'refusals');
  const opTok = 'operator-token';
  const pubTok = 'publisher-token';
  // carol publishes once, after ops and bob have spent their 3 a minute: the rate limit is per
  // publisher, so her publish does not depend on how fast the refusals before it ran
  const carolTok = 'carol-token';
  const tokens = join(TMP, 'tokens2');
  writeFileSync(
    tokens,
    `${sha(Buffer.from(opTok))} ops operator\n${sha(Buffer.from(pubTok))} bob\n${sha(Buffer.from(carolTok))} carol\n`,
  );
  const svc = await indexd(['--index', root, '--tokens', tokens, '--publish-rate', '3']);
  t.teardown(() => svc.stop());
  const post = (reference: string, token?: string) =>
    fetch(`${svc.url}/harnesses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify({ reference }),
    });
  const expectRefusal = async (res: Response, status: number, why: RegExp) => {
    t.equal(res.status, status, why.source);
    const body = (await res.json()) as { error: string };
    t.same(Object.keys(body), ['error']);
    t.match(body.error, why);
  };
  // a wrong token: 401 (and the CLI says the index's words, exit 2)
  await expectRefusal(await post(`${reg.host}/berm/echo:v1`, 'wrong'), 401, /unknown token/);
  const cli = await berm(['publish', `${reg.host}/berm/echo:v1`, '--index', svc.url], {
    BERM_TOKEN: 'wrong',
  });
  t.equal(cli.code, 2);
  t.match(cli.stderr, /unknown token/);
  // a malformed reference: 400
  await expectRefusal(await post('no-registry', opTok), 400, /invalid reference/);
  // a non-berm image: a plain OCI image manifest with a container layer, 422
  const blob = Buffer.from('{}');
  const up = await fetch(`http://${reg.host}/v2/other/image/blobs/uploads/`, { method: 'POST' });
  const loc = up.headers.get('location')!;
  const put = await fetch(
    `${loc.startsWith('http') ? loc : `http://${reg.host}${loc}`}${loc.includes('?') ? '&' : '?'}digest=sha256:${sha(blob)}`,
    {
      method: 'PUT',
      body: blob,
    },
  );
  t.equal(put.status, 201);
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: `sha256:${sha(blob)}`, size: 2 },
    layers: [
      { mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: `sha256:${sha(blob)}`, size: 2 },
    ],
  });
  const pm = await fetch(`http://${reg.host}/v2/other/image/manifests/v1`, {
    method: 'PUT',
    headers: { 'content-type': 'application/vnd.oci.image.manifest.v1+json' },
    body: manifest,
  });
  t.equal(pm.status, 201);
  await expectRefusal(await post(`${reg.host}/other/image:v1`, opTok), 422, /not a berm harness/);
  // an unreachable registry: 502
  await expectRefusal(await post('127.0.0.1:1/berm/echo:v1', opTok), 502, /cannot reach/);
  t.notOk(
    existsSync(root) && spawnSync('find', [root, '-name', '*.json'], { encoding: 'utf8' }).stdout !== '',
    'nothing written',
  );
  // over the rate limit: bob has 3 a minute, all spent on refusals and one success
  const ref = `${reg.host}/berm/rated:v1`;
  t.equal((await berm(['push', ref, ECHO_FILE])).code, 0);
  t.equal((await post(ref, pubTok)).status, 200);
  t.equal((await post('bad ref', pubTok)).status, 400);
  t.equal((await post('bad ref', pubTok)).status, 400);
  const over = await post(ref.replace(':v1', ':v2'), pubTok);
  t.ok(Number(over.headers.get('retry-after')) >= 1, 'retry-after');
  await expectRefusal(over, 429, /too many publishes from bob/);
  // a takedown by a non-operator: 403, by the operator: a tombstone line, hidden from search
  const file = join(root, reg.host, 'berm', 'rated.json');
  const before = readFileSync(file, 'utf8');
  const del = (token: string) =>
    fetch(`${svc.url}/harnesses/${reg.host}/berm/rated`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ digest: `sha256:${sha(ECHO)}`, reason: 'test' }),
    });
  await expectRefusal(await del(pubTok), 403, /only an operator/);
  t.equal(readFileSync(file, 'utf8'), before, 'nothing written');
  t.equal((await del(opTok)).status, 200);
  const lines = readFileSync(file, 'utf8').trim().split('\n');
  t.equal(lines.length, 2, 'the entry stays in history');
  t.match(JSON.parse(lines[1]!), { takedown: `sha256:${sha(ECHO)}`, by: 'ops', reason: 'test' });
  t.same(await (await fetch(`${svc.url}/harnesses?q=rated`)).json(), [], 'hidden from search');

  // install refusals
  const config = join(TMP, 'refused.toml');
  // a tampered layer: same size, one byte differs in the registry's storage
  const tref = `${reg.host}/berm/tamper:v1`;
  const TEXT = readFileSync(TEXT_FILE);
  t.equal((await berm(['push', tref, TEXT_FILE])).code, 0);
  const path = reg.blobPath(`sha256:${sha(TEXT)}`);
  const stored = readFileSync(path);
  const bad = Buffer.from(stored);
  bad[bad.length >> 1] ^= 0x5a;
  writeFileSync(path, bad);
  let r = await berm(['install', tref, '--index', 'none', '--config', config]);
  writeFileSync(path, stored);
  t.equal(r.code, 2);
  t.match(r.stderr, /does not match its digest/);
  t.notOk(existsSync(config), 'no declaration written');
  t.notOk(existsSync(join(TMP, 'data', 'harnesses', 'sha256', `${sha(TEXT)}.elf`)), 'nothing stored');
  // a sha256 mismatch between the index and the registry: the tag re-pushed without publishing
  const mref = `${reg.host}/berm/moved:v1`;
  t.equal((await berm(['push', mref, ECHO_FILE])).code, 0);
  t.equal((await post(mref, carolTok)).status, 200);
  t.equal((await berm(['push', mref, TEXT_FILE])).code, 0);
  r = await berm(['install', mref, '--index', svc.url, '--config', config]);
  t.equal(r.code, 2);
  t.match(r.stderr, `the registry serves sha256:${sha(TEXT)} but the index published sha256:${sha(ECHO)}`);
  t.notOk(existsSync(config), 'no declaration written');
  // bermd refuses to start with a harness declared by reference and not installed
  writeFileSync(config, `[[harnesses]]\nname = "moved"\nsource = "oci:${mref}"\nsha256 = "${sha(TEXT)}"\n`);
  const boot = spawnSync(
    process.execPath,
    [
      join(ROOT, 'bin', 'bermd.js'),
      '--addr',
      '127.0.0.1:0',
      '--config',
      config,
      '--root',
      join(TMP, 'root-refused'),
    ],
    {
      env: { ...process.env, ...ENV },
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  t.equal(boot.status, 2);
  t.match(boot.stderr, `not installed: run berm install --config ${config}`);
  // berm install --config fetches it (the declaration pins the bytes the tag now serves)
  r = await berm(['install', '--config', config, '--index', 'none']);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /moved .* installed/);
  t.ok(existsSync(join(TMP, 'data', 'harnesses', 'sha256', `${sha(TEXT)}.elf`)));
});

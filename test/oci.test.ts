// The OCI client against a real registry: Debian's docker-registry (distribution 2.8) started by
// the test on 127.0.0.1 port 0 (test/helpers/oci-registry.ts). Push/pull round trips bit for bit;
// the registry's own answers (its Docker-Content-Digest headers, the manifest it stores) are the
// independent check of what we uploaded; a blob modified in the registry's storage is refused; an
// image index is refused by name; token authentication runs against a real token endpoint whose
// JWTs the registry verifies. Reference and challenge parsing are checked against the grammar.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { Agent, request } from 'undici';
import { fetchBearerToken } from '../src/oci/auth.js';
import {
  parseChallenges,
  parseReference,
  pullHarness,
  pushHarness,
  readArtifactManifest,
  registryBaseUrl,
  Registry,
  credentialsFromEnv,
} from '../src/oci/index.js';
import { readElf } from '../src/elf/reader.js';
import { ROOT } from './helpers/fixtures.js';
import { startRegistry, startTokenServer, type RunningRegistry } from './helpers/oci-registry.js';

const BUILD = join(ROOT, 'fixtures', 'build');
const ECHO = readFileSync(join(BUILD, 'echo-gcc-O2.elf'));
const TEXT = readFileSync(join(BUILD, 'text-gcc-O2.elf'));
const TMP = mkdtempSync(join(tmpdir(), 'berm-oci-test-'));
t.teardown(() => rmSync(TMP, { recursive: true, force: true }));

const sha = (b: Uint8Array): string => 'sha256:' + createHash('sha256').update(b).digest('hex');
const u8 = (b: Buffer): Uint8Array => new Uint8Array(b.buffer, b.byteOffset, b.byteLength);

/** The `.berm.abi` section bytes (what `berm push` reads out of the ELF). */
const abiOf = (elf: Uint8Array): Uint8Array => readElf(elf).manifest as Uint8Array;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}
function berm(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--stack-size=4000', join(ROOT, 'bin', 'berm.js'), ...args], {
      cwd: TMP,
      env: { ...process.env, BERM_REGISTRY_USER: '', BERM_REGISTRY_PASSWORD: '', GITHUB_TOKEN: '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const NOENV = { env: {} };

t.test('references', async (t) => {
  t.match(parseReference('127.0.0.1:5000/berm/echo:v1'), {
    registry: '127.0.0.1:5000',
    host: '127.0.0.1',
    repository: 'berm/echo',
    tag: 'v1',
    digest: null,
  });
  t.match(parseReference('ghcr.io/org/a.b_c__d--e/f'), { repository: 'org/a.b_c__d--e/f', tag: 'latest' });
  const d = 'sha256:' + 'a'.repeat(64);
  t.match(parseReference(`localhost/x@${d}`), { registry: 'localhost', tag: null, digest: d });
  t.match(parseReference(`localhost:1/x:t@${d}`), { tag: 't', digest: d });
  t.match(parseReference('[::1]:5000/x'), { registry: '[::1]:5000', host: '::1' });
  t.equal(registryBaseUrl(parseReference('localhost:5000/x')), 'http://localhost:5000');
  t.equal(registryBaseUrl(parseReference('127.0.0.1:5000/x')), 'http://127.0.0.1:5000');
  t.equal(registryBaseUrl(parseReference('[::1]:5000/x')), 'http://[::1]:5000');
  t.equal(registryBaseUrl(parseReference('ghcr.io/x')), 'https://ghcr.io');
  // plain http is for loopback only: another private address still gets https
  t.equal(registryBaseUrl(parseReference('10.0.0.1:5000/x')), 'https://10.0.0.1:5000');
  t.equal(registryBaseUrl(parseReference('127.0.0.2:5000/x')), 'https://127.0.0.2:5000');
  const bad: [string, RegExp][] = [
    ['echo:v1', /names no registry host/],
    ['berm/echo:v1', /'berm' is not a registry host/],
    ['ghcr.io/Org/x', /lowercase/],
    ['ghcr.io/x:-bad', /tag '-bad'/],
    ['ghcr.io/x@sha256:abc', /64 lowercase hex/],
    [`ghcr.io/x@sha512:${'a'.repeat(128)}`, /'sha512' is not supported/],
    ['ghcr.io/', /repository is empty/],
    ['ghcr.io:99999/x', /port '99999'/],
    ['gh cr.io/x', /white space/],
    ['ghcr.io/a//b', /lowercase letters/],
    ['', /empty/],
  ];
  for (const [text, re] of bad) {
    t.throws(() => parseReference(text), { name: 'OciError', kind: 'reference', message: re }, text);
  }
});

t.test('WWW-Authenticate challenges', async (t) => {
  t.same(
    parseChallenges(
      'Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull"',
    ),
    [
      {
        scheme: 'bearer',
        params: {
          realm: 'https://auth.example/token',
          service: 'registry.example',
          scope: 'repository:a/b:pull',
        },
      },
    ],
  );
  // two challenges in one header, a quoted comma and an escaped quote, token values, odd spacing
  t.same(parseChallenges('Basic realm="a, \\"b\\"" , Bearer realm=https://x/t , service = s'), [
    { scheme: 'basic', params: { realm: 'a, "b"' } },
    { scheme: 'bearer', params: { realm: 'https://x/t', service: 's' } },
  ]);
  t.same(parseChallenges('Basic YWxhZGRpbjpvcGVu=='), [
    { scheme: 'basic', params: {}, token68: 'YWxhZGRpbjpvcGVu==' },
  ]);
  t.same(parseChallenges(''), []);
  // credentials never go to a plain-http realm on another host (refused before any request)
  const agent = new Agent();
  t.teardown(() => agent.close());
  await t.rejects(
    fetchBearerToken(
      agent,
      { scheme: 'bearer', params: { realm: 'http://auth.example/token' } },
      ['x'],
      null,
    ),
    { kind: 'unauthorized', message: /plain http on a non-loopback host/ },
  );
  await t.rejects(fetchBearerToken(agent, { scheme: 'bearer', params: {} }, ['x'], null), {
    message: /without naming a realm/,
  });
  t.same(credentialsFromEnv({}, 'ghcr.io'), null);
  t.match(credentialsFromEnv({ GITHUB_TOKEN: 'g' }, 'ghcr.io'), {
    username: 'berm',
    password: 'g',
    source: 'GITHUB_TOKEN',
  });
  t.same(credentialsFromEnv({ GITHUB_TOKEN: 'g' }, 'registry.example.org'), null, 'GITHUB_TOKEN is for GHCR');
  t.same(credentialsFromEnv({ GITHUB_TOKEN: 'g' }, '127.0.0.1'), null);
  t.match(
    credentialsFromEnv(
      { GITHUB_TOKEN: 'g', BERM_REGISTRY_USER: 'u', BERM_REGISTRY_PASSWORD: 'p' },
      'registry.example.org',
    ),
    { username: 'u', password: 'p' },
  );
});

t.test('artifact manifests that are not harnesses are refused by name', async (t) => {
  const enc = (o: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(o));
  const desc = (mediaType: string, b = 'x'): object => ({ mediaType, digest: sha(Buffer.from(b)), size: 1 });
  const index = { schemaVersion: 2, mediaType: 'application/vnd.oci.image.index.v1+json', manifests: [] };
  t.throws(() => readArtifactManifest(enc(index), 'application/vnd.oci.image.index.v1+json'), {
    kind: 'not-a-harness',
    message: /image index \(application\/vnd\.oci\.image\.index\.v1\+json\)/,
  });
  t.throws(
    () =>
      readArtifactManifest(
        enc({ ...index, mediaType: undefined }),
        'application/vnd.docker.distribution.manifest.list.v2+json',
      ),
    { message: /image index \(application\/vnd\.docker\.distribution\.manifest\.list\.v2\+json\)/ },
  );
  const image = {
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    config: desc('application/vnd.oci.image.config.v1+json'),
    layers: [desc('application/vnd.oci.image.layer.v1.tar+gzip')],
  };
  t.throws(() => readArtifactManifest(enc(image), ''), { message: /container image layer/ });
  const two = {
    ...image,
    layers: [desc('application/vnd.berm.harness.v1'), desc('application/vnd.berm.harness.v1')],
  };
  t.throws(() => readArtifactManifest(enc(two), ''), { message: /2 layers where a harness is exactly one/ });
  const cfg = { ...image, layers: [desc('application/vnd.berm.harness.v1')] };
  t.throws(() => readArtifactManifest(enc(cfg), ''), {
    message: /its config is 'application\/vnd\.oci\.image\.config/,
  });
  t.throws(() => readArtifactManifest(new TextEncoder().encode('nope'), ''), { message: /not JSON/ });
});

let reg: RunningRegistry;
t.before(async () => {
  reg = await startRegistry();
});
t.teardown(async () => reg?.stop());

t.test('push and pull round trip against a real registry', async (t) => {
  const ref = parseReference(`${reg.host}/berm/echo:v1`);
  const abi = abiOf(u8(ECHO));
  const pushed = await pushHarness(ref, u8(ECHO), abi, NOENV);
  t.equal(pushed.digest, sha(ECHO), 'the layer digest is sha256 of the ELF');
  t.same(pushed.uploaded, { layer: true, config: true });

  // what the registry stored, read with a plain HTTP client
  const m = await request(`http://${reg.host}/v2/berm/echo/manifests/v1`, {
    headers: { accept: 'application/vnd.oci.image.manifest.v1+json' },
  });
  t.equal(m.statusCode, 200);
  t.equal(m.headers['docker-content-digest'], pushed.manifestDigest, "the registry's digest of the manifest");
  const manifest = (await m.body.json()) as Record<string, unknown>;
  t.same(manifest, {
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    artifactType: 'application/vnd.berm.harness.v1',
    config: { mediaType: 'application/vnd.berm.manifest.v1+json', digest: sha(abi), size: abi.length },
    layers: [{ mediaType: 'application/vnd.berm.harness.v1', digest: sha(ECHO), size: ECHO.length }],
    annotations: {},
  });
  const head = await request(`http://${reg.host}/v2/berm/echo/blobs/${sha(ECHO)}`, { method: 'HEAD' });
  await head.body.dump();
  t.equal(head.headers['docker-content-digest'], sha(ECHO));
  t.equal(Number(head.headers['content-length']), ECHO.length);
  const cfg = await request(`http://${reg.host}/v2/berm/echo/blobs/${sha(abi)}`);
  const cfgBytes = Buffer.from(await cfg.body.arrayBuffer());
  t.ok(cfgBytes.equals(Buffer.from(abi)), 'the config blob is the .berm.abi section byte for byte');
  t.ok(JSON.parse(cfgBytes.toString()).tools.length > 0, 'and it is the manifest JSON');

  const again = await pushHarness(ref, u8(ECHO), abi, NOENV);
  t.same(
    again.uploaded,
    { layer: false, config: false },
    'a second push skips the blobs the registry has (HEAD)',
  );
  t.equal(again.manifestDigest, pushed.manifestDigest);

  const pulled = await pullHarness(ref, NOENV);
  t.ok(Buffer.from(pulled.elf).equals(ECHO), 'pulled bit for bit');
  t.ok(Buffer.from(pulled.abi).equals(Buffer.from(abi)));
  const byDigest = await pullHarness(parseReference(`${reg.host}/berm/echo@${pushed.manifestDigest}`), NOENV);
  t.ok(Buffer.from(byDigest.elf).equals(ECHO), 'pulled by manifest digest');

  await t.rejects(pullHarness(parseReference(`${reg.host}/berm/echo:nope`), NOENV), {
    kind: 'not-found',
    message: /MANIFEST_UNKNOWN/,
  });
});

t.test('the CLI: push, pull -o, --json, refusals', async (t) => {
  const file = join(BUILD, 'text-gcc-O2.elf');
  const push = await berm(['push', `${reg.host}/berm/text:1.0`, file, '--json']);
  t.equal(push.code, 0, push.stderr);
  const pj = JSON.parse(push.stdout);
  t.match(pj, { status: 'ok', reference: `${reg.host}/berm/text:1.0`, digest: sha(TEXT), size: TEXT.length });

  const out = join(TMP, 'pulled.elf');
  const pull = await berm(['pull', `${reg.host}/berm/text:1.0`, '-o', out]);
  t.equal(pull.code, 0, pull.stderr);
  t.ok(readFileSync(out).equals(TEXT), 'pull -o writes the ELF bit for bit');
  t.match(pull.stdout, new RegExp(`digest +${sha(TEXT)}`));

  const piped = await new Promise<Buffer>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--stack-size=4000', join(ROOT, 'bin', 'berm.js'), 'pull', `${reg.host}/berm/text:1.0`, '-o', '-'],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const chunks: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => chunks.push(d));
    child.on('error', reject);
    child.on('close', () => resolve(Buffer.concat(chunks)));
  });
  t.ok(piped.equals(TEXT), "'-o -' writes the ELF to stdout");

  const dflt = await berm(['pull', `${reg.host}/berm/text:1.0`]);
  t.equal(dflt.code, 0, dflt.stderr);
  t.ok(
    readFileSync(join(TMP, 'text.elf')).equals(TEXT),
    'default output <name>.elf in the working directory',
  );

  // refusals: a broken harness is refused before anything is uploaded
  const noAbi = join(ROOT, 'test', 'data', 'edge.elf');
  const r1 = await berm(['push', `${reg.host}/berm/raw:1`, noAbi]);
  t.equal(r1.code, 2);
  t.match(r1.stderr, /no \.berm\.abi section/);
  const probe = await request(`http://${reg.host}/v2/berm/raw/tags/list`);
  t.equal(probe.statusCode, 404, 'nothing was pushed for the refused harness');
  await probe.body.dump();
  const notElf = join(TMP, 'not.elf');
  writeFileSync(notElf, 'hello');
  const r0 = await berm(['push', `${reg.host}/berm/raw:1`, notElf]);
  t.equal(r0.code, 2);
  t.match(r0.stderr, `berm: ${notElf}: not an ELF file`);
  const r2 = await berm(['pull', 'berm/text:1.0']);
  t.equal(r2.code, 2);
  t.match(r2.stderr, /invalid reference 'berm\/text:1\.0'.*not a registry host/);
  const r3 = await berm(['pull', `127.0.0.1:1/berm/text:1.0`]);
  t.equal(r3.code, 2);
  t.match(r3.stderr, /cannot reach http:\/\/127\.0\.0\.1:1: ECONNREFUSED/);
});

t.test('a tampered blob is refused', async (t) => {
  const ref = parseReference(`${reg.host}/berm/tamper:v1`);
  const abi = abiOf(u8(ECHO));
  await pushHarness(ref, u8(ECHO), abi, NOENV);
  const path = reg.blobPath(sha(ECHO));
  t.ok(existsSync(path), 'the layer is where distribution stores blobs');
  const stored = readFileSync(path);
  t.ok(stored.equals(ECHO));
  const bad = Buffer.from(stored);
  bad[bad.length >> 1] ^= 0x5a; // same size, one byte differs
  writeFileSync(path, bad);
  t.teardown(() => writeFileSync(path, stored));

  await t.rejects(pullHarness(ref, NOENV), {
    name: 'OciError',
    kind: 'digest-mismatch',
    message: new RegExp(`advertised ${sha(ECHO)} but served bytes hashing to ${sha(bad)}`),
  });
  const out = join(TMP, 'tampered.elf');
  const r = await berm(['pull', `${reg.host}/berm/tamper:v1`, '-o', out]);
  t.equal(r.code, 2);
  t.match(r.stderr, /does not match its digest/);
  t.notOk(existsSync(out), 'nothing was written');
});

t.test('an image index is refused by name', async (t) => {
  const ref = parseReference(`${reg.host}/berm/multi:v1`);
  const pushed = await pushHarness(ref, u8(ECHO), abiOf(u8(ECHO)), NOENV);
  const index = JSON.stringify({
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.index.v1+json',
    manifests: [
      {
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        digest: pushed.manifestDigest,
        size: (
          await (
            await fetch(`http://${reg.host}/v2/berm/multi/manifests/v1`, {
              headers: { accept: 'application/vnd.oci.image.manifest.v1+json' },
            })
          ).arrayBuffer()
        ).byteLength,
        platform: { architecture: 'riscv64', os: 'none' },
      },
    ],
  });
  const put = await request(`http://${reg.host}/v2/berm/multi/manifests/all`, {
    method: 'PUT',
    headers: { 'content-type': 'application/vnd.oci.image.index.v1+json' },
    body: index,
  });
  t.equal(put.statusCode, 201, await put.body.text());
  await t.rejects(pullHarness(parseReference(`${reg.host}/berm/multi:all`), NOENV), {
    kind: 'not-a-harness',
    message: /this is an image index \(application\/vnd\.oci\.image\.index\.v1\+json\)/,
  });
  const r = await berm(['pull', `${reg.host}/berm/multi:all`, '-o', join(TMP, 'index.elf')]);
  t.equal(r.code, 2);
  t.match(r.stderr, /image index/);
});

t.test('token authentication against a real token endpoint', async (t) => {
  const service = 'berm-test-registry';
  const issuer = 'berm-test-issuer';
  const tokens = await startTokenServer({ user: 'alice', password: 's3cret', service, issuer });
  t.teardown(() => tokens.close());
  const secured = await startRegistry({ auth: { realm: tokens.realm, service, issuer } });
  t.teardown(() => secured.stop());

  // the registry's own challenge, parsed
  const probe = await request(`http://${secured.host}/v2/`);
  await probe.body.dump();
  t.equal(probe.statusCode, 401);
  const [ch] = parseChallenges(String(probe.headers['www-authenticate']));
  t.same(ch, { scheme: 'bearer', params: { realm: tokens.realm, service } });

  const ref = parseReference(`${secured.host}/team/echo:v1`);
  const creds = { BERM_REGISTRY_USER: 'alice', BERM_REGISTRY_PASSWORD: 's3cret' };
  const pushed = await pushHarness(ref, u8(ECHO), abiOf(u8(ECHO)), { env: creds });
  t.equal(pushed.digest, sha(ECHO));
  t.match(tokens.requests.at(-1), { service, scopes: ['repository:team/echo:pull,push'], user: 'alice' });
  const pulled = await pullHarness(ref, { env: creds });
  t.ok(Buffer.from(pulled.elf).equals(ECHO), 'pulled through a bearer token');
  t.match(tokens.requests.at(-1), { scopes: ['repository:team/echo:pull'] });

  await t.rejects(pullHarness(ref, { env: {} }), {
    kind: 'unauthorized',
    message: /wants credentials \(status 401\): set BERM_REGISTRY_USER and BERM_REGISTRY_PASSWORD/,
  });
  await t.rejects(
    pullHarness(ref, { env: { BERM_REGISTRY_USER: 'alice', BERM_REGISTRY_PASSWORD: 'wrong' } }),
    {
      kind: 'unauthorized',
      message: /refused the credentials from BERM_REGISTRY_USER\/BERM_REGISTRY_PASSWORD/,
    },
  );
  // GITHUB_TOKEN is GHCR's: this registry's token endpoint is not asked with it
  const before = tokens.requests.length;
  await t.rejects(pullHarness(ref, { env: { GITHUB_TOKEN: 'ghp_not_for_you' } }), {
    kind: 'unauthorized',
    message: /wants credentials \(status 401\)/,
  });
  t.ok(tokens.requests.length > before, 'the token endpoint was asked');
  t.notOk(
    tokens.requests.slice(before).some((r) => r.user !== null),
    'anonymously: GITHUB_TOKEN was not sent',
  );
  const r = await berm(['pull', `${secured.host}/team/echo:v1`, '-o', join(TMP, 'tok.elf')], creds);
  t.equal(r.code, 0, r.stderr);
  t.ok(readFileSync(join(TMP, 'tok.elf')).equals(ECHO));
});

t.test('Basic challenges and refusals from a plain HTTP server', async (t) => {
  // a registry front that wants Basic credentials (what htpasswd-protected registries answer)
  let seen: string | undefined;
  const srv = createServer((req, res) => {
    seen = req.headers.authorization;
    if (req.headers.authorization !== 'Basic ' + Buffer.from('bob:pw').toString('base64')) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="registry"' }).end();
      return;
    }
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end('{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}');
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => srv.close(() => r())));
  const port = (srv.address() as AddressInfo).port;
  const ref = parseReference(`127.0.0.1:${port}/x/y:z`);
  await t.rejects(Registry.open(ref, 'pull', { env: {} }), {
    kind: 'unauthorized',
    message: /wants a user name and password: set BERM_REGISTRY_USER/,
  });
  await t.rejects(pullHarness(ref, { env: { BERM_REGISTRY_USER: 'bob', BERM_REGISTRY_PASSWORD: 'pw' } }), {
    kind: 'not-found',
    message: /MANIFEST_UNKNOWN: manifest unknown/,
  });
  t.equal(seen, 'Basic ' + Buffer.from('bob:pw').toString('base64'));
  // a registry that is not GHCR asking for Basic credentials never gets GITHUB_TOKEN (every
  // GitHub Actions job has one; this registry could be anyone's)
  seen = undefined;
  await t.rejects(pullHarness(ref, { env: { GITHUB_TOKEN: 'ghp_not_for_you' } }), {
    kind: 'unauthorized',
    message: /wants a user name and password: .*GITHUB_TOKEN is sent to ghcr\.io only/,
  });
  t.equal(seen, undefined, 'no Authorization header was sent');
});

t.test('a registry that drips its answer is cut at the exchange deadline', async (t) => {
  // answers /v2/ at once, then sends the manifest (or, once the manifest came whole, the blob)
  // one byte every 200 ms: undici's timeouts are per wait (120 s between chunks), so this held
  // berm pull for as long as the registry liked
  const elf = u8(ECHO);
  const abi = abiOf(elf);
  const cfg = {
    mediaType: 'application/vnd.berm.manifest.v1+json',
    digest: sha(Buffer.from(abi)),
    size: abi.length,
  };
  const layer = { mediaType: 'application/vnd.berm.harness.v1', digest: sha(ECHO), size: ECHO.length };
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      artifactType: 'application/vnd.berm.harness.v1',
      config: cfg,
      layers: [layer],
    }),
  );
  let dripManifest = true;
  const timers = new Set<NodeJS.Timeout>();
  const srv = createServer((req, res) => {
    if (req.url === '/v2/') return void res.writeHead(200).end('{}');
    const isManifest = req.url!.includes('/manifests/');
    const body = isManifest ? manifest : req.url!.endsWith(cfg.digest) ? Buffer.from(abi) : ECHO;
    res.writeHead(200, {
      'content-type': isManifest ? 'application/vnd.oci.image.manifest.v1+json' : 'application/octet-stream',
      'content-length': String(body.length),
    });
    if (isManifest && !dripManifest) return void res.end(body);
    let i = 0;
    const iv = setInterval(() => {
      if (res.destroyed || i >= body.length) {
        clearInterval(iv);
        timers.delete(iv);
        if (!res.destroyed) res.end();
        return;
      }
      res.write(body.subarray(i, ++i));
    }, 200);
    timers.add(iv);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    for (const iv of timers) clearInterval(iv);
    srv.closeAllConnections();
    return new Promise<void>((r) => srv.close(() => r()));
  });
  const ref = parseReference(`127.0.0.1:${(srv.address() as AddressInfo).port}/slow/echo:v1`);
  const attempt = async (): Promise<{ error: unknown; ms: number }> => {
    const t0 = Date.now();
    const error = await Promise.race([
      pullHarness(ref, { env: {}, exchangeBaseMs: 1_500 }).then(
        () => null,
        (e: unknown) => e,
      ),
      new Promise((r) => setTimeout(() => r('still waiting after 15 s'), 15_000)),
    ]);
    return { error, ms: Date.now() - t0 };
  };
  const m = await attempt();
  t.match(m.error, { kind: 'unreachable', message: /manifests\/v1: no complete answer within 1500 ms/ });
  t.ok(m.ms < 8_000, `the manifest's drip was cut after ${m.ms} ms`);
  // a blob's deadline adds its size at 64 KiB/s: the config blob (a few hundred bytes) gets ~1.5 s
  dripManifest = false;
  const b = await attempt();
  t.match(b.error, {
    kind: 'unreachable',
    message: /blobs\/sha256:[0-9a-f]{64}: no complete answer within 15\d\d ms/,
  });
  t.ok(b.ms < 8_000, `the blob's drip was cut after ${b.ms} ms`);
});

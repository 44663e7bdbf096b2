// A real OCI registry for tests: Debian's docker-registry (distribution 2.8) started on 127.0.0.1
// port 0 with its storage in a temporary directory, optionally with token authentication (a
// bearer token server on loopback issuing ES256 JWTs signed by the committed test key, whose
// self-signed certificate is the registry's root bundle). .ci/run installs the package.
import { spawn, type ChildProcess } from 'node:child_process';
import { createPrivateKey, randomUUID, sign, X509Certificate } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export const REGISTRY_BIN = '/usr/bin/docker-registry';
const DATA = resolve(import.meta.dirname, '..', 'data', 'oci');

export interface RunningRegistry {
  /** `127.0.0.1:<port>` */
  host: string;
  port: number;
  /** the storage root directory (blobs under docker/registry/v2/blobs/sha256/..) */
  root: string;
  /** the path of a stored blob's data file */
  blobPath(digest: string): string;
  stop(): Promise<void>;
}

export interface TokenAuth {
  realm: string;
  service: string;
  issuer: string;
}

/** Start the registry; resolves once it answers GET /v2/. */
export async function startRegistry(opts: { auth?: TokenAuth } = {}): Promise<RunningRegistry> {
  if (!existsSync(REGISTRY_BIN)) {
    throw new Error(`${REGISTRY_BIN} is missing: install Debian's docker-registry package (.ci/run does)`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'berm-registry-'));
  const root = join(dir, 'storage');
  const lines = [
    'version: 0.1',
    'log:',
    '  level: info',
    '  formatter: text',
    'storage:',
    '  filesystem:',
    `    rootdirectory: ${root}`,
    '  delete:',
    '    enabled: true',
    'http:',
    '  addr: 127.0.0.1:0',
    `  secret: ${randomUUID()}`,
  ];
  if (opts.auth) {
    lines.push(
      'auth:',
      '  token:',
      `    realm: ${opts.auth.realm}`,
      `    service: ${opts.auth.service}`,
      `    issuer: ${opts.auth.issuer}`,
      `    rootcertbundle: ${join(DATA, 'token-signer.pem')}`,
    );
  }
  const config = join(dir, 'config.yml');
  writeFileSync(config, lines.join('\n') + '\n');
  const child: ChildProcess = spawn(REGISTRY_BIN, ['serve', config], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const port = await new Promise<number>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`docker-registry did not start in 30 s:\n${log}`)), 30_000);
    const onData = (b: Buffer): void => {
      log += b.toString();
      const m = /listening on 127\.0\.0\.1:(\d+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        res(Number(m[1]));
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => {
      clearTimeout(timer);
      rej(new Error(`docker-registry exited with ${code}:\n${log}`));
    });
  });
  // keep draining its output so it never blocks on a full pipe
  child.stdout!.resume();
  child.stderr!.resume();
  for (let i = 0; ; i++) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/v2/`);
      await r.arrayBuffer();
      break;
    } catch (e) {
      if (i > 100) throw e;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    host: `127.0.0.1:${port}`,
    port,
    root,
    blobPath: (digest) => {
      const hex = digest.replace(/^sha256:/, '');
      return join(root, 'docker', 'registry', 'v2', 'blobs', 'sha256', hex.slice(0, 2), hex, 'data');
    },
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(t);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A request the token server saw. */
export interface TokenRequest {
  service: string | null;
  scopes: string[];
  /** the Basic user name, or null when anonymous */
  user: string | null;
}

export interface RunningTokenServer {
  realm: string;
  requests: TokenRequest[];
  close(): Promise<void>;
}

const b64url = (b: Buffer | string): string => Buffer.from(b).toString('base64url');

/**
 * A token endpoint per the distribution token spec: GET /token?service=..&scope=.., Basic
 * credentials `user:password` required, answering `{"token": <JWT>}` granting the scopes asked
 * for. The JWT is ES256 with the signer certificate in `x5c`, as distribution verifies it.
 */
export async function startTokenServer(opts: {
  user: string;
  password: string;
  service: string;
  issuer: string;
}): Promise<RunningTokenServer> {
  const key = createPrivateKey(readFileSync(join(DATA, 'token-signer.key')));
  const cert = new X509Certificate(readFileSync(join(DATA, 'token-signer.pem')));
  const requests: TokenRequest[] = [];
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const auth = req.headers.authorization ?? '';
    let user: string | null = null;
    let ok = false;
    if (auth.startsWith('Basic ')) {
      const [u, ...p] = Buffer.from(auth.slice(6), 'base64').toString().split(':');
      user = u;
      ok = u === opts.user && p.join(':') === opts.password;
    }
    const scopes = url.searchParams.getAll('scope');
    requests.push({ service: url.searchParams.get('service'), scopes, user });
    if (url.pathname !== '/token') {
      res.writeHead(404).end();
      return;
    }
    if (!ok) {
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"details":"bad credentials"}');
      return;
    }
    const now = Math.floor(Date.now() / 1000);
    const access = scopes.map((s) => {
      const [type, ...rest] = s.split(':');
      const actions = rest.pop() ?? '';
      return { type, name: rest.join(':'), actions: actions.split(',') };
    });
    const header = { typ: 'JWT', alg: 'ES256', x5c: [cert.raw.toString('base64')] };
    const claims = {
      iss: opts.issuer,
      sub: user,
      aud: opts.service,
      exp: now + 600,
      nbf: now - 60,
      iat: now,
      jti: randomUUID(),
      access,
    };
    const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
    const sig = sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ token: `${input}.${b64url(sig)}`, expires_in: 600 }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    realm: `http://127.0.0.1:${port}/token`,
    requests,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

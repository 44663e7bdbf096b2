// Real bermd processes sharing one PostgreSQL store (`--store postgres://...`), for the scale-out
// tests and benchmark: start (resolves once the daemon listens, with its URL), SIGKILL, SIGTERM,
// plain HTTP helpers that never throw on a dead daemon, and a TCP proxy that can cut a daemon off
// from the database and let it back.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { join, resolve } from 'node:path';

export const REPO = resolve(import.meta.dirname, '..', '..');

/** A running bermd child process. */
export interface Bermd {
  proc: ChildProcess;
  url: string;
  /** everything it wrote on stderr so far */
  log: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Options of {@link startBermd}. */
export interface BermdOptions {
  root: string;
  store?: string;
  cacheDir?: string;
  config?: string;
  workers?: number;
  leaseMs?: number;
  extra?: string[];
  env?: Record<string, string>;
  /** the open-file limit to start it under (`ulimit -n`, through bash); default: this process's */
  openFiles?: number;
}

/** The argument list of bermd for `o` (port 0 on loopback). */
export function bermdArgs(o: BermdOptions): string[] {
  const a = [join(REPO, 'bin/bermd.js'), '--addr', '127.0.0.1:0', '--root', o.root];
  if (o.store !== undefined) a.push('--store', o.store);
  if (o.cacheDir !== undefined) a.push('--cache-dir', o.cacheDir);
  if (o.config !== undefined) a.push('--config', o.config);
  a.push('--workers', String(o.workers ?? 1));
  if (o.leaseMs !== undefined) a.push('--lease', String(o.leaseMs));
  return [...a, ...(o.extra ?? [])];
}

/**
 * Spawn bermd and resolve once it prints its URL.
 * @throws when it exits first or does not listen within `timeoutMs` (the message holds its log)
 */
export function startBermd(o: BermdOptions, timeoutMs = 90_000): Promise<Bermd> {
  const [cmd, args] =
    o.openFiles === undefined
      ? [process.execPath, bermdArgs(o)]
      : ['bash', ['-c', `ulimit -n ${o.openFiles} && exec "$@"`, 'bash', process.execPath, ...bermdArgs(o)]];
  const proc = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...o.env } });
  let err = '';
  proc.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
    proc.once('exit', (code, signal) => res({ code, signal })),
  );
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`bermd did not listen within ${timeoutMs} ms:\n${err}`));
    }, timeoutMs);
    const onData = () => {
      const m = /listening on (http:\/\/\S+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        proc.stderr!.off('data', onData);
        resolve({ proc, url: m[1]!, log: () => err, exited });
      }
    };
    proc.stderr!.on('data', onData);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`bermd exited (${code ?? signal}) before listening:\n${err}`));
    });
  });
}

/** Run bermd to its exit (for refused boots). */
export async function runBermd(
  o: BermdOptions,
  timeoutMs = 60_000,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }> {
  const proc = spawn(process.execPath, bermdArgs(o), { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  proc.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
  const [code, signal] = (await once(proc, 'exit')) as [number | null, NodeJS.Signals | null];
  clearTimeout(timer);
  return { code, signal, stderr: err };
}

/** SIGKILL (or `signal`) and wait for the exit. */
export async function stopBermd(b: Bermd, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (b.proc.exitCode === null && b.proc.signalCode === null) b.proc.kill(signal);
  await b.exited;
}

/** An HTTP answer, or the network error as status 0. */
export interface Answer {
  status: number;
  body: Record<string, unknown>;
  /** the chain id of an invocation (header x-berm-chain), when given */
  chain?: string;
}

/** fetch that never throws: a refused connection or a reset is `{status: 0}`. */
export async function http(url: string, method: string, body?: unknown): Promise<Answer> {
  try {
    const r = await fetch(url, {
      method,
      ...(body === undefined
        ? {}
        : body instanceof Uint8Array
          ? { body }
          : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
      signal: AbortSignal.timeout(60_000),
    });
    const text = await r.text();
    let parsed: Record<string, unknown> = {};
    try {
      parsed = text === '' ? {} : (JSON.parse(text) as Record<string, unknown>);
    } catch {
      parsed = { text };
    }
    const chain = r.headers.get('x-berm-chain');
    return { status: r.status, body: parsed, ...(chain !== null ? { chain } : {}) };
  } catch (e) {
    return { status: 0, body: { error: (e as Error).message } };
  }
}

/**
 * A TCP proxy on 127.0.0.1 in front of the database: {@link cut} closes every connection and
 * refuses new ones (the database "goes away" for the daemons behind it), {@link restore} accepts
 * again on the same port.
 */
export class TcpProxy {
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  /** Listen (on the same port as before once one was chosen). */
  async listen(): Promise<number> {
    const s = createServer((client) => {
      const upstream = connect(this.targetPort, this.targetHost);
      this.sockets.add(client);
      this.sockets.add(upstream);
      const drop = () => {
        client.destroy();
        upstream.destroy();
        this.sockets.delete(client);
        this.sockets.delete(upstream);
      };
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    s.listen(this.port, '127.0.0.1');
    await once(s, 'listening');
    this.server = s;
    this.port = (s.address() as { port: number }).port;
    return this.port;
  }

  /** Close every connection and stop accepting. */
  async cut(): Promise<void> {
    const s = this.server;
    this.server = null;
    for (const x of this.sockets) x.destroy();
    this.sockets.clear();
    if (s) await new Promise<void>((res) => s.close(() => res()));
  }

  /** Accept again on the same port. */
  async restore(): Promise<void> {
    await this.listen();
  }
}

/** `url` with its host and port replaced (to point a daemon at a proxy). */
export function viaPort(url: string, port: number): string {
  const u = new URL(url);
  u.hostname = '127.0.0.1';
  u.port = String(port);
  return u.toString();
}

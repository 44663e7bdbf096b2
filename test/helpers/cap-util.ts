// Helpers for capability tests: field encoding, contexts, reply inspection, a local HTTP server.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { CapabilityContext, CapabilityReply, Grant } from '../../src/capabilities/types.js';

export const enc = (s: string): Uint8Array => new TextEncoder().encode(s);
export const dec = (b: Uint8Array): string => new TextDecoder().decode(b);

/** Fields from strings (UTF-8) or raw bytes. */
export function F(...parts: (string | Uint8Array)[]): Uint8Array[] {
  return parts.map((p) => (typeof p === 'string' ? enc(p) : p));
}

export function ctx(grant: Grant, extra: Partial<CapabilityContext> = {}): CapabilityContext {
  return { harness: 'test', grant, depth: 0, ...extra };
}

/** The single text field of a successful reply; throws with the reply otherwise. */
export function okText(r: CapabilityReply): string {
  if (!('fields' in r)) throw new Error(`expected fields, got ${JSON.stringify(r)}`);
  if (r.fields.length !== 1) throw new Error(`expected one field, got ${r.fields.length}`);
  return dec(r.fields[0]!);
}

/** A scratch tree: <base>/root (the grant) and <base>/outside with a secret, plus cleanup. */
export function scratch(): {
  base: string;
  root: string;
  outside: string;
  secret: string;
  cleanup: () => void;
} {
  const base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'berm-cap-')));
  const root = path.join(base, 'root');
  const outside = path.join(base, 'outside');
  fs.mkdirSync(root);
  fs.mkdirSync(outside);
  const secret = path.join(outside, 'secret.txt');
  fs.writeFileSync(secret, 'TOP SECRET\n');
  return { base, root, outside, secret, cleanup: () => fs.rmSync(base, { recursive: true, force: true }) };
}

// The server runs in its own thread: capability calls block the test's thread in Atomics.wait,
// so a server on that thread could never answer. It listens on 127.0.0.1 only.
const SERVER = `
const http = require('node:http');
const { parentPort } = require('node:worker_threads');
const server = http.createServer((req, res) => {
  const u = new URL(req.url, 'http://x');
  if (u.pathname === '/hang') return; // never answers
  if (u.pathname === '/redirect') {
    res.writeHead(302, { location: u.searchParams.get('to') || 'http://evil.example/' });
    return res.end('moved');
  }
  if (u.pathname === '/big') {
    const n = Number(u.searchParams.get('n') || 1000000);
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    return res.end(Buffer.alloc(n, 97));
  }
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    res.setHeader('set-cookie', ['a=1', 'b=2']);
    res.writeHead(u.pathname === '/teapot' ? 418 : 200, { 'content-type': 'application/json', 'x-seen-host': req.headers.host });
    res.end(JSON.stringify({ method: req.method, path: req.url, headers: req.headers, body: Buffer.concat(chunks).toString() }));
  });
});
server.listen(0, '127.0.0.1', () => parentPort.postMessage(server.address().port));
`;

export async function startServer(): Promise<{ port: number; stop: () => Promise<void> }> {
  const w = new Worker(SERVER, { eval: true });
  const port = await new Promise<number>((resolve, reject) => {
    w.once('message', resolve);
    w.once('error', reject);
  });
  return { port, stop: async () => void (await w.terminate()) };
}

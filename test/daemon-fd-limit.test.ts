// --max-connections against the open-file limit: a cap the process cannot reach is clamped at
// boot to the soft limit less a reserve, with one warning, so connections beyond it still get
// bermd's 503 instead of kernel resets. bermd runs as a process under `ulimit -n 256`.
import { mkdtempSync } from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { FD_RESERVE, clampConnections, openFileLimit } from '../src/daemon/fd-limit.js';
import { startBermd, stopBermd } from './helpers/cluster.js';
import { TEST_CACHE } from './helpers/fixtures.js';

const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max stack size            8388608              unlimited            bytes
Max open files            256                  4096                 files
Max processes             63704                63704                processes
`;

t.test('the soft open-file limit is read from /proc/self/limits; the cap is clamped below it', async (t) => {
  t.equal(openFileLimit(LIMITS), 256);
  t.equal(openFileLimit(LIMITS.replace(/256 {18}4096/, 'unlimited            unlimited')), null);
  t.equal(openFileLimit('garbage'), null);
  if (process.platform === 'linux') t.type(openFileLimit(), 'number', 'this process: a number');
  t.same(clampConnections(1024, null), { value: 1024, warning: null }, 'unknown limit: no clamp');
  t.same(clampConnections(1024, 1024 + FD_RESERVE), { value: 1024, warning: null });
  const c = clampConnections(1024, 256);
  t.equal(c.value, 256 - FD_RESERVE);
  t.match(c.warning, /max-connections lowered from 1024 to 128: the open-file limit is 256/);
  t.match(c.warning, /ulimit -n 1152/);
  t.match(c.warning, /--max-connections 128/);
  t.equal(clampConnections(10, 40).value, 1, 'never below one');
});

/** One raw HTTP/1.1 GET /health on a new connection: the status, and whether it then closed. */
function probe(port: number): Promise<{ sock: net.Socket; status: number; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    const closed = new Promise<void>((r) => sock.once('close', () => r()));
    let got = '';
    sock.on('data', (c: Buffer) => {
      got += c.toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3}) /.exec(got);
      if (m && got.includes('\r\n\r\n')) resolve({ sock, status: Number(m[1]), closed });
    });
    sock.once('error', reject);
    sock.write('GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n');
  });
}

t.test('under ulimit -n 256: max-connections 128 with a warning; the 129th gets 503', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'bermd-fd-'));
  const b = await startBermd({ root, cacheDir: TEST_CACHE, openFiles: 256 });
  t.teardown(() => stopBermd(b, 'SIGTERM'));
  const err = b.log();
  t.match(err, /max-connections +128 \(asked 1024; open-file limit 256\) +\(default\)/);
  const warnings = err.split('\n').filter((l) => /warning: max-connections lowered/.test(l));
  t.equal(warnings.length, 1, 'one warning line');
  t.match(
    warnings[0],
    /from 1024 to 128: the open-file limit is 256 .*ulimit -n 1152.*--max-connections 128/,
  );

  const port = Number(new URL(b.url).port);
  const kept: net.Socket[] = [];
  for (let i = 0; i < 128; i++) {
    const p = await probe(port);
    if (p.status !== 200) t.fail(`connection ${i + 1}: ${p.status}`);
    kept.push(p.sock);
  }
  t.pass('128 connections served and kept open');
  for (let i = 0; i < 8; i++) {
    const p = await probe(port);
    t.equal(p.status, 503, `connection ${129 + i}: bermd's 503, not a reset`);
    await p.closed;
  }
  for (const s of kept) s.destroy();
  // bermd may not have seen every close yet: a new connection is served within a few tries
  let status = 0;
  for (let i = 0; i < 100 && status !== 200; i++) {
    if (i > 0) await new Promise((r) => setTimeout(r, 20));
    status = (await fetch(`${b.url}/health`)).status;
  }
  t.equal(status, 200, 'served again once connections closed');
});

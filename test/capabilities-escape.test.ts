// The escape suite: hostile requests, each refused (or failing) with a
// clear message, and nothing outside the root read or touched. Handlers are called directly with
// encoded fields; HTTP goes only to a local server on 127.0.0.1.
import { execFileSync } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import t from 'tap';
import { CAPABILITIES, type CapabilityReply } from '../src/capabilities/index.js';
import { shutdownBridge } from '../src/sync/bridge.js';
import { openVerified } from '../src/capabilities/common/confine.js';
import { closeStores } from '../src/capabilities/storage/index.js';
import { F, ctx, dec, okText, scratch, startServer } from './helpers/cap-util.js';

const fsc = CAPABILITIES.fs!.calls;
const execc = CAPABILITIES.exec!.calls;
const httpc = CAPABILITIES.http!.calls;
const callc = CAPABILITIES.call!.calls;
const store = CAPABILITIES.storage!.calls;

t.teardown(() => {
  shutdownBridge();
  closeStores();
});

/** Content and metadata digest of every entry under `dir` (symlinks not followed). */
function snapshot(dir: string): string {
  const h = crypto.createHash('sha256');
  const walk = (d: string) => {
    for (const name of fs.readdirSync(d).sort()) {
      const p = path.join(d, name);
      const st = fs.lstatSync(p);
      h.update(`${p}\0${st.mode}\0${st.size}\0${st.mtimeMs}\0`);
      if (st.isDirectory()) walk(p);
      else if (st.isFile()) h.update(fs.readFileSync(p));
    }
  };
  walk(dir);
  return h.digest('hex');
}

function replyText(r: CapabilityReply): string {
  if ('fields' in r) return r.fields.map(dec).join('\n');
  return 'refused' in r ? r.refused : r.error;
}

/** A hostile case: the handler's reply must match `expect` and must not leak the secret. */
interface Case {
  name: string;
  run: () => CapabilityReply;
  expect: { refused: RegExp } | { error: RegExp } | ((r: CapabilityReply) => boolean);
}

t.test('escape suite', async (t) => {
  const s = scratch();
  t.teardown(s.cleanup);
  const { root, outside, secret, base } = s;
  fs.writeFileSync(path.join(root, 'ok.txt'), 'fine\n');
  fs.mkdirSync(path.join(root, 'a'));
  fs.mkdirSync(path.join(base, 'rootevil'));
  fs.writeFileSync(path.join(base, 'rootevil', 'secret.txt'), 'TOP SECRET sibling\n');
  fs.symlinkSync(secret, path.join(root, 'link-out'));
  fs.symlinkSync(outside, path.join(root, 'dir-out'));
  fs.symlinkSync('../outside/secret.txt', path.join(root, 'rel-link-out'));
  fs.symlinkSync('/proc/self/environ', path.join(root, 'env-link'));
  fs.symlinkSync('/dev/zero', path.join(root, 'zero-link'));
  execFileSync('mkfifo', [path.join(root, 'fifo')]);
  fs.writeFileSync(path.join(root, 'evil-regex.txt'), 'a'.repeat(40) + 'b\n');
  const before = snapshot(outside);
  const siblingBefore = snapshot(path.join(base, 'rootevil'));

  const c = ctx({ root });
  const R = (p: string | Uint8Array) => () => fsc['berm.fs.read']!(F(p, '0', '0'), c);
  const W = (p: string) => () => fsc['berm.fs.write']!(F(p, 'PWNED'), c);
  const X =
    (cmd: string, cwd: string, ...env: string[]) =>
    () =>
      execc['berm.exec.run']!(F(cmd, cwd, ...env), c);

  const srv = await startServer();
  t.teardown(srv.stop);
  const P = srv.port;
  const hc = ctx(
    { hosts: ['127.0.0.1', '*.wikipedia.org', 'localhost'] },
    { limits: { httpTimeoutMs: 700, httpMaxResponseBody: 1000, httpMaxRequestBody: 100 } },
  );
  const H =
    (method: string, url: string, body = '', ...hdr: string[]) =>
    () =>
      httpc['berm.http.fetch']!(F(method, url, body, ...hdr), hc);

  const refusedOutside = { refused: /outside the granted root|contains '\.\.'/ };
  const cases: Case[] = [
    // path traversal variants
    { name: 'read ../', run: R('../outside/secret.txt'), expect: refusedOutside },
    { name: 'read deep ../', run: R('../../../../../../etc/passwd'), expect: refusedOutside },
    { name: 'read a/../../', run: R('a/../../outside/secret.txt'), expect: refusedOutside },
    { name: 'read ./../', run: R('./../outside/secret.txt'), expect: refusedOutside },
    { name: 'read ..', run: R('..'), expect: refusedOutside },
    { name: 'read a/..', run: R('a/..'), expect: refusedOutside },
    { name: 'read backslash ..', run: R('a\\..\\..\\outside\\secret.txt'), expect: refusedOutside },
    { name: 'read a//..//..', run: R('a//..//..//outside/secret.txt'), expect: refusedOutside },
    // absolute paths
    { name: 'read /etc/passwd', run: R('/etc/passwd'), expect: refusedOutside },
    { name: 'read absolute outside', run: R(secret), expect: refusedOutside },
    {
      name: 'read sibling sharing the prefix',
      run: R(path.join(base, 'rootevil', 'secret.txt')),
      expect: refusedOutside,
    },
    { name: 'read /proc/self/environ', run: R('/proc/self/environ'), expect: refusedOutside },
    // NUL bytes and bad encodings
    { name: 'read NUL', run: R('ok.txt\0../../outside/secret.txt'), expect: { refused: /NUL/ } },
    { name: 'read invalid UTF-8', run: R(new Uint8Array([0x6f, 0xff, 0x2e])), expect: { refused: /UTF-8/ } },
    // symlinks pointing out
    { name: 'read symlink to outside file', run: R('link-out'), expect: { refused: /resolves outside/ } },
    { name: 'read relative symlink out', run: R('rel-link-out'), expect: { refused: /resolves outside/ } },
    {
      name: 'read through symlinked dir',
      run: R('dir-out/secret.txt'),
      expect: { refused: /resolves outside/ },
    },
    {
      name: 'read symlink to /proc/self/environ',
      run: R('env-link'),
      expect: { refused: /resolves outside/ },
    },
    { name: 'read symlink to /dev/zero', run: R('zero-link'), expect: { refused: /resolves outside/ } },
    { name: 'read a FIFO (no hang)', run: R('fifo'), expect: { refused: /not a regular file/ } },
    // writes
    { name: 'write ../', run: W('../outside/pwned.txt'), expect: refusedOutside },
    { name: 'write absolute outside', run: W(path.join(outside, 'pwned.txt')), expect: refusedOutside },
    {
      name: 'write through symlink to outside file',
      run: W('link-out'),
      expect: { refused: /resolves outside/ },
    },
    {
      name: 'write into symlinked dir',
      run: W('dir-out/pwned.txt'),
      expect: { refused: /resolves outside/ },
    },
    {
      name: 'write into symlinked dir, new subdir',
      run: W('dir-out/new/pwned.txt'),
      expect: { refused: /resolves outside/ },
    },
    { name: 'write NUL', run: W('x\0y'), expect: { refused: /NUL/ } },
    { name: 'write the FIFO', run: W('fifo'), expect: { refused: /not a regular file/ } },
    {
      name: 'write oversized',
      run: () =>
        fsc['berm.fs.write']!(F('big', 'x'.repeat(11)), ctx({ root }, { limits: { fsWriteMax: 10 } })),
      expect: { refused: /limit is 10/ },
    },
    {
      name: 'read negative offset',
      run: () => fsc['berm.fs.read']!(F('ok.txt', '-1', '0'), c),
      expect: { refused: /below 0/ },
    },
    {
      name: 'read missing fields',
      run: () => fsc['berm.fs.read']!(F('ok.txt'), c),
      expect: { refused: /expected fields/ },
    },
    // glob and grep
    { name: 'glob ../*', run: () => fsc['berm.fs.glob']!(F('../*'), c), expect: { refused: /'\.\.'/ } },
    { name: 'glob /etc/*', run: () => fsc['berm.fs.glob']!(F('/etc/*'), c), expect: { refused: /relative/ } },
    {
      name: 'glob ** does not descend symlinked dirs',
      run: () => fsc['berm.fs.glob']!(F('**'), c),
      expect: (r) => 'fields' in r && !okText(r).includes('secret') && okText(r).includes('dir-out'),
    },
    {
      name: 'grep does not read through symlinks',
      run: () => fsc['berm.fs.grep']!(F('SECRET', '**'), c),
      expect: (r) => 'fields' in r && okText(r) === '',
    },
    {
      name: 'grep path_glob ..',
      run: () => fsc['berm.fs.grep']!(F('x', '../**'), c),
      expect: { refused: /'\.\.'/ },
    },
    {
      name: 'grep catastrophic regex is stopped by its timeout',
      run: () =>
        fsc['berm.fs.grep']!(
          F('^(a+)+$', 'evil-regex.txt'),
          ctx({ root }, { limits: { grepTimeoutMs: 300 } }),
        ),
      expect: { error: /timed out after 300 ms/ },
    },
    {
      name: 'grep bad regex',
      run: () => fsc['berm.fs.grep']!(F('(', '**'), c),
      expect: { refused: /bad regular expression/ },
    },
    // exec
    { name: 'exec cwd ..', run: X('cat secret.txt', '..'), expect: refusedOutside },
    { name: 'exec cwd absolute outside', run: X('cat secret.txt', outside), expect: refusedOutside },
    { name: 'exec cwd /', run: X('ls', '/'), expect: refusedOutside },
    {
      name: 'exec cwd symlink out',
      run: X('cat secret.txt', 'dir-out'),
      expect: { refused: /resolves outside/ },
    },
    { name: 'exec cwd NUL', run: X('ls', 'a\0/..'), expect: { refused: /NUL/ } },
    { name: 'exec cwd /proc', run: X('ls', '/proc/self'), expect: refusedOutside },
    { name: 'exec env key with =', run: X('env', '', 'A=B', 'C'), expect: { refused: /holds '='/ } },
    { name: 'exec odd env fields', run: X('env', '', 'A'), expect: { refused: /pairs/ } },
    {
      name: 'exec sees no host environment',
      run: () => {
        process.env.BERM_ESCAPE_CANARY = 'TOP SECRET canary';
        try {
          return X('env', '')();
        } finally {
          delete process.env.BERM_ESCAPE_CANARY;
        }
      },
      expect: (r) => 'fields' in r && !okText(r).includes('canary'),
    },
    // http
    {
      name: 'http undeclared host',
      run: H('GET', 'http://evil.example/'),
      expect: { refused: /host evil\.example is not among/ },
    },
    {
      name: 'http no hosts granted',
      run: () => httpc['berm.http.fetch']!(F('GET', `http://127.0.0.1:${P}/`, ''), ctx({})),
      expect: { refused: /no hosts are granted/ },
    },
    {
      name: 'http undeclared IP',
      run: H('GET', `http://127.0.0.2:${P}/`),
      expect: { refused: /IP literal 127\.0\.0\.2/ },
    },
    {
      name: 'http decimal IP',
      run: H('GET', `http://2130706434:${P}/`),
      expect: { refused: /IP literal 127\.0\.0\.2/ },
    },
    {
      name: 'http hex IP',
      run: H('GET', `http://0x7f.2:${P}/`),
      expect: { refused: /IP literal 127\.0\.0\.2/ },
    },
    {
      name: 'http IPv6 loopback',
      run: H('GET', `http://[::1]:${P}/`),
      expect: { refused: /IP literal \[::1\]/ },
    },
    {
      name: 'http IPv4-mapped IPv6',
      run: H('GET', `http://[::ffff:127.0.0.1]:${P}/`),
      expect: { refused: /IP literal/ },
    },
    {
      name: 'http userinfo trick',
      run: H('GET', `http://127.0.0.1:${P}@evil.example/`),
      expect: { refused: /userinfo/ },
    },
    { name: 'http user:pass@', run: H('GET', `http://u:p@127.0.0.1:${P}/`), expect: { refused: /userinfo/ } },
    {
      name: 'http backslash trick',
      run: H('GET', 'http://evil.example\\@127.0.0.1/'),
      expect: { refused: /evil\.example/ },
    },
    { name: 'http file scheme', run: H('GET', 'file:///etc/passwd'), expect: { refused: /scheme file/ } },
    { name: 'http ftp scheme', run: H('GET', 'ftp://127.0.0.1/'), expect: { refused: /scheme ftp/ } },
    { name: 'http data scheme', run: H('GET', 'data:text/plain,hi'), expect: { refused: /scheme data/ } },
    {
      name: 'http wildcard vs bare domain',
      run: H('GET', 'https://wikipedia.org/'),
      expect: { refused: /not among/ },
    },
    {
      name: 'http suffix trick',
      run: H('GET', 'https://evilwikipedia.org/'),
      expect: { refused: /not among/ },
    },
    {
      name: 'http declared name as prefix',
      run: H('GET', 'https://en.wikipedia.org.evil.example/'),
      expect: { refused: /not among/ },
    },
    {
      name: 'http redirect towards disallowed host is returned, not followed',
      run: H('GET', `http://127.0.0.1:${P}/redirect?to=http://evil.example/`),
      expect: (r) =>
        'fields' in r &&
        dec(r.fields[0]!) === '302' &&
        /location: http:\/\/evil\.example\//.test(dec(r.fields[1]!)),
    },
    {
      name: 'http oversized request body',
      run: H('POST', `http://127.0.0.1:${P}/`, 'x'.repeat(101)),
      expect: { refused: /limit is 100/ },
    },
    {
      name: 'http oversized response body',
      run: H('GET', `http://127.0.0.1:${P}/big?n=5000`),
      expect: { error: /exceeds 1000 bytes/ },
    },
    {
      name: 'http server never answers',
      run: H('GET', `http://127.0.0.1:${P}/hang`),
      expect: { error: /timed out|aborted/i },
    },
    {
      name: 'http Host header override',
      run: H('GET', `http://127.0.0.1:${P}/`, '', 'Host', 'evil.example'),
      expect: { refused: /Host may not be set/ },
    },
    {
      name: 'http header CRLF injection',
      run: H('GET', `http://127.0.0.1:${P}/`, '', 'X-A', 'b\r\nHost: evil'),
      expect: { refused: /CR, LF/ },
    },
    { name: 'http CONNECT', run: H('CONNECT', `http://127.0.0.1:${P}/`), expect: { refused: /CONNECT/ } },
    {
      name: 'http GET with a body',
      run: H('GET', `http://127.0.0.1:${P}/`, 'x'),
      expect: { refused: /cannot carry a body/ },
    },
    // call chains and storage isolation
    {
      name: 'call past the depth limit',
      run: () =>
        callc['berm.call']!(
          F('b', 't', '{}'),
          ctx({ callees: ['b'] }, { depth: 4, callTool: () => ({ fields: [] }) }),
        ),
      expect: { refused: /exceeds the limit of 4/ },
    },
    {
      name: 'call an undeclared harness',
      run: () =>
        callc['berm.call']!(
          F('os', 'run', '{}'),
          ctx({ callees: ['b'] }, { callTool: () => ({ fields: [] }) }),
        ),
      expect: { refused: /may not call "os"/ },
    },
    {
      name: 'storage: another harness key is invisible',
      run: () => {
        store['berm.set']!(F('token', 'TOP SECRET token'), ctx({}, { harness: 'victim' }));
        return store['berm.get']!(F('token'), ctx({}, { harness: 'attacker' }));
      },
      expect: (r) => 'fields' in r && r.fields.length === 0,
    },
  ];
  t.ok(cases.length >= 40, `${cases.length} hostile requests`);

  for (const k of cases) {
    const started = Date.now();
    const r = k.run();
    const text = replyText(r);
    if (typeof k.expect === 'function') t.ok(k.expect(r), `${k.name}: ${text.slice(0, 120)}`);
    else t.match(r, k.expect, k.name);
    t.notMatch(text, /TOP SECRET/, `${k.name}: no secret in the reply`);
    // Generous: a case may pay for starting a fresh bridge worker under a loaded test run.
    t.ok(Date.now() - started < 15_000, `${k.name}: answered promptly`);
  }
  t.equal(snapshot(outside), before, 'nothing outside root was touched');
  t.equal(snapshot(path.join(base, 'rootevil')), siblingBefore, 'sibling dir untouched');
  t.notOk(fs.existsSync(path.join(outside, 'pwned.txt')));
  t.equal(fs.readFileSync(secret, 'utf8'), 'TOP SECRET\n');
  // After the regex timeout killed the worker, the bridge recovers.
  t.equal(okText(fsc['berm.fs.grep']!(F('fine', 'ok.txt'), c)), 'ok.txt:1:fine');
});

t.test('symlink swaps between check and open are caught at open time', async (t) => {
  const s = scratch();
  t.teardown(s.cleanup);
  const { root, outside, secret } = s;
  // Final component: checked as a regular file, then swapped to a symlink out (O_NOFOLLOW).
  const f = path.join(root, 'f.txt');
  fs.writeFileSync(f, 'inside');
  fs.rmSync(f);
  fs.symlinkSync(secret, f);
  t.match(openVerified(root, f, 'read', 'f.txt', 'test'), { refused: /became a symlink/ });
  t.match(openVerified(root, f, 'write', 'f.txt', 'test'), { refused: /became a symlink/ });
  // Intermediate component: d/ resolved inside, then replaced by a symlink to outside; the fd's
  // real path (/proc/self/fd/N) gives it away.
  const d = path.join(root, 'd');
  fs.mkdirSync(d);
  fs.writeFileSync(path.join(d, 'secret.txt'), 'inside');
  fs.rmSync(d, { recursive: true });
  fs.symlinkSync(outside, d);
  t.match(openVerified(root, path.join(d, 'secret.txt'), 'read', 'd/secret.txt', 'test'), {
    refused: /swapped to a file outside/,
  });
  t.match(openVerified(root, path.join(d, 'secret.txt'), 'write', 'd/secret.txt', 'test'), {
    refused: /swapped to a file outside/,
  });
  t.equal(fs.readFileSync(secret, 'utf8'), 'TOP SECRET\n', 'secret not truncated by the write attempt');
});

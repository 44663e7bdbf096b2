import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import t from 'tap';
import { CAPABILITIES, CAPABILITY_NAMES, stageReply } from '../src/capabilities/index.js';
import { runSync, shutdownBridge } from '../src/sync/bridge.js';
import { closeStores } from '../src/capabilities/storage/index.js';
import { CALL_DEADLINE } from '../src/capabilities/types.js';
import { hostAllowed } from '../src/capabilities/common/hosts.js';
import { decodeFields, parseStagedLength } from '../src/wire/fields.js';
import { F, ctx, dec, okText, scratch, startServer } from './helpers/cap-util.js';

const fsc = CAPABILITIES.fs!.calls;
const execc = CAPABILITIES.exec!.calls;
const httpc = CAPABILITIES.http!.calls;
const clock = CAPABILITIES.clock!.calls;
const store = CAPABILITIES.storage!.calls;
const callc = CAPABILITIES.call!.calls;

t.teardown(() => {
  shutdownBridge();
  closeStores();
});

t.test('registry', async (t) => {
  t.same(CAPABILITY_NAMES, ['call', 'clock', 'exec', 'fs', 'http', 'schedule', 'storage', 'ws']);
  t.ok(fsc['crabtalk.fs.read'] && execc['crabtalk.exec.run'] && httpc['crabtalk.http.fetch']);
});

t.test('stageReply', async (t) => {
  const one = stageReply({ fields: [new Uint8Array([1, 2, 3])] });
  t.same([...one.bytes], [1, 2, 3]);
  t.equal(one.word, 3n);
  const two = stageReply({ fields: F('a', 'bc') });
  t.same(decodeFields(two.bytes).map(dec), ['a', 'bc']);
  t.equal(stageReply({ fields: [] }).word, 0n);
  t.same(parseStagedLength(stageReply({ error: 'boom' }).word), { length: 4n, error: true, refused: false });
  t.same(parseStagedLength(stageReply({ refused: 'no' }).word), { length: 2n, error: true, refused: true });
});

t.test('fs positive', async (t) => {
  const s = scratch();
  t.teardown(s.cleanup);
  const c = ctx({ root: s.root });
  t.equal(okText(fsc['berm.fs.write']!(F('a/b/hello.txt', 'hello world\nsecond line\n'), c)), '24');
  t.equal(fs.readFileSync(path.join(s.root, 'a/b/hello.txt'), 'utf8'), 'hello world\nsecond line\n');
  t.equal(okText(fsc['berm.fs.read']!(F('a/b/hello.txt', '0', '0'), c)), 'hello world\nsecond line\n');
  t.equal(okText(fsc['crabtalk.fs.read']!(F('a/b/hello.txt', '6', '5'), c)), 'world');
  t.equal(okText(fsc['berm.fs.read']!(F(path.join(s.root, 'a/b/hello.txt'), '100', '5'), c)), '');
  // overwrite truncates
  t.equal(okText(fsc['crabtalk.fs.write']!(F('a/b/hello.txt', 'x'), c)), '1');
  t.equal(fs.readFileSync(path.join(s.root, 'a/b/hello.txt'), 'utf8'), 'x');
  // a symlink that stays inside root is fine
  fs.symlinkSync('a/b/hello.txt', path.join(s.root, 'inside-link'));
  t.equal(okText(fsc['berm.fs.read']!(F('inside-link', '0', '0'), c)), 'x');
  fs.writeFileSync(path.join(s.root, 'a/one.ts'), 'const x = 1;\n// TODO later\n');
  fs.writeFileSync(path.join(s.root, 'two.ts'), 'TODO first\nnothing\n');
  t.equal(okText(fsc['berm.fs.glob']!(F('**/*.ts'), c)), 'a/one.ts\ntwo.ts');
  t.equal(okText(fsc['berm.fs.glob']!(F('a/*'), c)), 'a/b\na/one.ts');
  t.equal(okText(fsc['berm.fs.glob']!(F('{two,zzz}.ts'), c)), 'two.ts');
  t.equal(
    okText(fsc['berm.fs.grep']!(F('TODO', '**/*.ts'), c)),
    'a/one.ts:2:// TODO later\ntwo.ts:1:TODO first',
  );
  t.equal(okText(fsc['berm.fs.grep']!(F('^TODO', ''), c)), 'two.ts:1:TODO first');
  t.equal(okText(fsc['berm.fs.grep']!(F('nomatch', '**'), c)), '');
  // caps
  const small = ctx({ root: s.root }, { limits: { fsReadMax: 3, fsMaxResults: 1 } });
  t.equal(okText(fsc['berm.fs.read']!(F('two.ts', '0', '100'), small)), 'TOD');
  t.equal(okText(fsc['berm.fs.glob']!(F('**/*.ts'), small)), 'a/one.ts\n[berm: truncated]');
  // errors (allowed but failed)
  t.match(fsc['berm.fs.read']!(F('missing.txt', '0', '0'), c), { error: /no such file/ });
  t.match(fsc['berm.fs.read']!(F('a', '0', '0'), c), { error: /is a directory/ });
});

t.test('fs without root is an error naming the fix', async (t) => {
  t.match(fsc['berm.fs.read']!(F('x', '0', '0'), ctx({})), { error: /no root is granted; declare root/ });
  t.match(execc['berm.exec.run']!(F('true', ''), ctx({})), { error: /no root is granted/ });
});

t.test('exec positive', async (t) => {
  const s = scratch();
  t.teardown(s.cleanup);
  fs.mkdirSync(path.join(s.root, 'sub'));
  const c = ctx({ root: s.root });
  const r = JSON.parse(okText(execc['berm.exec.run']!(F('echo out; echo err >&2; pwd; exit 3', ''), c)));
  t.same(r, { stdout: `out\n${s.root}\n`, stderr: 'err\n', exit_code: 3, signal: null, truncated: false });
  const r2 = JSON.parse(okText(execc['crabtalk.exec.run']!(F('pwd; env | sort', 'sub', 'FOO', 'bar'), c)));
  t.equal(r2.exit_code, 0);
  const lines = r2.stdout.split('\n');
  t.equal(lines[0], path.join(s.root, 'sub'));
  t.ok(lines.includes('FOO=bar'));
  // the host environment does not leak: HOME/PATH are not passed unless named
  t.notOk(
    lines.some((l: string) => l.startsWith('HOME=')),
    'no HOME from the host',
  );
  // output cap kills the group and marks truncation
  const big = JSON.parse(
    okText(execc['berm.exec.run']!(F('yes', ''), ctx({ root: s.root }, { limits: { execMaxOutput: 1000 } }))),
  );
  t.equal(big.stdout.length, 1000);
  t.equal(big.truncated, true);
  t.equal(big.signal, 'SIGKILL');
});

/** True once `pid` no longer runs (gone, or a zombie waiting for a reaper that may not be us). */
async function goneSoon(pid: number): Promise<boolean> {
  for (let i = 0; i < 40; i++) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) return true;
    } catch {
      return true;
    }
    await new Promise((res) => setTimeout(res, 50));
  }
  return false;
}

t.test('exec timeout kills the whole process group, grandchildren included', async (t) => {
  const s = scratch();
  t.teardown(s.cleanup);
  const pidFile = path.join(s.root, 'pid');
  const c = ctx({ root: s.root }, { limits: { execTimeoutMs: 500 } });
  const started = Date.now();
  // The grandchild (sh -c 'sleep') holds stdout and ignores nothing; it must be killed too.
  const r = execc['berm.exec.run']!(
    F(`sh -c 'echo $$ > ${pidFile}; exec sleep 1000' & wait`, '', 'PATH', '/usr/bin:/bin'),
    c,
  );
  t.match(r, { error: /timed out after 500 ms; the process group was killed/ });
  t.ok(Date.now() - started < 5000, 'returned promptly');
  const pid = Number(fs.readFileSync(pidFile, 'utf8'));
  t.ok(await goneSoon(pid), 'grandchild is gone');
  // background leftovers of a command that exits are killed as well
  const pid2 = path.join(s.root, 'pid2');
  okText(execc['berm.exec.run']!(F(`(sleep 1000 & echo $! > ${pid2})`, '', 'PATH', '/usr/bin:/bin'), c));
  t.ok(await goneSoon(Number(fs.readFileSync(pid2, 'utf8'))), 'background job is gone');
});

t.test('the call deadline bounds a host call whose bridge worker is still starting', async (t) => {
  // The job module's first import takes 6 s (test/helpers/slow-import-job.ts): the bridge's
  // start-up, which may take up to BRIDGE_STARTUP_MS (30 s) on a loaded machine. A call whose
  // deadline is 500 ms away ends at that deadline with an error naming the start-up, not when the
  // worker is ready.
  const SLOW = new URL('./helpers/slow-import-job.ts', import.meta.url);
  const t0 = Date.now();
  const r = runSync<number>(SLOW, 'count', null, 60_000, Date.now() + 500);
  const waited = Date.now() - t0;
  t.match(r, {
    ok: false,
    timedOut: true,
    error:
      /^the call's deadline passed while the host worker was starting \(waited \d+ ms; nothing was done\)$/,
  });
  t.ok(waited >= 490 && waited < 4000, `ended at the deadline (${waited} ms), not after the 6 s start-up`);
  // the worker went on starting: the next call runs once it is ready, and the job given up never ran
  t.same(runSync<number>(SLOW, 'count', null, 60_000), { ok: true, value: 1 });
  // a deadline already past: nothing starts
  t.match(runSync<number>(SLOW, 'count', null, 60_000, Date.now() - 1), {
    ok: false,
    error: /deadline had passed before the host call started/,
  });
  t.same(runSync<number>(SLOW, 'count', null, 60_000, Date.now() + 30_000), { ok: true, value: 2 });
});

t.test('http positive', async (t) => {
  const srv = await startServer();
  t.teardown(srv.stop);
  const c = ctx({ hosts: ['127.0.0.1'] });
  const r = httpc['berm.http.fetch']!(
    F(
      'post',
      `http://127.0.0.1:${srv.port}/echo?q=1`,
      '{"a":1}',
      'Content-Type',
      'application/json',
      'X-Test',
      'yes',
    ),
    c,
  );
  if (!('fields' in r)) throw new Error(JSON.stringify(r));
  t.equal(r.fields.length, 3);
  t.equal(dec(r.fields[0]!), '200');
  const headers = dec(r.fields[1]!);
  t.match(headers, /^content-type: application\/json$/m);
  t.match(headers, /^set-cookie: a=1$/m);
  t.match(headers, /^set-cookie: b=2$/m);
  const body = JSON.parse(dec(r.fields[2]!));
  t.equal(body.method, 'POST');
  t.equal(body.path, '/echo?q=1');
  t.equal(body.body, '{"a":1}');
  t.equal(body.headers['x-test'], 'yes');
  const tea = httpc['crabtalk.http.fetch']!(F('GET', `http://127.0.0.1:${srv.port}/teapot`, ''), c);
  t.equal('fields' in tea && dec(tea.fields[0]!), '418');
  // a redirect is returned, not followed
  const red = httpc['berm.http.fetch']!(F('GET', `http://127.0.0.1:${srv.port}/redirect?to=/echo`, ''), c);
  if (!('fields' in red)) throw new Error(JSON.stringify(red));
  t.equal(dec(red.fields[0]!), '302');
  t.match(dec(red.fields[1]!), /^location: \/echo$/m);
});

t.test('host matching', async (t) => {
  const hosts = ['api.example.org', '*.wikipedia.org', '127.0.0.1', '[::1]'];
  t.ok(hostAllowed('api.example.org', hosts));
  t.ok(hostAllowed('API.Example.ORG'.toLowerCase(), hosts));
  t.ok(hostAllowed('en.wikipedia.org', hosts));
  t.ok(hostAllowed('a.b.wikipedia.org', hosts));
  t.notOk(hostAllowed('wikipedia.org', hosts), '*.domain matches subdomains only');
  t.notOk(hostAllowed('evilwikipedia.org', hosts));
  t.notOk(hostAllowed('example.org', hosts));
  t.ok(hostAllowed('[::1]', hosts));
  t.notOk(hostAllowed('127.0.0.2', hosts));
});

t.test('clock', async (t) => {
  const before = Date.now();
  const now = Number(okText(clock['berm.now']!([], ctx({}))));
  t.ok(now >= before && now <= Date.now());
  t.equal(Number(okText(clock['berm.clock.offset']!([], ctx({})))), -new Date().getTimezoneOffset() * 60);
  t.match(clock['berm.now']!(F('x'), ctx({})), { refused: /expected fields/ });
});

t.test('storage', async (t) => {
  const s = scratch();
  t.teardown(s.cleanup);
  for (const database of [undefined, path.join(s.base, 'kv.sqlite')]) {
    const a = ctx({ database }, { harness: 'alpha' });
    const b = ctx({ database }, { harness: 'beta' });
    t.same(store['berm.get']!(F('k'), a), { fields: [] }, 'absent is zero fields');
    t.same(store['berm.set']!(F('k', 'v1'), a), { fields: [] });
    t.equal(okText(store['berm.get']!(F('k'), a)), 'v1');
    t.same(store['berm.get']!(F('k'), b), { fields: [] }, 'beta cannot see alpha');
    store['berm.set']!(F('k', 'other'), b);
    t.equal(okText(store['berm.get']!(F('k'), a)), 'v1', 'beta cannot change alpha');
    store['berm.set']!(F('k', new Uint8Array([0, 255, 1])), a);
    t.same([...(store['berm.get']!(F('k'), a) as { fields: Uint8Array[] }).fields[0]!], [0, 255, 1]);
    t.same(store['berm.delete']!(F('k'), a), { fields: [] });
    t.same(store['berm.get']!(F('k'), a), { fields: [] });
    t.equal(okText(store['berm.get']!(F('k'), b)), 'other');
    t.same(store['berm.delete']!(F('k'), b), { fields: [] });
  }
  const q = ctx({}, { harness: 'q', limits: { storageQuota: 10, storageMaxKey: 4, storageMaxValue: 8 } });
  t.same(store['berm.set']!(F('a', '12345678'), q), { fields: [] });
  t.match(store['berm.set']!(F('b', '12'), q), { refused: /quota is 10/ });
  t.same(store['berm.set']!(F('a', '1234'), q), { fields: [] }, 'replacing counts the old value out');
  t.match(store['berm.set']!(F('toolong', 'x'), q), { refused: /key is 7 bytes/ });
  t.match(store['berm.set']!(F('k', '123456789'), q), { refused: /value is 9 bytes/ });
  t.match(store['berm.get']!(F(''), q), { refused: /key is empty/ });
  // persisted in the file across reopen
  const file = path.join(s.base, 'persist.sqlite');
  store['berm.set']!(F('p', 'kept'), ctx({ database: file }));
  closeStores();
  t.equal(okText(store['berm.get']!(F('p'), ctx({ database: file }))), 'kept');
  t.ok(fs.existsSync(file));
});

t.test('call', async (t) => {
  const seen: unknown[] = [];
  const callTool = (h: string, tool: string, args: string, depth: number) => {
    seen.push([h, tool, args, depth]);
    return { fields: F('result') };
  };
  const c = ctx({ callees: ['search'] }, { callTool, depth: 1 });
  t.equal(okText(callc['berm.call']!(F('search', 'find', '{"q":"x"}'), c)), 'result');
  t.same(seen, [['search', 'find', '{"q":"x"}', 2]]);
  t.match(callc['berm.call']!(F('os', 'run', '{}'), c), { refused: /may not call "os"; declare callees/ });
  t.match(callc['berm.call']!(F('search', 'find', '{'), c), { refused: /not JSON/ });
  t.match(callc['berm.call']!(F('search', 'find', '{}'), { ...c, depth: 4 }), {
    refused: /depth 5 exceeds the limit of 4/,
  });
  t.match(callc['berm.call']!(F('search', 'find', '{}'), { ...c, callTool: undefined }), {
    error: /cannot chain/,
  });
  t.match(
    callc['berm.call']!(F('search', 'find', '{}'), {
      ...c,
      callTool: () => {
        throw new Error('runtime bug');
      },
    }),
    { error: /runtime bug/ },
  );
});

t.test("one call's deadline does not become the connect timeout of later fetches", async (t) => {
  // A server whose accept queue is full (it listens and does not accept): the kernel drops
  // further SYNs, so a connect waits for the client's SYN retransmission (1 s, then 3 s); the
  // server starts accepting after 2.3 s, so a connect takes ~3 s. The fetch job's undici Agent
  // was built by the first fetch of the thread with that call's budget as its connect timeout:
  // a first call with 2 s left made every later fetch of every harness give up connecting after
  // under 2 s, whatever its own budget.
  const py = spawn(
    'python3',
    [
      '-c',
      `import socket, sys, time, threading
s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(0)
port = s.getsockname()[1]
fill = []
for _ in range(3):
    f = socket.socket(); f.setblocking(False); f.connect_ex(('127.0.0.1', port)); fill.append(f)
time.sleep(0.2)
print(port, flush=True)
sys.stdin.readline()
time.sleep(2.3)
def serve(c):
    c.settimeout(10)
    try:
        if c.recv(65536):
            c.sendall(b'HTTP/1.1 200 OK\\r\\ncontent-length: 2\\r\\nconnection: close\\r\\n\\r\\nok')
    except Exception:
        pass
    c.close()
s.settimeout(10)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()`,
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  t.teardown(() => py.kill('SIGKILL'));
  const port = Number(await new Promise<string>((r) => py.stdout.once('data', (d: Buffer) => r(String(d)))));
  shutdownBridge(); // a fresh bridge worker: its fetch job builds its Agent anew
  const { root, cleanup } = scratch();
  t.teardown(cleanup);
  t.same(okText(fsc['berm.fs.grep']!(F('x', '**'), ctx({ root }))), '', 'the worker is up (a grep)');
  const c = ctx({ hosts: ['127.0.0.1'] });
  // the thread's first fetch, 2 s before its deadline (port 1 refuses at once)
  const first = httpc['berm.http.fetch']!(
    F('GET', 'http://127.0.0.1:1/', ''),
    ctx({ hosts: ['127.0.0.1'] }, { limits: { [CALL_DEADLINE]: Date.now() + 2_000 } }),
  );
  t.match(first, { error: /ECONNREFUSED/ });
  py.stdin.write('go\n');
  const t0 = Date.now();
  const r = httpc['berm.http.fetch']!(F('GET', `http://127.0.0.1:${port}/`, ''), c);
  const took = Date.now() - t0;
  t.same('fields' in r ? dec(r.fields[0]!) : r, '200', `the slow connect succeeded after ${took} ms`);
  t.equal('fields' in r ? dec(r.fields[2]!) : '', 'ok');
});

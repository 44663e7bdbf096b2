// The runtime of a declaration file end to end: the os, fetch and probe
// example harnesses (examples/*.elf, built from guest-sdk/examples by `make examples`) against a
// temporary root and a local HTTP server on 127.0.0.1, grants by declaration only, berm.call
// chains, and guest buffers that run past the end of guest memory.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import t from 'tap';
import { Engine } from '../src/engine/engine.js';
import { MemoryFault, UnknownHostCall } from '../src/engine/traps.js';
import { HarnessError } from '../src/harness/harness.js';
import { DeclarationError, parseDeclarations } from '../src/config/declarations.js';
import { Runtime, RuntimeError } from '../src/runtime/declared.js';
import { TEST_CACHE } from './helpers/fixtures.js';
import { scratch, startServer } from './helpers/cap-util.js';

const REPO = path.resolve(import.meta.dirname, '..');
const ELF = (name: string) => path.join(REPO, 'examples', `${name}.elf`);
const sha = (file: string) => createHash('sha256').update(fs.readFileSync(file)).digest('hex');

const s = scratch();
t.teardown(s.cleanup);
fs.writeFileSync(path.join(s.root, 'hello.txt'), 'hello, world\n');
fs.writeFileSync(path.join(s.root, 'secret.txt'), 'in the root\n');

const entry = (name: string, elf: string, caps: string[], extra = '') =>
  `[[harnesses]]\nname = "${name}"\nsource = "${ELF(elf)}"\nsha256 = "${sha(ELF(elf))}"\n` +
  `capabilities = ${JSON.stringify(caps)}\n${extra}\n`;

const TOML =
  entry('os', 'os', ['fs', 'exec'], 'root = "root"') +
  entry('os-copy', 'os', ['exec', 'fs'], 'root = "root"') + // same identity: one Harness
  entry('os-readonly', 'os', ['fs'], 'root = "root"') + // exec not granted
  entry('fetch', 'fetch', ['http'], 'hosts = ["127.0.0.1"]') +
  entry('probe', 'probe', ['call', 'fs'], 'root = "root"\ncallees = ["probe", "os", "ghost"]') +
  entry('loner', 'probe', ['call']) + // no callees: reaches no harness
  entry('broken', 'os', ['fs']); // fs without a root: refused, with file:line
const TOML_FILE = path.join(s.base, 'harnesses.toml');
fs.writeFileSync(TOML_FILE, TOML);

const engine = new Engine({ cacheDir: TEST_CACHE });
const decls = parseDeclarations(TOML, TOML_FILE);
const rt = await Runtime.create(engine, decls);

/** Every file under dir with its content, to show a call left the host untouched. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of fs.readdirSync(dir, { recursive: true, withFileTypes: true })) {
    const p = path.join(e.parentPath, e.name);
    out[path.relative(dir, p)] = e.isFile() ? fs.readFileSync(p, 'latin1') : '<dir>';
  }
  return out;
}
const outsideBefore = snapshot(s.outside);
t.afterEach(() => {
  t.same(snapshot(s.outside), outsideBefore, 'nothing outside the root changed');
});

t.test('declarations: refused entries carry file:line; identical declarations share one image', async (t) => {
  t.equal(decls.errors.length, 1);
  t.type(decls.errors[0], DeclarationError);
  // the capabilities line of the entry: header, name, source, sha256, capabilities
  const capsLine = TOML.split('\n').indexOf('name = "broken"') + 4;
  t.ok(decls.errors[0]!.message.startsWith(`${TOML_FILE}:${capsLine}: `), decls.errors[0]!.message);
  t.match(decls.errors[0]!.message, /fs is granted without a root/);
  t.same(rt.names(), ['os', 'os-copy', 'os-readonly', 'fetch', 'probe', 'loner']);
  t.equal(rt.get('os')!.identity, rt.get('os-copy')!.identity, 'a rename is not an event');
  t.equal(rt.get('os')!.harness, rt.get('os-copy')!.harness, 'one in-memory Harness per identity');
  t.not(rt.get('os')!.identity, rt.get('os-readonly')!.identity, 'grants are part of the identity');
  t.equal(rt.get('os')!.harness, rt.get('os-readonly')!.harness, 'same ELF: grants are linked per call');
  t.throws(() => rt.call('broken', 'read', '{"path":"hello.txt"}'), DeclarationError);
  t.throws(() => rt.call('nobody', 'read', '{}'), RuntimeError);
  t.throws(() => rt.call('os', 'nosuch', '{}'), HarnessError);
  t.throws(() => rt.call('os', 'read', '{"path":1}'), HarnessError, 'schema checked');
  t.throws(() => rt.call('os', 'read', '{}', 5), RuntimeError, 'depth past the limit');
  await t.rejects(Runtime.create(engine, decls, { only: ['broken'] }), DeclarationError);
  const only = await Runtime.create(engine, decls, { only: ['probe'] });
  t.same(only.names(), ['probe', 'os'], 'only: the harness and its declared callees');
});

t.test('os: read, write and exec inside a temporary root', async (t) => {
  t.same(rt.call('os', 'read', '{"path":"hello.txt"}'), { status: 'ok', result: 'hello, world\n', logs: [] });
  t.equal(rt.call('os', 'read', '{"path":"hello.txt","offset":7,"limit":5}').status, 'ok');
  t.match(rt.call('os', 'read', '{"path":"hello.txt","offset":7,"limit":5}'), { result: 'world' });
  t.match(rt.call('os', 'read', '{"path":"missing.txt"}'), { status: 'failed', message: /^read failed: / });

  const w = rt.call('os', 'write', '{"path":"sub/dir/new.txt","content":"line 1\\nline \\"2\\" \\u00e9\\n"}');
  t.same(w, { status: 'ok', result: 'wrote 19 bytes to sub/dir/new.txt', logs: [] });
  t.equal(fs.readFileSync(path.join(s.root, 'sub/dir/new.txt'), 'utf8'), 'line 1\nline "2" é\n');
  t.match(rt.call('os', 'read', '{"path":"sub/dir/new.txt"}'), { result: 'line 1\nline "2" é\n' });

  const x = rt.call('os', 'exec', '{"command":"echo made > made.txt; pwd; ls","cwd":"sub"}');
  t.equal(x.status, 'ok');
  const out = JSON.parse((x as { result: string }).result);
  t.same(out, {
    stdout: `${path.join(s.root, 'sub')}\ndir\nmade.txt\n`,
    stderr: '',
    exit_code: 0,
    signal: null,
    truncated: false,
  });
  t.equal(fs.readFileSync(path.join(s.root, 'sub/made.txt'), 'utf8'), 'made\n');
  const failing = rt.call('os', 'exec', '{"command":"echo oops >&2; exit 3"}');
  t.match(JSON.parse((failing as { result: string }).result), { stderr: 'oops\n', exit_code: 3 });
});

t.test('os: escapes are refused and reach nothing outside the root', async (t) => {
  const rel = path.relative(s.root, s.secret);
  for (const [tool, args] of [
    ['read', { path: rel }],
    ['read', { path: s.secret }],
    ['read', { path: '/etc/passwd' }],
    ['read', { path: '/proc/self/environ' }],
    ['write', { path: path.join('..', 'outside', 'new.txt'), content: 'x' }],
    ['write', { path: path.join(s.outside, 'secret.txt'), content: 'overwritten' }],
    ['exec', { command: 'touch escaped', cwd: '..' }],
    ['exec', { command: 'pwd', cwd: s.outside }],
  ] as const) {
    const r = rt.call('os', tool, JSON.stringify(args));
    t.equal(r.status, 'failed', `${tool} ${JSON.stringify(args)}`);
    t.match((r as { message: string }).message, /refused|failed/);
  }
  fs.symlinkSync(s.secret, path.join(s.root, 'link.txt'));
  t.match(rt.call('os', 'read', '{"path":"link.txt"}'), { status: 'failed', message: /refused|failed/ });
  t.match(rt.call('os', 'write', '{"path":"link.txt","content":"pwned"}'), { status: 'failed' });
  t.equal(fs.readFileSync(s.secret, 'utf8'), 'TOP SECRET\n');
});

t.test('a capability not granted is absent: its ecall traps UnknownHostCall', async (t) => {
  t.match(rt.call('os-readonly', 'read', '{"path":"hello.txt"}'), { status: 'ok', result: 'hello, world\n' });
  t.same(
    [...rt.get('os-readonly')!.harness.manifest.deps].sort(),
    ['exec', 'fs'],
    'the manifest asks for exec',
  );
  const before = snapshot(s.root);
  t.throws(() => rt.call('os-readonly', 'exec', '{"command":"touch ran"}'), UnknownHostCall);
  t.same(snapshot(s.root), before, 'nothing ran');
  // probe is granted call and fs, not http: loner is granted call only, not fs
  t.throws(() => rt.call('loner', 'oob', '{"cap":"result"}'), UnknownHostCall);
});

t.test('fetch against a local HTTP server on 127.0.0.1', async (t) => {
  const server = await startServer();
  t.teardown(server.stop);
  const base = `http://127.0.0.1:${server.port}`;
  const get = rt.call('fetch', 'fetch', JSON.stringify({ url: `${base}/hello?x=1` }));
  t.equal(get.status, 'ok');
  const g = JSON.parse((get as { result: string }).result);
  t.equal(g.status, 200);
  t.ok(g.headers.includes('content-type: application/json'));
  t.ok(g.headers.includes('set-cookie: a=1') && g.headers.includes('set-cookie: b=2'));
  t.match(JSON.parse(g.body), { method: 'GET', path: '/hello?x=1', body: '' });

  const post = rt.call(
    'fetch',
    'fetch',
    JSON.stringify({ url: `${base}/teapot`, method: 'POST', body: 'a"b\n' }),
  );
  const p = JSON.parse((post as { result: string }).result);
  t.equal(p.status, 418);
  t.match(JSON.parse(p.body), { method: 'POST', body: 'a"b\n' });

  const bin = JSON.parse(
    (rt.call('fetch', 'fetch', JSON.stringify({ url: `${base}/big?n=10` })) as { result: string }).result,
  );
  t.equal(bin.body, 'aaaaaaaaaa');
  const redirect = JSON.parse(
    (rt.call('fetch', 'fetch', JSON.stringify({ url: `${base}/redirect` })) as { result: string }).result,
  );
  t.equal(redirect.status, 302, 'redirects are returned, not followed');

  for (const url of [
    `http://localhost:${server.port}/`,
    `http://127.0.0.2:${server.port}/`,
    'file:///etc/passwd',
  ]) {
    t.match(
      rt.call('fetch', 'fetch', JSON.stringify({ url })),
      { status: 'failed', message: /^fetch refused: / },
      url,
    );
  }
});

t.test('berm.call: chains are refused past depth 4 and never trap the caller', async (t) => {
  const down = rt.call('probe', 'down', '{}');
  t.same(down, {
    status: 'ok',
    result: '^^^^refused: berm.call: call chain depth 5 exceeds the limit of 4',
    logs: [],
  });
  const shallow = await Runtime.create(engine, decls, { only: ['probe'], limits: { maxCallDepth: 1 } });
  t.match(shallow.call('probe', 'down', '{}'), {
    result: '^refused: berm.call: call chain depth 2 exceeds the limit of 1',
  });

  const call = (harness: string, tool: string, args: unknown, via = 'probe') =>
    rt.call(via, 'call', JSON.stringify({ harness, tool, args: JSON.stringify(args) }));
  t.match(call('os', 'read', { path: 'hello.txt' }), { status: 'ok', result: 'ok: hello, world\n' });
  t.match(call('os', 'read', { path: 'nope.txt' }), { status: 'ok', result: /^error: read failed: / });
  t.match(call('probe', 'trap', {}), {
    status: 'ok',
    result: /^error: probe\.trap trapped: MemoryFault: .* at pc 0x[0-9a-f]+/,
  });
  t.match(call('os', 'nosuch', {}), {
    status: 'ok',
    result: /^error: os\.nosuch: HarnessError: no tool named nosuch/,
  });
  t.match(call('ghost', 'x', {}), {
    status: 'ok',
    result: /^error: ghost\.x: RuntimeError: .*no harness named ghost/,
  });
  t.match(call('fetch', 'fetch', {}), {
    status: 'ok',
    result: /^refused: berm\.call: probe may not call "fetch"/,
  });
  t.match(call('os', 'read', { path: 'hello.txt' }, 'loner'), {
    status: 'ok',
    result: /^refused: .*loner may not call "os"/,
  });
  // the callee runs with its own grants: os reads what probe could, exec is os's alone
  const viaExec = call('os', 'exec', { command: 'echo from-os' });
  t.match(viaExec, { status: 'ok', result: /^ok: \{"stdout":"from-os\\n"/ });
});

t.test('a guest buffer that runs past the end of guest memory handed to a host call', async (t) => {
  const before = snapshot(s.root);
  for (const cap of ['read', 'write', 'result']) {
    let trap: unknown;
    try {
      rt.call('probe', 'oob', JSON.stringify({ cap }));
    } catch (e) {
      trap = e;
    }
    t.type(trap, MemoryFault, `${cap}: MemoryFault`);
    // base 0x10000 + 64 MiB: the first byte past the end of guest memory
    t.match((trap as MemoryFault).message, /guest address 0x4010000$/, `${cap}: ${(trap as Error).message}`);
  }
  t.same(snapshot(s.root), before, 'nothing written on the host');
  // the runtime is fine afterwards (the instance was disposed and its memory reset)
  t.match(rt.call('os', 'read', '{"path":"hello.txt"}'), { status: 'ok' });
});

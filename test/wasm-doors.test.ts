// A Wasm harness image through every door a user opens with an ELF, over real processes on
// loopback: `berm inspect`, `berm check` (the image, and a declaration naming it), `berm compile`
// then `berm call` from the cache, `berm push`/`pull` against a real registry (docker-registry),
// `berm publish` to a real berm-indexd, `berm install`, and bermd --config serving the installed
// image. Every answer is held to the module itself (its exports and its `berm.abi` custom section
// as V8 reads them, its sha256) and to the echo fixture's expected answers (fixtures/expected.json,
// the same as its ELF build's), not to berm's own output.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { defaultPullOutput } from '../src/cli/commands/push-pull.js';
import { runBerm } from './helpers/berm-cli.js';
import { ROOT } from './helpers/fixtures.js';
import { startRegistry } from './helpers/oci-registry.js';

const FILE = join(ROOT, 'fixtures', 'build', 'echo-wasm32-O2.wasm');
const BYTES = readFileSync(FILE);
const SHA = createHash('sha256').update(BYTES).digest('hex');
const MODULE = new WebAssembly.Module(BYTES);
/** the `berm.abi` custom section as V8 reads it, trailing NULs removed */
const customSections = (
  WebAssembly.Module as unknown as { customSections(m: WebAssembly.Module, n: string): ArrayBuffer[] }
).customSections;
const ABI = Buffer.from(customSections(MODULE, 'berm.abi')[0]!);
const ABI_TEXT = ABI.toString('utf8').replace(/\0+$/, '');
const MANIFEST = JSON.parse(ABI_TEXT) as { usage: string; tools: { name: string; description: string }[] };
const TOOLS = MANIFEST.tools.map((x) => x.name);
const EXPORTED = WebAssembly.Module.exports(MODULE)
  .filter((e) => e.kind === 'function')
  .map((e) => e.name);
/** the echo fixture's expected answers (shared by its ELF and Wasm builds) */
const CASES = (
  JSON.parse(readFileSync(join(ROOT, 'fixtures', 'expected.json'), 'utf8')) as {
    tools: { source: string; tool: string; args: string; ok: boolean; result: string }[];
  }
).tools
  .filter((c) => c.source === 'echo.c' && c.ok && c.args.startsWith('{')) // the tools take objects
  .filter((c, i, all) => all.findIndex((d) => d.tool === c.tool && d.args === c.args) === i);

const TMP = mkdtempSync(join(tmpdir(), 'berm-wasm-doors-'));
t.teardown(() => rmSync(TMP, { recursive: true, force: true }));
const ENV = { BERM_DATA_DIR: join(TMP, 'data'), BERM_TOKEN: '', BERM_INDEX: '', BERMD_TOKEN: '', HOME: TMP };
const berm = (args: string[]) => runBerm(args, join(TMP, 'cache'), ENV);

t.ok(CASES.length >= 2, 'expected.json has echo cases');
t.same(TOOLS, ['echo', 'echo_len'], 'the fixture declares the echo tools');

t.test('inspect reads the module: its manifest section and its exports', async (t) => {
  const r = await berm(['--json', 'inspect', FILE]);
  t.equal(r.code, 0, r.stderr);
  const j = JSON.parse(r.stdout) as {
    format: string;
    manifest: { usage: string; tools: { name: string; description: string }[] };
    functions: { name: string; aliases: string[]; global: boolean }[];
  };
  t.equal(j.format, 'wasm');
  t.equal(j.manifest.usage, MANIFEST.usage);
  t.same(
    j.manifest.tools.map((x) => [x.name, x.description]),
    MANIFEST.tools.map((x) => [x.name, x.description]),
  );
  t.same(
    j.functions
      .filter((f) => f.global)
      .flatMap((f) => [f.name, ...f.aliases])
      .sort(),
    [...EXPORTED].sort(),
    'the exported functions are the module exports',
  );
  const text = await berm(['inspect', FILE]);
  t.equal(text.code, 0, text.stderr);
  t.match(text.stdout, /WebAssembly module/);
  t.notMatch(text.stdout, /relocations/, 'no ELF-only rows');
});

t.test('check: the image itself, and a declaration naming it', async (t) => {
  let r = await berm(['check', FILE]);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, `tools: ${TOOLS.join(', ')}`);
  const decl = join(TMP, 'decl.toml');
  writeFileSync(
    decl,
    `[[harnesses]]\nname = "wecho"\nsource = "${FILE}"\nsha256 = "${SHA}"\ncapabilities = []\n`,
  );
  r = await berm(['check', decl]);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, `tools: ${TOOLS.join(', ')}`);
  // a damaged module is a problem named with the fix, exit 2
  const bad = join(TMP, 'bad.wasm');
  writeFileSync(bad, BYTES.subarray(0, 200));
  r = await berm(['check', bad]);
  t.equal(r.code, 2);
  t.match(r.stderr, /bad\.wasm/);
});

t.test('compile caches the instrumented module; call answers from the cache', async (t) => {
  let r = await berm(['compile', FILE]);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout + r.stderr, /instrumented/);
  t.notMatch(r.stdout, /translated/);
  r = await berm(['compile', FILE]);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stderr, /1 already cached/);
  for (const c of CASES) {
    r = await berm(['call', FILE, c.tool, c.args]);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout.replace(/\n$/, ''), c.result, `${c.tool} ${c.args}`);
  }
});

t.test('push, pull, publish, install, serve', async (t) => {
  const reg = await startRegistry();
  t.teardown(() => reg.stop());
  const ref = `${reg.host}/berm/wecho:v1`;
  let r = await berm(['--json', 'push', ref, FILE]);
  t.equal(r.code, 0, r.stderr);
  t.equal((JSON.parse(r.stdout) as { digest: string }).digest, `sha256:${SHA}`);
  // the artifact in the registry: its layer is the module, its config the module's berm.abi section
  const res = await fetch(`http://${reg.host}/v2/berm/wecho/manifests/v1`, {
    headers: { accept: 'application/vnd.oci.image.manifest.v1+json' },
  });
  const m = (await res.json()) as { config: { digest: string }; layers: { digest: string }[] };
  t.equal(m.layers[0]!.digest, `sha256:${SHA}`);
  t.equal(m.config.digest, `sha256:${createHash('sha256').update(ABI).digest('hex')}`);
  const out = join(TMP, 'pulled.wasm');
  r = await berm(['pull', ref, '-o', out]);
  t.equal(r.code, 0, r.stderr);
  t.ok(readFileSync(out).equals(BYTES), 'pulled byte for byte');
  // without -o, pull names the file by the image's kind
  t.equal(defaultPullOutput('berm/wecho', BYTES), 'wecho.wasm');
  t.equal(
    defaultPullOutput('berm/echo', readFileSync(join(ROOT, 'fixtures', 'build', 'echo-gcc-O2.elf'))),
    'echo.elf',
  );

  const svc = await startBin(
    'berm-indexd.js',
    ['--addr', '127.0.0.1:0', '--index', join(TMP, 'index')],
    /on (http:\/\/[\d.:]+)/,
  );
  t.teardown(() => svc.stop());
  r = await berm(['publish', ref, '--index', svc.url]);
  t.equal(r.code, 0, r.stderr);
  t.equal(
    r.stdout,
    `${ref}\n  digest     sha256:${SHA}\n${TOOLS.map((x) => `  tool       ${x}\n`).join('')}`,
  );
  const entry = JSON.parse(
    readFileSync(join(TMP, 'index', reg.host, 'berm', 'wecho.json'), 'utf8').trim(),
  ) as {
    digest: string;
    usage: string;
    tools: { name: string }[];
  };
  t.equal(entry.digest, `sha256:${SHA}`);
  t.equal(entry.usage, MANIFEST.usage);
  t.same(
    entry.tools.map((x) => x.name),
    TOOLS,
  );
  const config = join(TMP, 'installed.toml');
  r = await berm(['install', ref, '--index', svc.url, '--name', 'wecho', '--config', config]);
  t.equal(r.code, 0, r.stderr);
  t.match(readFileSync(config, 'utf8'), `sha256 = "${SHA}"`);
  const d = await startBin(
    'bermd.js',
    ['--addr', '127.0.0.1:0', '--workers', '1', '--config', config, '--root', join(TMP, 'root')],
    /listening on (http:\/\/[\d.:]+)/,
  );
  t.teardown(() => d.stop());
  for (const c of CASES) {
    const res = await fetch(`${d.url}/harnesses/wecho/tools/${c.tool}`, { method: 'POST', body: c.args });
    t.equal(res.status, 200);
    t.same(await res.json(), { done: c.result }, `bermd: ${c.tool} ${c.args}`);
  }
});

interface Proc {
  url: string;
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

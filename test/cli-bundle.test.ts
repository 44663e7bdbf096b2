// The bundled CLI as bin/berm.js runs it from a current build: dist/berm-cli.cjs (one CommonJS
// file, scripts/bundle.mjs) compiled with the V8 code cache the build made. A preload wraps
// vm.Script to record which file the launcher compiled and whether V8 took the cache, so each
// test knows the bundle ran. Covered: a warm tool call (cache accepted), a capability whose
// worker thread loads its dist/ module through a rewritten import.meta.url, files found next to
// the modules (package.json, scripts/new-harness), a stale or damaged cache (ignored, same
// output), and a bundle that is not the one the build recorded in dist/.build.json (not run).
// The baseline translator's script (dist/translate/baseline.cjs, src/engine/baseline-script.ts):
// a cold call runs it from its code cache, a damaged cache is not offered, a script that is not
// the one the build wrote is not run (the ES module translates), and it writes what the sources
// write.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { builtIsCurrent } from '../bin/launch.js';
import { ROOT } from './helpers/fixtures.js';

const TMP = realpathSync(mkdtempSync(join(tmpdir(), 'berm-cli-bundle-')));
t.teardown(() => rmSync(TMP, { recursive: true, force: true }));
const CACHE = join(TMP, 'cache');
const ECHO = join(ROOT, 'fixtures', 'build', 'echo-gcc-O2.elf');

// records, at exit, every script compiled through vm.Script: its file and V8's verdict on the cache
const PRELOAD = join(TMP, 'record-scripts.cjs');
writeFileSync(
  PRELOAD,
  `const vm = require('node:vm');
const fs = require('node:fs');
const seen = [];
const Script = vm.Script;
vm.Script = class extends Script {
  constructor(source, options) {
    super(source, options);
    seen.push({ file: options && options.filename, offered: !!(options && options.cachedData), rejected: this.cachedDataRejected });
  }
};
process.on('exit', () => fs.writeFileSync(process.env.BERM_TEST_RECORD, JSON.stringify(seen)));
`,
);

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  scripts: { file: string; offered: boolean; rejected?: boolean }[];
}

/**
 * An installed-package tree (bin/, dist/ and package.json, no src/; node_modules linked) under
 * TMP/`name`: a copy whose files a test may change. Returns its root and its CLI bundle.
 */
function installedCopy(name: string): { root: string; bundle: string } {
  const root = join(TMP, name);
  mkdirSync(root);
  for (const p of ['bin', 'dist', 'package.json']) cpSync(join(ROOT, p), join(root, p), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(root, 'node_modules'));
  return { root, bundle: join(root, 'dist', 'berm-cli.cjs') };
}

let runs = 0;
function berm(args: string[], root = ROOT, cacheDir = CACHE): Promise<Run> {
  const record = join(TMP, `record-${runs++}.json`);
  return new Promise((done, reject) => {
    const child = spawn(
      process.execPath,
      ['--stack-size=4000', '-r', PRELOAD, join(root, 'bin', 'berm.js'), '--cache-dir', cacheDir, ...args],
      {
        cwd: ROOT,
        env: { ...process.env, BERM_FROM_SOURCE: '', BERM_TEST_RECORD: record },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      const scripts = existsSync(record) ? JSON.parse(readFileSync(record, 'utf8')) : [];
      done({ code, stdout, stderr, scripts });
    });
  });
}

const bundleRan = (r: Run, root = ROOT) =>
  r.scripts.filter((s) => s.file === join(root, 'dist', 'berm-cli.cjs'));
const translatorRan = (r: Run, root = ROOT) =>
  r.scripts.filter((s) => s.file === join(root, 'dist', 'translate', 'baseline.cjs'));

/**
 * Check that `translator` writes, byte for byte, what the TypeScript sources' baseline translator
 * writes for three fixtures (two compilers, -O0 and -O2).
 */
async function sameOutputAsSources(
  t: Test,
  translator: typeof import('../src/translate/baseline.js'),
): Promise<void> {
  const { translateBaseline } = await import('../src/translate/baseline.js');
  const { readElf } = await import('../src/elf/reader.js');
  const { DEFAULT_TRANSLATE_OPTIONS } = await import('../src/translate/abi.js');
  for (const name of ['text-clang-O0.elf', 'echo-gcc-O2.elf', 'control-gcc-O0.elf']) {
    const image = readElf(new Uint8Array(readFileSync(join(ROOT, 'fixtures', 'build', name))));
    const a = translator.translateBaseline(image, DEFAULT_TRANSLATE_OPTIONS).wasm;
    const b = translateBaseline(image, DEFAULT_TRANSLATE_OPTIONS).wasm;
    t.ok(Buffer.from(a).equals(Buffer.from(b)), `${name}: ${a.length} bytes, byte-identical`);
  }
}

if (!builtIsCurrent()) {
  t.fail('dist/ is absent or older than the sources: run `npm run build` (make test builds first)');
} else {
  t.test('a warm tool call runs the bundle, compiled from its code cache', async (t) => {
    const compiled = await berm(['compile', ECHO]);
    t.equal(compiled.code, 0, compiled.stderr);
    const r = await berm(['call', ECHO, 'echo', '{"x":1}']);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout, '{"x":1}\n');
    t.same(bundleRan(r), [{ file: join(ROOT, 'dist', 'berm-cli.cjs'), offered: true, rejected: false }]);
  });

  // the build's code cache was made with V8's Wasm inlining on (Node 20): V8 refuses a cache made
  // under other flags, so a process that refuses inlining is seen to run without it
  t.test('BERM_WASM_INLINING=0 leaves V8 Wasm inlining off; the call is the same', async (t) => {
    if (!process.versions.v8.startsWith('11.')) {
      t.pass('inlining is set on V8 11 only');
      return;
    }
    process.env.BERM_WASM_INLINING = '0';
    let r: Run;
    try {
      r = await berm(['call', ECHO, 'echo', '{"x":2}']);
    } finally {
      delete process.env.BERM_WASM_INLINING;
    }
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout, '{"x":2}\n');
    t.same(bundleRan(r), [{ file: join(ROOT, 'dist', 'berm-cli.cjs'), offered: true, rejected: true }]);
  });

  t.test('a capability worker started from the bundle loads its dist/ module', async (t) => {
    const r = await berm([
      'call',
      '--config',
      'examples/harnesses.toml',
      'os',
      'exec',
      '{"command":"echo hi from exec"}',
    ]);
    t.equal(r.code, 0, r.stderr);
    t.match(JSON.parse(r.stdout), { stdout: 'hi from exec\n', exit_code: 0 });
    t.equal(bundleRan(r).length, 1);
  });

  t.test('files next to the modules: package.json (version), scripts/new-harness (new)', async (t) => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    // two arguments: not the launcher's shortcut, commander prints what program.ts read
    const v = await berm(['--version', '--verbose']);
    t.equal(v.code, 0, v.stderr);
    t.equal(v.stdout, `${version}\n`);
    t.equal(bundleRan(v).length, 1);
    const dir = join(TMP, 'demo_tool');
    const n = await berm(['new', dir]);
    t.equal(n.code, 0, n.stderr);
    t.ok(existsSync(join(dir, 'demo_tool.c')), 'scaffolded');
    t.equal(bundleRan(n).length, 1);
  });

  t.test('a stale or damaged code cache is not offered to V8; the bundle runs the same', async (t) => {
    const { root, bundle } = installedCopy('pkg');
    const cache = `${bundle}.v8cache`;
    const call = ['call', ECHO, 'echo', '{"y":2}'];

    let r = await berm(call, root);
    t.equal(r.stdout, '{"y":2}\n', r.stderr);
    t.same(
      bundleRan(r, root),
      [{ file: bundle, offered: true, rejected: false }],
      'the copy takes its cache',
    );

    const good = readFileSync(cache);
    const damaged = Buffer.from(good);
    damaged[damaged.length >> 1] ^= 0x55;
    writeFileSync(cache, damaged);
    r = await berm(call, root);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout, '{"y":2}\n');
    t.same(bundleRan(r, root), [{ file: bundle, offered: false }], 'a damaged cache: not offered');

    writeFileSync(cache, good);
    rmSync(cache);
    r = await berm(call, root);
    t.equal(r.stdout, '{"y":2}\n', r.stderr);
    t.same(bundleRan(r, root), [{ file: bundle, offered: false }], 'no cache');
  });

  t.test('a bundle that is not the one the build recorded is not run: dist/ unbundled runs', async (t) => {
    const { root, bundle } = installedCopy('pkg-cut');
    const good = readFileSync(bundle);
    const text = good.toString('utf8');
    // esbuild starts each module with a `// <path>` line; the entry (cli/main.js) comes last, so a
    // cut there leaves valid JavaScript that defines everything and runs nothing
    const lastModule = text.lastIndexOf('\n// ');
    t.match(text.slice(lastModule), /^\n\/\/ \S*cli\/main\.js\n/, 'the entry module is last');
    const record = JSON.parse(readFileSync(join(root, 'dist', '.build.json'), 'utf8')) as {
      bundle: { bytes: number; sha256: string };
    };
    t.equal(record.bundle.bytes, good.length, 'the build recorded the size');
    t.equal(record.bundle.sha256, createHash('sha256').update(good).digest('hex'), 'and the SHA-256');
    const call = ['call', ECHO, 'echo', '{"z":3}'];
    const cases: [string, Buffer, RegExp][] = [
      ['empty', Buffer.alloc(0), /has 0 bytes, the build wrote \d+/],
      ['truncated mid-file', good.subarray(0, good.length >> 1), /has \d+ bytes, the build wrote \d+/],
      ['truncated before the last module', good.subarray(0, lastModule + 1), /has \d+ bytes/],
      // same size, one byte changed: only the hash tells
      ['edited', Buffer.from(text.replace('berm CLI, bundled', 'berm CLI, bundleD')), /SHA-256 is not/],
    ];
    for (const [what, bytes, why] of cases) {
      writeFileSync(bundle, bytes);
      const r = await berm(call, root);
      t.equal(r.code, 0, `${what}: ${r.stderr}`);
      t.equal(r.stdout, '{"z":3}\n', `${what}: the call still answers`);
      t.equal(r.stderr.split('\n').length, 2, `${what}: one line on stderr`);
      t.match(r.stderr, `berm: not running ${bundle}: `, `${what}: names the bundle`);
      t.match(r.stderr, why, `${what}: says why`);
      t.same(bundleRan(r, root), [], `${what}: the bundle is not compiled`);
    }
    writeFileSync(bundle, good);
    const r = await berm(call, root);
    t.equal(r.stdout, '{"z":3}\n', r.stderr);
    t.equal(r.stderr, '');
    t.same(bundleRan(r, root), [{ file: bundle, offered: true, rejected: false }], 'restored: runs again');
  });

  // dist/translate/baseline.js is one ES module (scripts/bundle.mjs bundleTranslator): it imports
  // only the dist/ modules the engine itself loads, and writes what the sources write
  t.test("the built baseline translator is one module with the sources' output", async (t) => {
    const file = join(ROOT, 'dist', 'translate', 'baseline.js');
    const text = readFileSync(file, 'utf8');
    const imports = [
      ...text.matchAll(/(?:^|[;\s])import\s*(?:\{[^}]*\}|\*\s*as\s+\w+|\w+)\s*from\s*"([^"]+)"/g),
    ].map((m) => m[1]);
    t.notOk(/\bimport\(/.test(text), 'no dynamic import');
    t.same([...new Set(imports)].sort(), ['../util/leb.js', './abi.js']);
    await sameOutputAsSources(t, (await import(file)) as typeof import('../src/translate/baseline.js'));
  });
  // a cold call translates on the baseline tier: the engine runs dist/translate/baseline.cjs, not
  // the copy of the translator inside the bundle, compiled from the cache the build made for it
  t.test('a cold tool call runs the baseline script, compiled from its code cache', async (t) => {
    const r = await berm(['call', ECHO, 'echo', '{"c":1}'], ROOT, mkdtempSync(join(TMP, 'cold-')));
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout, '{"c":1}\n');
    const script = join(ROOT, 'dist', 'translate', 'baseline.cjs');
    t.same(translatorRan(r), [{ file: script, offered: true, rejected: false }]);
    t.equal(bundleRan(r).length, 1);
  });

  t.test("a damaged baseline script or cache is not used; the call's result is the same", async (t) => {
    const { root } = installedCopy('pkg-translator');
    const script = join(root, 'dist', 'translate', 'baseline.cjs');
    const cache = `${script}.v8cache`;
    const call = ['call', ECHO, 'echo', '{"d":4}'];
    const cold = () => mkdtempSync(join(TMP, 'cold-'));
    let r = await berm(call, root, cold());
    t.equal(r.stdout, '{"d":4}\n', r.stderr);
    t.same(translatorRan(r, root), [{ file: script, offered: true, rejected: false }], 'the copy takes it');

    const good = readFileSync(cache);
    const damaged = Buffer.from(good);
    damaged[damaged.length >> 1] ^= 0x55;
    writeFileSync(cache, damaged);
    r = await berm(call, root, cold());
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout, '{"d":4}\n');
    t.same(translatorRan(r, root), [{ file: script, offered: false }], 'a damaged cache: not offered');

    // a script that is not the one the build wrote is not run at all (a cut between its modules
    // is still valid JavaScript; an edit that keeps its exports would translate differently
    // under the current cache key): the translator's ES module translates, and stderr says why
    writeFileSync(cache, good);
    const text = readFileSync(script);
    const sameLength = Buffer.from(text);
    const at = sameLength.indexOf('sourceMappingURL=baseline.cjs.map');
    t.ok(at > 0, 'the script names its source map');
    sameLength.write('x', at + 'sourceMappingURL=baseline.cj'.length);
    const renamed = Buffer.from(text);
    renamed[renamed.indexOf('translateBaseline')] = 'T'.charCodeAt(0);
    const variants: [string, Buffer][] = [
      ['empty', Buffer.alloc(0)],
      ['truncated mid-file', text.subarray(0, text.length >> 1)],
      ['an edit that keeps its exports, the same length', sameLength],
      ['an edit that loses translateBaseline', renamed],
    ];
    for (const [what, bytes] of variants) {
      writeFileSync(script, bytes);
      r = await berm(call, root, cold());
      t.equal(r.code, 0, `${what}: the call succeeds (${r.stderr})`);
      t.equal(r.stdout, '{"d":4}\n', `${what}: the same result`);
      t.same(translatorRan(r, root), [], `${what}: not run`);
      t.match(
        r.stderr,
        `berm: not running ${script}: it is not the script the build wrote (${bytes.length} bytes`,
        `${what}: stderr says why`,
      );
    }
    writeFileSync(script, text);
  });

  t.test(
    'an embedder started with --stack-size=4000 gets the baseline script from its code cache',
    async (t) => {
      // the engine sets --stack-size back to V8's default when it loads (v8-flags.ts): the cache was
      // made under the default value, and V8 refuses a cache made under other flags
      const code = [
        `await import(${JSON.stringify(join(ROOT, 'dist', 'engine', 'engine.js'))});`,
        `const { loadBaseline } = await import(${JSON.stringify(join(ROOT, 'dist', 'engine', 'baseline-script.js'))});`,
        `process.stdout.write((await loadBaseline()).source);`,
      ].join('\n');
      const run = (flags: string[]) =>
        new Promise<string>((done, reject) => {
          const child = spawn(process.execPath, [...flags, '--input-type=module', '-e', code], {
            stdio: ['ignore', 'pipe', 'inherit'],
          });
          let out = '';
          child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
          child.on('error', reject);
          child.on('close', () => done(out));
        });
      t.equal(await run(['--stack-size=4000']), 'script+cache', 'with --stack-size=4000');
      t.equal(await run([]), 'script+cache', 'without');
    },
  );

  t.test('the baseline script writes what the sources write', async (t) => {
    const { loadBaseline } = (await import(
      join(ROOT, 'dist', 'engine', 'baseline-script.js')
    )) as typeof import('../src/engine/baseline-script.js');
    const { translator, source } = await loadBaseline();
    t.match(source, /^script/, 'the script, not the module');
    await sameOutputAsSources(t, translator);
  });
}

// The bundled CLI as bin/berm.js runs it from a current build: dist/berm-cli.cjs (one CommonJS
// file, scripts/bundle.mjs) compiled with the V8 code cache the build made. A preload wraps
// vm.Script to record which file the launcher compiled and whether V8 took the cache, so each
// test knows the bundle ran. Covered: a warm tool call (cache accepted), a capability whose
// worker thread loads its dist/ module through a rewritten import.meta.url, files found next to
// the modules (package.json, scripts/new-harness), and a stale or damaged cache (ignored, same
// output).
import { spawn } from 'node:child_process';
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
import t from 'tap';
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

let runs = 0;
function berm(args: string[], root = ROOT): Promise<Run> {
  const record = join(TMP, `record-${runs++}.json`);
  return new Promise((done, reject) => {
    const child = spawn(
      process.execPath,
      ['--stack-size=4000', '-r', PRELOAD, join(root, 'bin', 'berm.js'), '--cache-dir', CACHE, ...args],
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
    // an installed-package tree (dist/ without src/): a copy whose files the test may change
    const root = join(TMP, 'pkg');
    mkdirSync(root);
    for (const p of ['bin', 'dist', 'package.json'])
      cpSync(join(ROOT, p), join(root, p), { recursive: true });
    symlinkSync(join(ROOT, 'node_modules'), join(root, 'node_modules'));
    const bundle = join(root, 'dist', 'berm-cli.cjs');
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
    writeFileSync(bundle, readFileSync(bundle, 'utf8') + '// edited, not ASCII: \u2192\n');
    r = await berm(call, root);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout, '{"y":2}\n');
    t.same(
      bundleRan(r, root),
      [{ file: bundle, offered: false }],
      'an edited bundle: its old cache not offered',
    );

    rmSync(cache);
    r = await berm(call, root);
    t.equal(r.stdout, '{"y":2}\n', r.stderr);
    t.same(bundleRan(r, root), [{ file: bundle, offered: false }], 'no cache');
  });
}

// The engine's warm path as a build runs it for ES module users (bench/, bermd, a library):
// dist/engine/warm-path.cjs, one CommonJS script compiled with the V8 code cache the build made
// (src/engine/warm-script.ts, src/engine/cached-script.ts). A child process imports a copy of
// dist/engine/engine.js and compiles echo-gcc-O2 (baseline tier: no Binaryen) from a filled cache;
// a preload records which files were compiled through vm.Script and whether V8 took the cache.
// Covered: the script runs from its cache; a damaged cache is not offered; a script that is not
// the one the build wrote is not run (one line on stderr, the ES module's results); a damaged
// cache entry read by the script is detected, removed and recompiled; the CLI bundle does not
// read the script (its own code cache holds the path).
import { spawnSync } from 'node:child_process';
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { builtIsCurrent } from '../bin/launch.js';
import { ROOT } from './helpers/fixtures.js';

const TMP = realpathSync(mkdtempSync(join(tmpdir(), 'berm-warm-script-')));
t.teardown(() => rmSync(TMP, { recursive: true, force: true }));
const ECHO = join(ROOT, 'fixtures', 'build', 'echo-gcc-O2.elf');

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

/** bin/, dist/ and package.json copied under TMP/`name` (node_modules linked): files a test may change. */
function copy(name: string): string {
  const root = join(TMP, name);
  mkdirSync(root);
  for (const p of ['bin', 'dist', 'package.json']) cpSync(join(ROOT, p), join(root, p), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(root, 'node_modules'));
  return root;
}

interface Compiled {
  cached: boolean;
  exports: string[];
  source: string;
  result: string;
}
interface Run {
  status: number | null;
  stderr: string;
  out: Compiled | null;
  scripts: { file: string; offered: boolean; rejected?: boolean }[];
}

let runs = 0;
/** A fresh process that compiles echo with `root`'s dist/ engine into `cacheDir` and calls `echo`. */
function compile(root: string, cacheDir: string): Run {
  const record = join(TMP, `record-${runs++}.json`);
  const engine = pathToFileURL(join(root, 'dist', 'engine', 'engine.js')).href;
  const harness = pathToFileURL(join(root, 'dist', 'harness', 'harness.js')).href;
  const warmScript = pathToFileURL(join(root, 'dist', 'engine', 'warm-script.js')).href;
  const code = `
const { Engine } = await import(${JSON.stringify(engine)});
const { Harness } = await import(${JSON.stringify(harness)});
const { loadWarmPath } = await import(${JSON.stringify(warmScript)});
const engine = new Engine({ cacheDir: ${JSON.stringify(cacheDir)}, tier: 'baseline' });
const h = await Harness.load(engine, ${JSON.stringify(ECHO)});
const r = h.invoke('echo', '{"w":7}');
console.log(JSON.stringify({ cached: h.module.info.cached, exports: h.module.exports().sort(),
  source: loadWarmPath().source, result: r.status === 'ok' ? r.result : r.message }));`;
  const r = spawnSync(
    process.execPath,
    ['--stack-size=4000', '-r', PRELOAD, '--input-type=module', '-e', code],
    { encoding: 'utf8', env: { ...process.env, BERM_TEST_RECORD: record }, timeout: 60_000 },
  );
  const scripts = JSON.parse(readFileSync(record, 'utf8')) as Run['scripts'];
  let out: Compiled | null = null;
  try {
    out = JSON.parse(r.stdout) as Compiled;
  } catch {
    out = null;
  }
  return { status: r.status, stderr: r.stderr, out, scripts };
}

const warmRan = (r: Run, root: string) =>
  r.scripts.filter((s) => s.file === join(root, 'dist', 'engine', 'warm-path.cjs'));

if (!builtIsCurrent()) {
  t.fail('dist/ is absent or older than the sources: run `npm run build` (make test builds first)');
} else {
  // what the sources' engine exports for echo (no cache): every mode must give the same module
  const { Engine } = await import('../src/engine/engine.js');
  const EXPORTS = (await new Engine({ cacheDir: null, tier: 'baseline' }).compile(ECHO)).exports().sort();
  const root = copy('pkg');
  const script = join(root, 'dist', 'engine', 'warm-path.cjs');
  const cache = `${script}.v8cache`;
  const dir = mkdtempSync(join(TMP, 'cache-'));
  const filled = compile(root, dir);

  t.test('a cold compile fills the cache; a warm one runs the script from its code cache', async (t) => {
    t.equal(filled.status, 0, filled.stderr);
    t.same(filled.out, { cached: false, exports: EXPORTS, source: 'script+cache', result: '{"w":7}' });
    const r = compile(root, dir);
    t.equal(r.status, 0, r.stderr);
    t.equal(r.stderr, '');
    t.same(r.out, { cached: true, exports: EXPORTS, source: 'script+cache', result: '{"w":7}' });
    t.same(warmRan(r, root), [{ file: script, offered: true, rejected: false }]);
  });

  t.test('a damaged code cache is not offered to V8; the compile is the same', async (t) => {
    const good = readFileSync(cache);
    const damaged = Buffer.from(good);
    damaged[damaged.length >> 1] ^= 0x55;
    writeFileSync(cache, damaged);
    const r = compile(root, dir);
    writeFileSync(cache, good);
    t.equal(r.status, 0, r.stderr);
    t.equal(r.stderr, '');
    t.same(r.out, { cached: true, exports: EXPORTS, source: 'script', result: '{"w":7}' });
    t.same(warmRan(r, root), [{ file: script, offered: false }]);
  });

  t.test('a script that is not the one the build wrote is not run: the ES module compiles', async (t) => {
    const text = readFileSync(script);
    const sameLength = Buffer.from(text);
    const at = sameLength.indexOf('sourceMappingURL=warm-path.cjs.map');
    t.ok(at > 0, 'the script names its source map');
    sameLength.write('x', at + 'sourceMappingURL=warm-path.cj'.length);
    const renamed = Buffer.from(text);
    renamed[renamed.indexOf('loadCached')] = 'L'.charCodeAt(0);
    const variants: [string, Buffer][] = [
      ['empty', Buffer.alloc(0)],
      ['truncated mid-file', text.subarray(0, text.length >> 1)],
      ['an edit that keeps its exports, the same length', sameLength],
      ['an edit that loses loadCached', renamed],
    ];
    for (const [what, bytes] of variants) {
      writeFileSync(script, bytes);
      const r = compile(root, dir);
      t.equal(r.status, 0, `${what}: the compile succeeds (${r.stderr})`);
      t.same(r.out, { cached: true, exports: EXPORTS, source: 'module', result: '{"w":7}' }, what);
      t.same(warmRan(r, root), [], `${what}: not run`);
      t.equal(
        r.stderr,
        `berm: not running ${script}: it is not the script the build wrote (${bytes.length} bytes, another SHA-256); the ES module runs instead (rebuild: npm run build)\n`,
        `${what}: one line on stderr says why`,
      );
    }
    writeFileSync(script, text);
  });

  t.test('a damaged cache entry read by the script is removed and recompiled', async (t) => {
    const entry = join(
      dir,
      readdirSync(dir).find((f) => f.endsWith('.wasm'))!,
    );
    const good = readFileSync(entry);
    for (const bad of [
      good.subarray(0, good.length - 7),
      Buffer.concat([good.subarray(0, 100), Buffer.from([good[100] ^ 1]), good.subarray(101)]),
      Buffer.alloc(0),
    ]) {
      writeFileSync(entry, bad);
      const r = compile(root, dir);
      t.equal(r.status, 0, r.stderr);
      t.same(r.out, { cached: false, exports: EXPORTS, source: 'script+cache', result: '{"w":7}' }, 'a miss');
      t.same(readFileSync(entry), good, 'and is rewritten whole');
    }
    t.same(compile(root, dir).out?.cached, true);
  });

  t.test('the CLI bundle does not read the script', async (t) => {
    const record = join(TMP, `record-${runs++}.json`);
    const r = spawnSync(
      process.execPath,
      [
        '--stack-size=4000',
        '-r',
        PRELOAD,
        join(root, 'bin', 'berm.js'),
        '--cache-dir',
        dir,
        'call',
        ECHO,
        'echo',
        '{"v":1}',
      ],
      {
        encoding: 'utf8',
        env: { ...process.env, BERM_FROM_SOURCE: '', BERM_TEST_RECORD: record },
        timeout: 60_000,
      },
    );
    t.equal(r.status, 0, r.stderr);
    t.equal(r.stdout, '{"v":1}\n');
    const scripts = JSON.parse(readFileSync(record, 'utf8')) as Run['scripts'];
    t.same(
      scripts.map((s) => s.file),
      [join(root, 'dist', 'berm-cli.cjs')],
      'the bundle only',
    );
  });
}

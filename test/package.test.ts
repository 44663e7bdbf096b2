// The package as an embedder gets it: `npm pack` of a copy of this checkout (its `prepare` builds
// dist/, unless the checkout's dist/ is current), the tarball installed into an empty project with npm itself (no network: the
// dependencies come from npm's cache through a lock file naming them, as after `npm ci` here),
// then a TypeScript program that imports 'berm', runs a harness tool and answers the harness's
// call to its own capability `acme.upper`, type-checked by tsc against the shipped .d.ts and run
// with plain node; and the installed `berm` bin running a tool without a TypeScript loader.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { builtIsCurrent } from '../bin/launch.js';
import { ROOT } from './helpers/fixtures.js';

const work = mkdtempSync(join(tmpdir(), 'berm-package-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));

const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const run = (cmd: string, args: string[], cwd: string) =>
  spawnSync(cmd, args, {
    cwd,
    encoding: 'utf8',
    timeout: 300_000,
    env: { ...process.env, npm_config_update_notifier: 'false' },
  });

/** Pack a copy of the checkout (never the checkout itself: its dist/ may be in use by other tests). */
function pack(): string {
  const copy = join(work, 'src-copy');
  mkdirSync(copy);
  for (const p of [
    'package.json',
    'README.md',
    'tsconfig.json',
    'tsconfig.build.json',
    'src',
    'bin',
    'docs',
    'guest-sdk',
  ]) {
    // not build outputs: C builds (build/), cargo's (target/), the Rust SDK's crate links (.vendor)
    cpSync(join(ROOT, p), join(copy, p), {
      recursive: true,
      filter: (s) => !/\/(build|target|\.vendor)(\/|$)/.test(s),
    });
  }
  mkdirSync(join(copy, 'scripts'));
  for (const p of ['build.mjs', 'bundle.mjs', 'new-harness'])
    cpSync(join(ROOT, 'scripts', p), join(copy, 'scripts', p));
  // the build needs TypeScript and the packages' types; nothing writes into node_modules
  symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'));
  // a current dist/ of this checkout is what `prepare` would build (make unit builds it first): reuse
  // it rather than compile twice; otherwise `npm pack` runs `prepare`
  const reuse = builtIsCurrent();
  if (reuse) cpSync(join(ROOT, 'dist'), join(copy, 'dist'), { recursive: true });
  const flags = reuse ? ['--ignore-scripts'] : [];
  const r = run('npm', ['pack', '--silent', ...flags, '--pack-destination', work], copy);
  if (r.status !== 0) throw new Error(`npm pack failed:\n${r.stdout}\n${r.stderr}`);
  const tgz = readdirSync(work).find((n) => n.endsWith('.tgz'));
  if (!tgz) throw new Error(`npm pack wrote no tarball:\n${r.stdout}`);
  return join(work, tgz);
}

/**
 * An empty project depending on the tarball, with a lock file naming the tarball and every
 * production dependency at the version, URL and integrity of this checkout's lock file, so that
 * `npm ci --offline` takes everything from npm's cache.
 */
function project(tgz: string): string {
  const dir = join(work, 'embedder');
  mkdirSync(dir);
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    version: string;
    dependencies: Record<string, string>;
    bin: Record<string, string>;
    engines: Record<string, string>;
  };
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { dev?: boolean }>;
  };
  const spec = `file:../${tgz.split('/').pop()}`;
  const integrity = `sha512-${createHash('sha512').update(readFileSync(tgz)).digest('base64')}`;
  const packages: Record<string, unknown> = {
    '': { name: 'embedder', version: '1.0.0', dependencies: { berm: spec } },
    'node_modules/berm': {
      version: pkg.version,
      resolved: spec,
      integrity,
      license: 'MIT',
      dependencies: pkg.dependencies,
      bin: pkg.bin,
      engines: pkg.engines,
    },
  };
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (path !== '' && !entry.dev) packages[path] = entry;
  }
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify(
      { name: 'embedder', version: '1.0.0', type: 'module', dependencies: { berm: spec } },
      null,
      2,
    ),
  );
  writeFileSync(
    join(dir, 'package-lock.json'),
    JSON.stringify(
      { name: 'embedder', version: '1.0.0', lockfileVersion: 3, requires: true, packages },
      null,
      2,
    ),
  );
  return dir;
}

const EMBED = `
import { Engine, Harness, type ToolResult, type WireHandler } from 'berm';

const enc = new TextEncoder();
const dec = new TextDecoder();
// the embedder's own capability: a name (hashed with FNV-1a-64 like the built-ins) and a handler
// from the request's fields to a reply
const upper: WireHandler = (fields) => ({ fields: [enc.encode(dec.decode(fields[0]).toUpperCase())] });

const engine = new Engine({ cacheDir: process.argv[3] });
const harness = await Harness.load(engine, process.argv[2]);
const r: ToolResult = harness.invoke('shout', '{"text":"hello, berm"}', {
  capabilities: new Map([['acme.upper', upper]]),
});
console.log(JSON.stringify(r));
`;

// a misuse the shipped types must catch (a tool name is a string)
const MISUSE = `
import { Engine, Harness } from 'berm';
const h = await Harness.load(new Engine(), 'x.elf');
h.invoke(42, '{}');
`;

const TSCONFIG = {
  compilerOptions: {
    target: 'ES2022',
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    strict: true,
    skipLibCheck: false,
    outDir: 'out',
    types: ['node'],
    typeRoots: [join(ROOT, 'node_modules', '@types')],
  },
  files: ['embed.ts'],
};

t.test('npm pack, install into an empty project, type-check and run the documented API', async (t) => {
  const tgz = pack();
  const listing = execFileSync('tar', ['tzf', tgz], { encoding: 'utf8' }).split('\n');
  t.ok(
    listing.includes('package/dist/index.js') && listing.includes('package/dist/index.d.ts'),
    'compiled JS and .d.ts',
  );
  t.ok(listing.includes('package/dist/.build.json'), 'the build stamp');
  t.notOk(
    listing.some((n) => n.startsWith('package/src/') || n.startsWith('package/test/')),
    'no sources or tests',
  );
  const { exports } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    exports: Record<string, string | Record<string, string>>;
  };
  for (const [entry, target] of Object.entries(exports)) {
    for (const file of typeof target === 'string' ? [target] : Object.values(target)) {
      t.ok(
        listing.includes(`package/${file.replace(/^\.\//, '')}`),
        `exports ${entry}: ${file} is in the tarball`,
      );
    }
  }

  const dir = project(tgz);
  let r = run('npm', ['ci', '--offline', '--ignore-scripts', '--no-audit', '--no-fund'], dir);
  if (r.status !== 0 && /ENOTCACHED/.test(r.stderr)) {
    // a cache that lacks a package (not the case after `npm ci` of this checkout): the registry
    t.comment('npm cache incomplete, installing with --prefer-offline');
    r = run('npm', ['ci', '--prefer-offline', '--ignore-scripts', '--no-audit', '--no-fund'], dir);
  }
  t.equal(r.status, 0, `npm ci of the tarball:\n${r.stderr}`);
  const installed = JSON.parse(readFileSync(join(dir, 'node_modules', 'berm', 'package.json'), 'utf8'));
  t.equal(installed.private, undefined, 'the package is not private');

  writeFileSync(join(dir, 'embed.ts'), EMBED);
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(TSCONFIG));
  r = run(process.execPath, [TSC, '-p', 'tsconfig.json'], dir);
  t.equal(r.status, 0, `tsc against the shipped .d.ts:\n${r.stdout}${r.stderr}`);

  writeFileSync(join(dir, 'misuse.ts'), MISUSE);
  writeFileSync(join(dir, 'tsconfig.misuse.json'), JSON.stringify({ ...TSCONFIG, files: ['misuse.ts'] }));
  r = run(process.execPath, [TSC, '-p', 'tsconfig.misuse.json', '--noEmit'], dir);
  t.not(r.status, 0, 'a misuse is a type error (the API is typed, not any)');
  t.match(r.stdout, /misuse\.ts.*TS2345/, 'the error names the bad argument');

  const cache = join(work, 'cache');
  r = run(
    process.execPath,
    ['--stack-size=4000', 'out/embed.js', join(ROOT, 'test', 'data', 'shout.elf'), cache],
    dir,
  );
  t.equal(r.status, 0, r.stderr);
  t.same(JSON.parse(r.stdout), { status: 'ok', result: '{"TEXT":"HELLO, BERM"}', logs: [] });

  // the installed CLI runs the compiled JavaScript: no src/ in the package, no loader
  const berm = join(dir, 'node_modules', '.bin', 'berm');
  r = run(
    berm,
    ['--cache-dir', cache, 'call', join(ROOT, 'fixtures', 'build', 'echo-gcc-O2.elf'), 'echo', '{"a":[1,2]}'],
    dir,
  );
  t.equal(r.status, 0, r.stderr);
  t.equal(r.stdout.trim(), '{"a":[1,2]}');
  r = run(berm, ['--version'], dir);
  t.equal(r.stdout.trim(), installed.version);
});

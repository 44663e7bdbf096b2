// The CLI bundle (used by scripts/build.mjs): the compiled CLI (dist/cli/main.js and every module
// it reaches) as ONE CommonJS file, dist/berm-cli.cjs, which bin/berm.js runs through
// bin/launch.js, plus a V8 code cache for it, dist/berm-cli.cjs.v8cache.
//
// Why: a CLI tool call is a whole process, and its start is dominated by loading code. Run as ES
// modules, dist/ costs Node's ESM loader (and the fs/promises, readline and stream internals it
// pulls in), a resolution and a read per module, and a compile of every function it calls. One
// CommonJS file is one read and one compile; with the code cache even that compile, and the lazy
// compiles of the functions a call runs, become a deserialisation.
//
// What the bundle keeps exactly as in dist/:
// - every `import.meta.url` becomes the URL of the module's file in dist/ (computed from the
//   bundle's own location), so the worker scripts, *.proto files and package.json a module finds
//   next to itself resolve to the very files the unbundled modules use;
// - the npm packages stay separate and are required when first used (`createRequire(...)(name)`
//   becomes a plain `require(name)`, resolved from dist/ as before); only commander, which every
//   start needs, is inside. commander requires node:child_process at load, for executable
//   subcommands berm does not use: inside the bundle that require returns an object that loads
//   node:child_process on first use, so a call does not pay for it (nor for net and dgram);
// - the dynamic imports between berm's modules load lazily still (esbuild wraps each such module in
//   an init function), so a tool call evaluates no more modules than before;
// - binaryen is an ES module with top-level await, which require() cannot load: a dynamic import
//   of a module that reaches binaryen through static imports first imports binaryen (by its file
//   URL, through Node's ESM loader), and the bundle's `binaryen` is that module's default export.
// Workers are separate threads that import their dist/ modules as before; nothing in the main
// thread imports a dist/ module that the bundle also holds (two instances would not share classes).
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative, sep } from 'node:path';

/** The bundle's file name under dist/ (bin/berm.js names it too). */
export const CLI_BUNDLE = 'berm-cli.cjs';

/** A module's `import.meta.url` inside the bundle: its dist/ file's URL, relative to the bundle's. */
function metaUrl(rel) {
  return `new URL(${JSON.stringify(rel.split(sep).join('/'))}, require("node:url").pathToFileURL(__filename)).href`;
}

const LAZY_CHILD_PROCESS = `
let loaded;
const load = () => (loaded ??= require("node:child_process"));
module.exports = new Proxy({}, {
  get: (_, key) => load()[key],
  has: (_, key) => key in load(),
  ownKeys: () => Reflect.ownKeys(load()),
  getOwnPropertyDescriptor: (_, key) => Reflect.getOwnPropertyDescriptor(load(), key),
});
`;

/** The files under `dir`, recursively (scripts/build.mjs uses it too). */
export function* walk(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) yield* walk(p);
    else yield p;
  }
}

/** The static imports (`import ... from 'x'`, `export ... from 'x'`, `import 'x'`) of module text. */
function staticImports(text) {
  const re = /^\s*(?:(?:import|export)\s[^;'"]*?\bfrom\s*|import\s*)(['"])([^'"]+)\1/gm;
  return [...text.matchAll(re)].map((m) => m[2]);
}

/** The .js files under `out` that load `pkg` through static imports, directly or not. */
function reaching(out, pkg) {
  const deps = new Map();
  for (const file of walk(out)) {
    if (!file.endsWith('.js')) continue;
    const specs = staticImports(readFileSync(file, 'utf8'));
    deps.set(
      file,
      specs.map((s) => (s.startsWith('.') ? join(dirname(file), s) : s)),
    );
  }
  const found = new Set();
  let grew = true;
  while (grew) {
    grew = false;
    for (const [file, ds] of deps) {
      if (!found.has(file) && ds.some((d) => d === pkg || found.has(d))) {
        found.add(file);
        grew = true;
      }
    }
  }
  return found;
}

// the bundle's binaryen: the default export of the ES module, set by __bermBinaryen() (banner)
const BINARYEN_HOLDER = `
if (__bermBinaryenDefault === undefined) throw new Error("berm bundle: binaryen used before __bermBinaryen() loaded it");
module.exports = __bermBinaryenDefault;
`;
// __bermImport: bin/launch.js's import(), passed in (a dynamic import() inside a vm.Script that
// has a code cache finds no loader in Node 20); import() itself when Node loads the bundle
const BANNER = `// berm CLI, bundled by scripts/bundle.mjs from the modules in this folder
let __bermBinaryenDefault;
const __bermBinaryen = () =>
  (typeof __bermImport === "function" ? __bermImport : (url) => import(url))(
    require("node:url").pathToFileURL(require.resolve("binaryen")).href,
  ).then((m) => {
    __bermBinaryenDefault = m.default;
  });`;

/**
 * Bundle `dist/cli/main.js` of the build in `out` (a complete dist/ tree) into `out/berm-cli.cjs`.
 * @throws Error when esbuild fails or the bundle holds something the launcher cannot run (a
 *   dynamic `import()` other than the banner's)
 */
export async function bundleCli(out) {
  const root = dirname(out);
  const require = createRequire(join(root, 'package.json'));
  const esbuild = require('esbuild');
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const external = Object.keys(pkg.dependencies).filter((name) => name !== 'commander');
  const outfile = join(out, CLI_BUNDLE);
  const inDist = (p) => p.startsWith(out + sep);
  const needBinaryen = reaching(out, 'binaryen');
  let binaryenLoads = 0;
  await esbuild.build({
    entryPoints: [join(out, 'cli', 'main.js')],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    charset: 'ascii',
    external,
    logLevel: 'error',
    legalComments: 'none',
    // a trap's (and any error's) name is its class name: keep names esbuild would rename on collision
    keepNames: true,
    banner: { js: BANNER },
    plugins: [
      {
        name: 'berm-dist',
        setup(build) {
          build.onLoad({ filter: /\.js$/ }, (args) => {
            if (!inDist(args.path)) return undefined;
            const text = readFileSync(args.path, 'utf8')
              .replace(/\bcreateRequire\(import\.meta\.url\)\(/g, 'require(')
              .replace(/\bimport\((['"])(\.[^'"]+)\1\)/g, (call, _q, spec) => {
                if (!needBinaryen.has(join(dirname(args.path), spec))) return call;
                binaryenLoads++;
                return `__bermBinaryen().then(() => ${call})`;
              })
              .replaceAll('import.meta.url', metaUrl(relative(out, args.path)));
            return { contents: text, loader: 'js' };
          });
          build.onResolve({ filter: /^binaryen$/ }, (args) =>
            args.kind === 'import-statement' && inDist(args.importer)
              ? { path: 'binaryen', namespace: 'berm-binaryen' }
              : undefined,
          );
          build.onLoad({ filter: /.*/, namespace: 'berm-binaryen' }, () => ({
            contents: BINARYEN_HOLDER,
            loader: 'js',
          }));
          build.onResolve({ filter: /^node:child_process$/ }, (args) =>
            /[/\\]node_modules[/\\]commander[/\\]/.test(args.importer)
              ? { path: 'lazy-child-process', namespace: 'berm-lazy' }
              : undefined,
          );
          build.onLoad({ filter: /.*/, namespace: 'berm-lazy' }, () => ({
            contents: LAZY_CHILD_PROCESS,
            loader: 'js',
            resolveDir: out,
          }));
        },
      },
    ],
  });
  const text = readFileSync(outfile, 'utf8');
  // a dynamic import() needs Node's ESM loader, which the bundle exists to avoid: berm's modules
  // load npm packages by require, except binaryen (the banner's import(), or the launcher's)
  const imports = text.match(/\bimport\(/g) ?? [];
  if (imports.length !== 1) throw new Error(`${outfile} holds ${imports.length} dynamic imports, not 1`);
  if (binaryenLoads === 0 || /require\("binaryen"\)/.test(text))
    throw new Error(`${outfile}: binaryen is not loaded through __bermBinaryen()`);
}

/** The .js files `entry` reaches through static imports of relative paths (itself included). */
function staticGraph(entry) {
  const seen = new Set();
  const todo = [entry];
  while (todo.length > 0) {
    const file = todo.pop();
    if (seen.has(file)) continue;
    seen.add(file);
    for (const s of staticImports(readFileSync(file, 'utf8'))) {
      if (s.startsWith('.')) todo.push(join(dirname(file), s));
    }
  }
  return seen;
}

/** The module the engine imports when it translates on the baseline tier, under dist/. */
export const BASELINE_MODULE = join('translate', 'baseline.js');

/**
 * The same translator as one CommonJS script, which the engine runs with a V8 code cache
 * (src/engine/baseline-script.ts), under dist/.
 */
export const BASELINE_SCRIPT = join('translate', 'baseline.cjs');

/**
 * Replace `out`/translate/baseline.js (the baseline tier, which the engine imports on its first
 * cache miss) with one ES module holding it and the modules only it reaches: the ESM loader then
 * resolves, reads and links one file on a cold compile instead of fourteen (about half the cost
 * of that import, measured on the fixtures). The modules the engine's own static imports reach
 * (src/translate/abi.ts with TranslateError, say) stay imports of their dist/ files, so the
 * engine and the translator share one instance of each. The other dist/ files stay as they are
 * (the optimising tier and its worker import them).
 * Also writes the same bundle as one CommonJS script, `out`/translate/baseline.cjs, whose
 * `require`s of those shared modules the engine answers with its own instances: what the engine
 * runs when it exists, with the V8 code cache {@link writeCodeCache} makes for it (Node 20 has no
 * code cache for ES modules); the ES module stays for a build without the script.
 * @throws Error when esbuild fails
 */
export async function bundleTranslator(out) {
  const require = createRequire(join(dirname(out), 'package.json'));
  const esbuild = require('esbuild');
  const entry = join(out, BASELINE_MODULE);
  const shared = staticGraph(join(out, 'engine', 'engine.js'));
  const build = (format, outfile) =>
    esbuild.build({
      entryPoints: [entry],
      outfile,
      bundle: true,
      platform: 'node',
      format,
      target: 'node20',
      charset: 'ascii',
      logLevel: 'error',
      legalComments: 'none',
      // no keepNames: it wraps every function and closure a translation creates in a call that sets
      // its name (about 4 % of a cold translation), and no error class is defined in these modules
      sourcemap: true,
      // a third less source for V8 to parse on the import (names stay: stack traces keep them, and
      // the source map leads to the sources)
      minifyWhitespace: true,
      minifySyntax: true,
      plugins: [
        {
          name: 'berm-shared',
          setup(build) {
            build.onResolve({ filter: /^\./ }, (args) => {
              const file = join(args.resolveDir, args.path);
              if (!shared.has(file)) return undefined;
              let rel = relative(dirname(entry), file).split(sep).join('/');
              if (!rel.startsWith('.')) rel = `./${rel}`;
              return { path: rel, external: true };
            });
          },
        },
      ],
    });
  // the script form first, while `entry` is still tsc's module
  const script = join(out, BASELINE_SCRIPT);
  await build('cjs', `${script}.tmp-${process.pid}.js`);
  moveBuilt(`${script}.tmp-${process.pid}.js`, script);
  fixScriptDigest(out, readFileSync(script));
  const tmp = `${entry}.tmp-${process.pid}.js`;
  await build('esm', tmp);
  moveBuilt(tmp, entry);
}

/**
 * Fix the SHA-256 of the baseline script's `bytes` into `out`/engine/baseline-script.js (its line
 * `const SCRIPT_SHA256 = null;`), which runs the script only when its bytes have that digest.
 * Before the CLI is bundled, so the bundle carries the fixed line too.
 * @throws Error when the compiled module has no such line
 */
function fixScriptDigest(out, bytes) {
  const file = join(out, 'engine', 'baseline-script.js');
  const text = readFileSync(file, 'utf8');
  const marker = /^const SCRIPT_SHA256 = null;$/m;
  if (!marker.test(text))
    throw new Error(`${file} has no line "const SCRIPT_SHA256 = null;" to fix the digest in`);
  const digest = createHash('sha256').update(bytes).digest('hex');
  writeFileSync(file, text.replace(marker, `const SCRIPT_SHA256 = ${JSON.stringify(digest)};`));
}

/** Move esbuild's output `tmp` (and its source map) to `file`, the map's reference renamed. */
function moveBuilt(tmp, file) {
  const text = readFileSync(tmp, 'utf8').replace(
    /\/\/# sourceMappingURL=.*$/m,
    `//# sourceMappingURL=${basename(file)}.map`,
  );
  writeFileSync(file, text);
  renameSync(`${tmp}.map`, `${file}.map`);
  rmSync(tmp);
}

/**
 * Write the code caches of the build in `root`/dist from representative runs of the built CLI
 * (bin/berm.js with BERM_CODE_CACHE=write), when the checkout has the echo fixture: a cold tool
 * call of it into an empty scratch cache (the baseline translator runs: its script's cache,
 * src/engine/baseline-script.ts), then a warm one (the bundle's cache: the cold run wrote one too,
 * deleted before, since a run compiled from a cache puts everything in it into the cache it
 * makes); without the fixture, `berm --help` for the bundle's. Same V8 flags as bin/berm.js's shebang (--stack-size=4000): V8 refuses a cache made
 * under other flags. Never fails the build: without a cache the code compiles as usual.
 */
export function writeCodeCache(root) {
  const berm = join(root, 'bin', 'berm.js');
  const elf = join(root, 'fixtures', 'build', 'echo-gcc-O2.elf');
  const scratch = mkdtempSync(join(tmpdir(), 'berm-build-'));
  const run = (cacheDir, args, env = {}) =>
    spawnSync(process.execPath, ['--stack-size=4000', berm, '--cache-dir', cacheDir, ...args], {
      encoding: 'utf8',
      env: { ...process.env, BERM_FROM_SOURCE: '', ...env },
      timeout: 120_000,
    });
  const made = (file, what, r) => {
    if (r.status !== 0 || !existsSync(join(root, 'dist', file)))
      console.error(
        `berm build: no code cache for ${file} (berm ${what}: ${r.status ?? r.signal}) ${r.stderr}`,
      );
  };
  const args = existsSync(elf) ? ['call', elf, 'echo', '{"x":1}'] : ['--help'];
  try {
    if (args[0] === 'call') {
      const r = run(join(scratch, 'cold'), args, { BERM_CODE_CACHE: 'write' });
      made(`${BASELINE_SCRIPT}.v8cache`, 'call, cold', r);
      // the bundle's cache of that run would be read by the next one and carried into its cache
      rmSync(join(root, 'dist', `${CLI_BUNDLE}.v8cache`), { force: true });
      run(scratch, ['compile', elf]);
    }
    made(`${CLI_BUNDLE}.v8cache`, args[0], run(scratch, args, { BERM_CODE_CACHE: 'write' }));
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

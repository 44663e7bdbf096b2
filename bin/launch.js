'use strict';
// Shared by the launchers (bin/berm.js, bin/bermd.js): run the compiled JavaScript in dist/ when it
// is a build of the current sources, else the TypeScript sources through the esbuild-based loader
// (scripts/ts/hooks.mjs), so an edited checkout never runs stale code and needs no build step.
//
// CommonJS (bin/package.json), like the launchers: an ES module entry would load Node's ESM
// loader, and the fs/promises, readline and stream internals it brings, on every start.
//
// dist/ is current when dist/.build.json (written last by scripts/build.mjs) records a build
// start later than the modification time of every file under src/ and of tsconfig.build.json.
// An installed package ships dist/ without src/, so there is nothing to compare; with its build
// record missing or damaged it runs dist/ unbundled (no sources, no loader to fall back to) and
// says so in one line on stderr. BERM_FROM_SOURCE=1 forces the sources.
//
// The CLI runs as one CommonJS bundle of dist/ (dist/berm-cli.cjs, see scripts/bundle.mjs) when
// there is one, compiled as a vm.Script with the V8 code cache the build made for it
// (dist/berm-cli.cjs.v8cache). The cache file starts with a SHA-256 over the bundle's bytes, the
// Node version and the cache's own bytes: a cache that does not match (a rebuilt or edited bundle,
// another Node, a damaged file) is not offered to V8 at all, and V8 itself refuses one made by
// another V8 or under other V8 flags (then it compiles the source as usual: same behaviour, only
// slower). BERM_CODE_CACHE=write makes the run write the cache at exit (scripts/build.mjs does).
//
// The build records the bundle's size and SHA-256 in dist/.build.json. A bundle that does not match
// (truncated, emptied, edited after the build, or a build that recorded none) is not run: a cut at
// a module boundary is still valid JavaScript and would run silently, doing nothing. The launcher
// then runs the unbundled dist/cli/main.js and says why in one line on stderr. The SHA-256 is the
// one the code-cache key needs anyway (the key covers it), so a start hashes the bundle once.
const { readdirSync, readFileSync, renameSync, statSync, writeFileSync } = require('node:fs');
const { dirname } = require('node:path');
const { pathToFileURL } = require('node:url');

const ROOT = dirname(__dirname);

/** The newest modification time (ms) of any file under `dir`, or Infinity once one is newer than `limit`. */
function newest(dir, limit) {
  let max = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    // string concatenation, not path.join: this walk is part of every CLI start
    const p = `${dir}/${e.name}`;
    const t = e.isDirectory() ? newest(p, limit) : statSync(p).mtimeMs;
    if (t >= limit) return Infinity;
    if (t > max) max = t;
  }
  return max;
}

/** Whether this is a checkout (src/ exists), not an installed package (dist/ without src/). */
function hasSources() {
  try {
    statSync(`${ROOT}/src`);
    return true;
  } catch {
    return false;
  }
}

/** dist/.build.json when dist/ holds a build of the current sources (see above), else null. */
function currentBuild() {
  if (process.env.BERM_FROM_SOURCE === '1') return null;
  let record;
  try {
    record = JSON.parse(readFileSync(`${ROOT}/dist/.build.json`, 'utf8'));
  } catch {
    return null;
  }
  const started = record?.started;
  if (typeof started !== 'number') return null;
  if (!hasSources()) return record; // an installed package: dist/ is the code
  try {
    const current =
      newest(`${ROOT}/src`, started) < started && statSync(`${ROOT}/tsconfig.build.json`).mtimeMs < started;
    return current ? record : null;
  } catch {
    return null;
  }
}

/** Whether dist/ holds a build of the current sources (see above). */
function builtIsCurrent() {
  return currentBuild() !== null;
}

/**
 * The key of a code cache: SHA-256 over `bundleHash` (the SHA-256 of the bundle's bytes), the Node
 * version and the cache data.
 */
function cacheKey(bundleHash, data) {
  return require('node:crypto')
    .createHash('sha256')
    .update(bundleHash)
    .update(`\0${process.version}\0${process.arch}\0`)
    .update(data)
    .digest();
}

/**
 * The SHA-256 of the bundle's `bytes` (a Buffer) when they are the bundle the build recorded in
 * `record` (dist/.build.json's `bundle`: { bytes, sha256 (hex) }), else a string saying why not.
 * The sizes are compared first: a cut or emptied bundle is told without hashing it.
 */
function checkBundle(bytes, record) {
  if (record === null || typeof record !== 'object' || typeof record.sha256 !== 'string')
    return 'the build recorded no SHA-256 for it (rebuild: npm run build)';
  if (bytes.length !== record.bytes) return `it has ${bytes.length} bytes, the build wrote ${record.bytes}`;
  const digest = require('node:crypto').createHash('sha256').update(bytes).digest();
  if (digest.toString('hex') !== record.sha256) return 'its SHA-256 is not the one the build recorded';
  return digest;
}

/**
 * V8's default for its --stack-size flag on this architecture, in KB: V8_DEFAULT_STACK_SIZE_KB in
 * V8's src/common/globals.h, 864 on arm, arm64 and ia32, 984 on the others.
 */
const V8_DEFAULT_STACK_SIZE_KB = ['arm', 'arm64', 'ia32'].includes(process.arch) ? 864 : 984;

/**
 * Give V8's --stack-size flag back its default value when node was started with another one (the
 * launchers' shebang has --stack-size=4000), keeping the larger stack.
 *
 * Why: V8 sets a thread's stack limit from the flag once, when the isolate starts; the shebang's
 * value gives the main thread room for deep guest recursion (README, "Limits worth knowing"). But
 * V8 also folds every flag that is not at its default into the hash that guards code caches
 * (FlagList::Hash, checked when a cache is deserialised), and Node's built-in modules come with a
 * code cache made under the default flags: with --stack-size=4000 V8 refuses it for every built-in
 * module the process loads, and each is compiled from source and its functions parsed again when
 * first called (measured with callgrind on a warm `berm call`: ~40 M of its ~240 M main-thread
 * instructions). Setting the flag to its default after start changes no limit (V8 does not read it
 * again: the same recursion depth before and after, after awaits, timers and worker threads) and
 * makes the hash the default one again, so built-in modules load from Node's cache.
 *
 * Through process.binding('v8') (the binding node:v8 wraps, already loaded at start): loading
 * node:v8 here would compile it and its dependencies from source first (~6 ms). process.binding
 * is deprecated (DEP0111) and Node prints a warning for this module: it is silenced around this
 * one call. A Node without it keeps the flag: the same behaviour, a slower start.
 */
function restoreStackSizeFlag() {
  if (!process.execArgv.some((a) => /^--stack[-_]size=/.test(a))) return;
  const quiet = process.noDeprecation;
  process.noDeprecation = true;
  try {
    process.binding('v8').setFlagsFromString(`--stack-size=${V8_DEFAULT_STACK_SIZE_KB}`);
  } catch {
    // no such binding in this Node: keep the flag (see above)
  } finally {
    process.noDeprecation = quiet;
  }
}

/**
 * Set the V8 flags src/engine/v8-flags.ts sets (--experimental-wasm-branch-hinting on V8 9 to 12,
 * --wasm-inlining on V8 11 unless the process refuses it with node's --no-wasm-inlining or with
 * BERM_WASM_INLINING=0; the same rules, which test/cli-bundle.test.ts checks through the code
 * cache being taken, or refused when inlining is refused).
 */
function engineFlags() {
  const major = Number(/^(\d+)\./.exec(process.versions.v8)?.[1] ?? NaN);
  if (major >= 9 && major <= 12) require('node:v8').setFlagsFromString('--experimental-wasm-branch-hinting');
  const refused =
    process.env.BERM_WASM_INLINING === '0' || process.execArgv.some((a) => /^--no-wasm[-_]inlining$/.test(a));
  if (major === 11 && !refused) require('node:v8').setFlagsFromString('--wasm-inlining');
}

/**
 * Run the CommonJS bundle `file` (an absolute path) as Node would run it as a main module, but
 * compiled with its code cache `file`.v8cache when that matches (see above). A bundle that does
 * not match `record` (dist/.build.json's `bundle`) is not run: a line on stderr says why.
 * @returns false when there is no bundle or it does not match (nothing ran)
 */
function runBundle(file, record) {
  let bytes;
  try {
    bytes = readFileSync(file);
  } catch (e) {
    // no bundle and none recorded (a build without one): dist/cli/main.js, nothing to say
    if (record !== undefined)
      process.stderr.write(`berm: cannot read ${file} (${e.code}); running dist/ unbundled\n`);
    return false;
  }
  const digest = checkBundle(bytes, record ?? null);
  if (typeof digest === 'string') {
    process.stderr.write(`berm: not running ${file}: ${digest}; running dist/ unbundled\n`);
    return false;
  }
  const vm = require('node:vm');
  let cachedData;
  try {
    const stored = readFileSync(`${file}.v8cache`);
    const data = stored.subarray(32);
    if (cacheKey(digest, data).equals(stored.subarray(0, 32))) cachedData = data;
  } catch {
    // no cache: compile as usual
  }
  // the wrapper Node's CommonJS loader puts around a module, on the first line so that line
  // numbers in stack traces are the bundle's (esbuild writes ASCII, comments aside: UTF-8).
  // One more parameter: this module's import(), for the bundle's one ES module dependency
  // (binaryen). A vm.Script's own import() needs the importModuleDynamically option, experimental
  // in Node 20 (a warning on stderr) and lost when the script comes from a code cache.
  const source = `(function (exports, require, module, __filename, __dirname, __bermImport) {${bytes.toString('utf8')}\n})`;
  // V8 refuses a code cache made under other flags (it checks a hash of them), and the engine sets
  // flags when it loads (src/engine/v8-flags.ts), after the bundle is compiled but before a writing
  // run makes the cache at exit: set them now, so the cache is made and read under the same flags.
  // Node's cache of its built-in modules was made under the default flags (see
  // restoreStackSizeFlag), so a built-in module loaded after this point is compiled from source.
  // The CLI writes its output to fds 1 and 2 without Node's stream objects (src/cli/output.ts),
  // whose modules (net for a pipe, tty) would be such modules.
  engineFlags();
  const script = new vm.Script(source, { filename: file, cachedData });
  if (process.env.BERM_CODE_CACHE === 'write') {
    // at exit, so the functions the run compiled lazily are in the cache too
    process.once('exit', () => {
      const data = script.createCachedData();
      const tmp = `${file}.v8cache.${process.pid}`;
      writeFileSync(tmp, Buffer.concat([cacheKey(digest, data), data]));
      renameSync(tmp, `${file}.v8cache`);
    });
  }
  // module.constructor is Node's Module: require('node:module') would load the ESM loader's parts
  const Module = module.constructor;
  const mod = new Module(file, module);
  mod.filename = file;
  mod.paths = Module._nodeModulePaths(dirname(file));
  const fn = script.runInThisContext();
  fn.call(
    mod.exports,
    mod.exports,
    Module.createRequire(file),
    mod,
    file,
    dirname(file),
    (url) => import(url),
  );
  return true;
}

/**
 * Run the entry module `entry` (a path under src/ without extension, e.g. 'cli/main'), built or
 * from the sources. With `bundle` (a file name under dist/), a current build runs that bundle
 * when it exists, else the entry's dist/ module. Without a WebAssembly global (`node --jitless`) it
 * runs nothing, says why on stderr and sets exit code 2 (bad usage, as the CLI's table has it).
 * @returns a promise settled once the entry module has been evaluated
 */
async function launch(entry, bundle) {
  restoreStackSizeFlag();
  if (typeof WebAssembly !== 'object') {
    // `node --jitless` (or --no-expose-wasm) removes the WebAssembly global, and every guest runs
    // as a WebAssembly module: say so once instead of failing inside the first module load
    process.stderr.write(
      `berm: this Node process has no WebAssembly (started with --jitless or --no-expose-wasm?); ` +
        `berm runs guests as WebAssembly and needs it\n`,
    );
    process.exitCode = 2;
    return undefined;
  }
  const url = (path) => pathToFileURL(`${ROOT}/${path}`).href;
  const build = currentBuild();
  if (build !== null) {
    if (bundle !== undefined && runBundle(`${ROOT}/dist/${bundle}`, build.bundle)) return undefined;
    return import(url(`dist/${entry}.js`));
  }
  if (!hasSources()) {
    // an installed package whose build record is missing or damaged: dist/ is the only code there
    // is (no sources, no loader); the bundle cannot be checked against a record, so it is not run
    const why =
      process.env.BERM_FROM_SOURCE === '1'
        ? 'BERM_FROM_SOURCE=1, but this installation has no src/'
        : `${ROOT}/dist/.build.json is missing or damaged (reinstall the package)`;
    process.stderr.write(`berm: ${why}; running dist/ unbundled\n`);
    return import(url(`dist/${entry}.js`));
  }
  const register = url('scripts/ts/register.mjs');
  // Worker threads do not inherit hooks registered at run time, only the process's execArgv:
  // hand them the loader that way (the capability bridge's workers, the queue's worker pool).
  process.execArgv.push(`--import=${register}`);
  await import(register);
  return import(url(`src/${entry}.ts`));
}

exports.builtIsCurrent = builtIsCurrent;
exports.restoreStackSizeFlag = restoreStackSizeFlag;
exports.launch = launch;

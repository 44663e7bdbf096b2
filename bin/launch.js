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
// An installed package ships dist/ without src/, so there is nothing to compare. BERM_FROM_SOURCE=1
// forces the sources.
//
// The CLI runs as one CommonJS bundle of dist/ (dist/berm-cli.cjs, see scripts/bundle.mjs) when
// there is one, compiled as a vm.Script with the V8 code cache the build made for it
// (dist/berm-cli.cjs.v8cache). The cache file starts with a SHA-256 over the bundle's bytes, the
// Node version and the cache's own bytes: a cache that does not match (a rebuilt or edited bundle,
// another Node, a damaged file) is not offered to V8 at all, and V8 itself refuses one made by
// another V8 or under other V8 flags (then it compiles the source as usual: same behaviour, only
// slower). BERM_CODE_CACHE=write makes the run write the cache at exit (scripts/build.mjs does).
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

/** Whether dist/ holds a build of the current sources (see above). */
function builtIsCurrent() {
  if (process.env.BERM_FROM_SOURCE === '1') return false;
  let started;
  try {
    started = JSON.parse(readFileSync(`${ROOT}/dist/.build.json`, 'utf8')).started;
  } catch {
    return false;
  }
  if (typeof started !== 'number') return false;
  try {
    statSync(`${ROOT}/src`);
  } catch {
    return true; // an installed package: dist/ is the code
  }
  try {
    return (
      newest(`${ROOT}/src`, started) < started && statSync(`${ROOT}/tsconfig.build.json`).mtimeMs < started
    );
  } catch {
    return false;
  }
}

/** The key of a code cache: SHA-256 over the bundle's bytes, the Node version and the cache data. */
function cacheKey(bundle, data) {
  return require('node:crypto')
    .createHash('sha256')
    .update(bundle)
    .update(`\0${process.version}\0${process.arch}\0`)
    .update(data)
    .digest();
}

/**
 * Run the CommonJS bundle `file` (an absolute path) as Node would run it as a main module, but
 * compiled with its code cache `file`.v8cache when that matches (see above).
 * @returns false when there is no bundle (nothing ran)
 */
function runBundle(file) {
  let bytes;
  try {
    bytes = readFileSync(file);
  } catch {
    return false;
  }
  const vm = require('node:vm');
  let cachedData;
  try {
    const stored = readFileSync(`${file}.v8cache`);
    const data = stored.subarray(32);
    if (cacheKey(bytes, data).equals(stored.subarray(0, 32))) cachedData = data;
  } catch {
    // no cache: compile as usual
  }
  // the wrapper Node's CommonJS loader puts around a module, on the first line so that line
  // numbers in stack traces are the bundle's (esbuild writes ASCII, comments aside: UTF-8).
  // One more parameter: this module's import(), for the bundle's one ES module dependency
  // (binaryen). A vm.Script's own import() needs the importModuleDynamically option, experimental
  // in Node 20 (a warning on stderr) and lost when the script comes from a code cache.
  const source = `(function (exports, require, module, __filename, __dirname, __bermImport) {${bytes.toString('utf8')}\n})`;
  const script = new vm.Script(source, { filename: file, cachedData });
  if (process.env.BERM_CODE_CACHE === 'write') {
    // at exit, so the functions the run compiled lazily are in the cache too
    process.once('exit', () => {
      const data = script.createCachedData();
      const tmp = `${file}.v8cache.${process.pid}`;
      writeFileSync(tmp, Buffer.concat([cacheKey(bytes, data), data]));
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
 * when it exists, else the entry's dist/ module.
 * @returns a promise settled once the entry module has been evaluated
 */
async function launch(entry, bundle) {
  const url = (path) => pathToFileURL(`${ROOT}/${path}`).href;
  if (builtIsCurrent()) {
    if (bundle !== undefined && runBundle(`${ROOT}/dist/${bundle}`)) return undefined;
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
exports.launch = launch;

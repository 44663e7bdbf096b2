/**
 * The baseline translator as the engine loads it on a cold compile: from a build, one script with
 * a V8 code cache; from the sources, the ES module.
 *
 * Why: a cold compile to a first call is mostly V8 warming up the translator in a fresh process,
 * and part of that is parsing and compiling its ~90 KB of JavaScript to bytecode, function by
 * function, as the translation first calls each. A code cache made at build time by a run that
 * translated (so the functions compiled lazily are in it) turns that into one deserialisation.
 * Node 20 offers code caches for scripts only (`vm.Script`'s `cachedData`), not for ES modules, so
 * the build writes the translator a second time as a script (scripts/bundle.mjs
 * bundleTranslatorScript): dist/translate/baseline.cjs, a CommonJS body whose only `require`s are
 * the two modules the engine itself imports (./abi.js and ../util/leb.js). This module runs it in
 * a function that hands it the engine's own instances of those two, so classes such as
 * TranslateError are the engine's. The CLI bundle, the daemon and bench/ all reach the translator
 * through here, so they load it the same way.
 *
 * The build fixes the script's SHA-256 into this module's compiled copy (SCRIPT_SHA256 below,
 * scripts/bundle.mjs bundleTranslator), and the script runs only when its bytes have that digest:
 * a truncated, emptied or edited script (a cut between two of its modules is still valid
 * JavaScript, and an edit that keeps its exports would translate differently under the current
 * cache key) is not run; the engine imports the ES module (dist/translate/baseline.js) instead
 * and says why in one line on stderr. A script that throws while it loads is treated the same way.
 * The cache file (baseline.cjs.v8cache) starts with a SHA-256 over the Node version, the
 * architecture, the script's digest and the cache data: a cache that does not match (a rebuilt
 * script, another Node, a damaged file) is not offered to V8 at all (V8 checks only the source's
 * length). V8 itself refuses one made by another V8 or under other V8 flags; the script then
 * compiles as usual: same behaviour, slower.
 * With BERM_CODE_CACHE=write in the environment (scripts/bundle.mjs writeCodeCache sets it) the
 * process writes the cache when it exits, so the functions its translation ran are in it.
 */
import { createHash } from 'node:crypto';
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Script } from 'node:vm';
import * as abi from '../translate/abi.js';
import * as leb from '../util/leb.js';

type Baseline = typeof import('../translate/baseline.js');

/** How the translator was loaded: the built script with its cache, without one, or the module. */
export type BaselineSource = 'script+cache' | 'script' | 'module';

/** The two modules the script requires, by the specifiers it uses. */
const SHARED: Record<string, unknown> = { './abi.js': abi, '../util/leb.js': leb };

let loaded: Promise<{ translator: Baseline; source: BaselineSource }> | undefined;

/**
 * The SHA-256 (hex) of the script the build wrote: scripts/bundle.mjs rewrites this line of the
 * compiled module. null when running from the TypeScript sources (there is no script then).
 */
const SCRIPT_SHA256: string | null = null;

/**
 * The baseline translator (src/translate/baseline.ts's exports), loaded once per process: the
 * built script dist/translate/baseline.cjs next to this module's folder when there is one and it
 * is the script the build wrote (compiled with its code cache when that matches, see above), else
 * the ES module (saying why in one line on stderr when a script is there but not run).
 * @returns the exports and how they were loaded
 * @throws whatever importing the ES module throws (a build without it)
 */
export function loadBaseline(): Promise<{ translator: Baseline; source: BaselineSource }> {
  return (loaded ??= load());
}

async function load(): Promise<{ translator: Baseline; source: BaselineSource }> {
  const file = fileURLToPath(new URL('../translate/baseline.cjs', import.meta.url));
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch {
    // the sources (no build), or a build without the script
    return esModule();
  }
  const digest = createHash('sha256').update(bytes).digest();
  let why: string;
  if (SCRIPT_SHA256 === null) why = 'the build recorded no SHA-256 for it';
  else if (digest.toString('hex') !== SCRIPT_SHA256)
    why = `it is not the script the build wrote (${bytes.length} bytes, another SHA-256)`;
  else {
    try {
      return runScript(file, bytes, digest);
    } catch (e) {
      why = `it failed to load: ${e instanceof Error ? e.message : String(e)}`;
    }
  }
  // one line on stderr, written now (as bin/launch.js does for the CLI bundle): a warning event
  // would wait for the next tick, which a CLI call that exits from a promise chain never reaches
  console.error(
    `berm: not running ${file}: ${why}; the translator's ES module runs instead (rebuild: npm run build)`,
  );
  return esModule();
}

/** The ES module form of the translator. */
async function esModule(): Promise<{ translator: Baseline; source: BaselineSource }> {
  return { translator: await import('../translate/baseline.js'), source: 'module' };
}

/**
 * The key of a code cache for the script whose SHA-256 is `digest`: SHA-256 over the Node
 * version, the architecture, that digest and the cache data.
 */
function cacheKey(digest: Buffer, data: Buffer): Buffer {
  return createHash('sha256')
    .update(`${process.version}\0${process.arch}\0`)
    .update(digest)
    .update(data)
    .digest();
}

/**
 * Run the script `bytes` (read from `file`, SHA-256 `digest`) with its code cache when that
 * matches.
 * @throws whatever the script throws while it loads, or Error when it exports no translator
 */
function runScript(
  file: string,
  bytes: Buffer,
  digest: Buffer,
): { translator: Baseline; source: BaselineSource } {
  let cachedData: Buffer | undefined;
  try {
    const stored = readFileSync(`${file}.v8cache`);
    const data = stored.subarray(32);
    if (cacheKey(digest, data).equals(stored.subarray(0, 32))) cachedData = data;
  } catch {
    // no cache: compile as usual
  }
  // on the first line, so that line numbers in stack traces are the script's
  const source = `(function (exports, require, module) {${bytes.toString('utf8')}\n})`;
  const script = new Script(source, { filename: file, cachedData });
  if (process.env.BERM_CODE_CACHE === 'write') {
    // at exit, so the functions the run compiled lazily are in the cache too
    process.once('exit', () => {
      const data = script.createCachedData();
      const tmp = `${file}.v8cache.${process.pid}`;
      try {
        writeFileSync(tmp, Buffer.concat([cacheKey(digest, data), data]));
        renameSync(tmp, `${file}.v8cache`);
      } catch (e) {
        // a read-only installation: no cache, the script compiles as usual
        rmSync(tmp, { force: true });
        console.error(
          `berm: no code cache written for ${file}: ${e instanceof Error ? e.message : String(e)}`,
        );
      }
    });
  }
  const mod = { exports: {} as Baseline };
  const require = (spec: string): unknown => {
    if (!(spec in SHARED)) throw new Error(`${file} requires ${spec}, which the engine does not hand it`);
    return SHARED[spec];
  };
  (script.runInThisContext() as (e: object, r: typeof require, m: object) => void)(mod.exports, require, mod);
  if (typeof mod.exports.translateBaseline !== 'function')
    throw new Error(`${file} does not export translateBaseline (rebuild: npm run build)`);
  const accepted = cachedData !== undefined && !script.cachedDataRejected;
  return { translator: mod.exports, source: accepted ? 'script+cache' : 'script' };
}

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
 * scripts/bundle.mjs bundleTranslator), and the script runs only when its bytes have that digest
 * (src/engine/cached-script.ts: an edit that keeps its exports would translate differently under
 * the current cache key): otherwise the engine imports the ES module (dist/translate/baseline.js)
 * instead and says why in one line on stderr. A script that throws while it loads is treated the
 * same way. The cache file (baseline.cjs.v8cache) is checked and written as cached-script.ts says.
 */
import { fileURLToPath } from 'node:url';
import * as abi from '../translate/abi.js';
import * as leb from '../util/leb.js';
import { runCachedScript, type ScriptSource } from './cached-script.js';

type Baseline = typeof import('../translate/baseline.js');

/** How the translator was loaded: the built script with its cache, without one, or the module. */
export type BaselineSource = ScriptSource | 'module';

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
  const ran = runCachedScript<Baseline>(file, SCRIPT_SHA256, SHARED, 'translateBaseline');
  if (ran !== null && 'exports' in ran) return { translator: ran.exports, source: ran.source };
  if (ran !== null) {
    // one line on stderr, written now (as bin/launch.js does for the CLI bundle): a warning event
    // would wait for the next tick, which a CLI call that exits from a promise chain never reaches
    console.error(
      `berm: not running ${file}: ${ran.why}; the translator's ES module runs instead (rebuild: npm run build)`,
    );
  }
  // the sources (no build), a build without the script, or a script not run
  return { translator: await import('../translate/baseline.js'), source: 'module' };
}

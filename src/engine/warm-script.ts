/**
 * The engine's warm path (src/engine/warm-path.ts) as the engine runs it: from a build, the script
 * dist/engine/warm-path.cjs with its V8 code cache (src/engine/cached-script.ts); from the sources,
 * inside the CLI bundle, or when the script is not the build's, the ES module.
 *
 * Why: a warm compile in a fresh process otherwise compiles each function of the path to bytecode
 * on its first call (about 0.6 ms of a ~3 ms warm compile of text-clang-O0, bench/README.md);
 * from the code cache they arrive compiled. The script is loaded when the engine loads, after the
 * engine set its V8 flags (src/engine/v8-flags.ts): V8 refuses a cache made under other flags, and
 * the process that makes it (scripts/bundle.mjs writeCodeCache) has them set by then too.
 * The CLI bundle (dist/berm-cli.cjs) holds this path already, covered by the bundle's own code
 * cache: scripts/bundle.mjs sets IN_CLI_BUNDLE there, and the script is not read.
 * A script that is there but not run (not the one the build wrote, or it threw while loading) is
 * named in one line on stderr; the ES module then runs, with the same results.
 */
import { fileURLToPath } from 'node:url';
import * as reader from '../elf/reader.js';
import * as abi from '../translate/abi.js';
import { runCachedScript, type ScriptSource } from './cached-script.js';
import * as esm from './warm-path.js';

/** The warm path's functions. */
export type WarmPath = typeof esm;

/** How the warm path was loaded: the built script with its cache, without one, or the module. */
export type WarmPathSource = ScriptSource | 'module';

/**
 * The SHA-256 (hex) of the script the build wrote: scripts/bundle.mjs rewrites this line of the
 * compiled module. null when running from the TypeScript sources (there is no script then).
 */
const SCRIPT_SHA256: string | null = null;

/** true inside the CLI bundle: scripts/bundle.mjs rewrites this line of the bundled copy. */
const IN_CLI_BUNDLE = false;

/** The modules with classes the script requires, by the specifiers it uses. */
const SHARED: Record<string, unknown> = { '../translate/abi.js': abi, '../elf/reader.js': reader };

let loaded: { warm: WarmPath; source: WarmPathSource } | undefined;

/**
 * The warm path, loaded once per process (see the module comment).
 * @returns its functions and how they were loaded
 */
export function loadWarmPath(): { warm: WarmPath; source: WarmPathSource } {
  return (loaded ??= load());
}

function load(): { warm: WarmPath; source: WarmPathSource } {
  if (IN_CLI_BUNDLE) return { warm: esm, source: 'module' };
  const file = fileURLToPath(new URL('./warm-path.cjs', import.meta.url));
  const ran = runCachedScript<WarmPath>(file, SCRIPT_SHA256, SHARED, 'loadCached');
  if (ran !== null && 'exports' in ran) return { warm: ran.exports, source: ran.source };
  // one line on stderr, written now: a warning event would wait for the next tick
  if (ran !== null)
    console.error(
      `berm: not running ${file}: ${ran.why}; the ES module runs instead (rebuild: npm run build)`,
    );
  return { warm: esm, source: 'module' };
}

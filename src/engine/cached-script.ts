/**
 * Run a CommonJS script the build wrote next to an ES module of the engine, with a V8 code cache,
 * instead of that module: how the engine loads the baseline translator (baseline-script.ts).
 * Node 20 offers code caches for scripts only (`vm.Script`'s `cachedData`), not for ES modules,
 * whose functions V8 compiles one by one on their first call.
 *
 * The build fixes the script's SHA-256 into the loading module's compiled copy, and the script runs
 * only when its bytes have that digest: a truncated, emptied or edited script (a cut between two
 * of its modules is still valid JavaScript) is not run. The cache file (`<script>.v8cache`)
 * starts with a SHA-256 over the Node version, the architecture, the script's digest and the
 * cache data: a cache that does not match (a rebuilt script, another Node, a damaged file) is not
 * offered to V8 at all (V8 itself checks only the source's length, and refuses a cache made by
 * another V8 or under other V8 flags: the script then compiles as usual, same behaviour, slower).
 * With BERM_CODE_CACHE=write in the environment (scripts/bundle.mjs writeCodeCache sets it) the
 * process writes the cache when it exits, so the functions its run compiled lazily are in it.
 */
import { hash } from 'node:crypto';
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { Script } from 'node:vm';

/** How a script ran: with its code cache accepted by V8, or compiled from source. */
export type ScriptSource = 'script+cache' | 'script';

/**
 * The key of a code cache for the script whose SHA-256 is `digest` (hex): SHA-256 over the Node
 * version, the architecture, that digest and the SHA-256 of the cache data, 32 bytes.
 * One-shot digests (crypto.hash), not createHash: the first use of createHash in a process
 * costs ~0.3 ms more (bench/README.md).
 */
function cacheKey(digest: string, data: Uint8Array): Buffer {
  const text = `${process.version}\0${process.arch}\0${digest}\0${hash('sha256', data, 'hex')}`;
  return hash('sha256', text, 'buffer');
}

/**
 * Run the script `file` when it is the one the build wrote (SHA-256 `sha256`, hex; null: the
 * build recorded none, i.e. running from the sources), with its code cache when that matches.
 * The script is a CommonJS body of ASCII text (esbuild's `charset: 'ascii'`: its SHA-256 is that of
 * the text read as UTF-8, Node's fast path for a file's text); its `require` of a specifier in
 * `shared` returns that value (the engine's own instance of a module, so classes are the engine's;
 * the `node:` builtins it uses, as the loading module imported them), of anything else throws.
 * @param exported a name the script must export (a function): checks the script is whole
 * @returns the script's exports and how it ran, or null when there is no such file (the sources);
 *   `why` instead when the file is there but was not run: not the build's script, or it threw
 *   while it loaded (the caller says so and uses the ES module)
 */
export function runCachedScript<T>(
  file: string,
  sha256: string | null,
  shared: Record<string, unknown>,
  exported: string,
): { exports: T; source: ScriptSource } | { why: string } | null {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return null;
  }
  const digest = hash('sha256', text, 'hex');
  if (sha256 === null) return { why: 'the build recorded no SHA-256 for it' };
  if (digest !== sha256) {
    const bytes = Buffer.byteLength(text);
    return { why: `it is not the script the build wrote (${bytes} bytes, another SHA-256)` };
  }
  try {
    return run<T>(file, text, digest, shared, exported);
  } catch (e) {
    return { why: `it failed to load: ${e instanceof Error ? e.message : String(e)}` };
  }
}

function run<T>(
  file: string,
  text: string,
  digest: string,
  shared: Record<string, unknown>,
  exported: string,
): { exports: T; source: ScriptSource } {
  let cachedData: Buffer | undefined;
  try {
    const stored = readFileSync(`${file}.v8cache`);
    const data = stored.subarray(32);
    if (cacheKey(digest, data).equals(stored.subarray(0, 32))) cachedData = data;
  } catch {
    // no cache: compile as usual
  }
  // on the first line, so that line numbers in stack traces are the script's
  const source = `(function (exports, require, module) {${text}\n})`;
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
  const mod = { exports: {} as Record<string, unknown> };
  const require = (spec: string): unknown => {
    if (spec in shared) return shared[spec];
    throw new Error(`${file} requires ${spec}, which the engine does not hand it`);
  };
  (script.runInThisContext() as (e: object, r: typeof require, m: object) => void)(mod.exports, require, mod);
  if (typeof mod.exports[exported] !== 'function')
    throw new Error(`${file} does not export ${exported} (rebuild: npm run build)`);
  const accepted = cachedData !== undefined && !script.cachedDataRejected;
  return { exports: mod.exports as T, source: accepted ? 'script+cache' : 'script' };
}

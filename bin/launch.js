// Shared by the launchers (bin/berm.js, bin/bermd.js): run the compiled JavaScript in dist/ when it
// is a build of the current sources, else the TypeScript sources through the esbuild-based loader
// (scripts/ts/hooks.mjs), so an edited checkout never runs stale code and needs no build step.
//
// dist/ is current when dist/.build.json (written last by scripts/build.mjs) records a build
// start later than the modification time of every file under src/ and of tsconfig.build.json.
// An installed package ships dist/ without src/, so there is nothing to compare. BERM_FROM_SOURCE=1
// forces the sources.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The newest modification time (ms) of any file under `dir`, or Infinity once one is newer than `limit`. */
function newest(dir, limit) {
  let max = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    const t = e.isDirectory() ? newest(p, limit) : statSync(p).mtimeMs;
    if (t >= limit) return Infinity;
    if (t > max) max = t;
  }
  return max;
}

/** Whether dist/ holds a build of the current sources (see above). */
export function builtIsCurrent() {
  if (process.env.BERM_FROM_SOURCE === '1') return false;
  let started;
  try {
    started = JSON.parse(readFileSync(join(ROOT, 'dist', '.build.json'), 'utf8')).started;
  } catch {
    return false;
  }
  if (typeof started !== 'number') return false;
  try {
    statSync(join(ROOT, 'src'));
  } catch {
    return true; // an installed package: dist/ is the code
  }
  try {
    return (
      newest(join(ROOT, 'src'), started) < started &&
      statSync(join(ROOT, 'tsconfig.build.json')).mtimeMs < started
    );
  } catch {
    return false;
  }
}

/**
 * Import the entry module `entry` (a path under src/ without extension, e.g. 'cli/main'), built or
 * from the sources.
 */
export async function launch(entry) {
  if (builtIsCurrent()) return import(new URL(`../dist/${entry}.js`, import.meta.url).href);
  const register = new URL('../scripts/ts/register.mjs', import.meta.url).href;
  // Worker threads do not inherit hooks registered at run time, only the process's execArgv:
  // hand them the loader that way (the capability bridge's workers, the queue's worker pool).
  process.execArgv.push(`--import=${register}`);
  await import(register);
  return import(new URL(`../src/${entry}.ts`, import.meta.url).href);
}

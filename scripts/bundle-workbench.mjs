// The workbench bundle (used by scripts/build.mjs and bench/): src/workbench, the page bermd serves
// at `/`, type-checked with its own tsconfig (DOM, JSX) and bundled by esbuild into
// OUT/workbench/: index.html, app.js (one minified script, Preact inside), app.css and icon.svg.
// No CDN and nothing fetched at run time: bermd serves these four files from memory.
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
export const WORKBENCH_SRC = join(ROOT, 'src', 'workbench');

/**
 * Type-check and bundle the page into `join(out, 'workbench')`.
 * @returns the bundle's files and their sizes in bytes
 * @throws Error when the type check or the bundle fails
 */
export async function bundleWorkbench(out) {
  const require = createRequire(join(ROOT, 'package.json'));
  const tsc = require.resolve('typescript/bin/tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', join(WORKBENCH_SRC, 'tsconfig.json')], {
    stdio: 'inherit',
  });
  if (r.status !== 0) throw new Error(`the workbench's type check failed (exit ${r.status ?? r.signal})`);
  const esbuild = await import('esbuild');
  const dir = join(out, 'workbench');
  mkdirSync(dir, { recursive: true });
  const result = await esbuild.build({
    entryPoints: [join(WORKBENCH_SRC, 'main.tsx')],
    bundle: true,
    minify: true,
    format: 'iife',
    target: ['chrome110', 'firefox115', 'safari16'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    outfile: join(dir, 'app.js'),
    legalComments: 'none',
    metafile: true,
    logLevel: 'warning',
  });
  for (const f of ['index.html', 'app.css', 'icon.svg']) copyFileSync(join(WORKBENCH_SRC, f), join(dir, f));
  return Object.fromEntries(Object.entries(result.metafile.outputs).map(([k, v]) => [k, v.bytes]));
}

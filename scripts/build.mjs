#!/usr/bin/env node
// Build berm: compile src/ to dist/ (JavaScript, .d.ts, source maps) with tsc, copy the non-code
// files the sources read next to themselves (*.proto), fix the translator digest into the
// compiled translate/abi.js, bundle the CLI into one CommonJS file with a V8 code cache for it
// (scripts/bundle.mjs: what bin/berm.js runs), bundle the workbench page (scripts/bundle-workbench.mjs),
// and write dist/.build.json, whose start time
// bin/launch.js compares with the sources' modification times to tell a fresh build from a stale one
// (and whose record of the bundle's size and SHA-256 it checks before running the bundle).
//
// Built, not committed: a committed dist/ doubles every change and every merge conflict, and goes
// stale the moment a source is edited without rebuilding; a build at install cannot. The launchers
// check freshness, so a checkout never runs stale JavaScript, and a tarball always carries dist/.
//
// Runs as the package's `prepare` script (npm runs it on `npm ci`/`npm install` in a checkout
// and on `npm pack`), and as `npm run build`. Plain JavaScript, so it needs no loader.
// Without TypeScript installed (a production-only install of a checkout) it says so and exits 0:
// the launchers then run the sources through the TypeScript loader.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { bundleCli, bundleTranslator, CLI_BUNDLE, walk, writeCodeCache } from './bundle.mjs';
import { bundleWorkbench, WORKBENCH_SRC } from './bundle-workbench.mjs';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const SRC = join(ROOT, 'src');
const DIST = join(ROOT, 'dist');
const started = Date.now();

let tsc;
try {
  tsc = createRequire(join(ROOT, 'package.json')).resolve('typescript/bin/tsc');
} catch {
  console.error('berm build: typescript is not installed; skipped (bin/ will run the sources)');
  process.exit(0);
}

// Build into a fresh folder and swap it in at the end: no file of a deleted source survives, and a
// failed build leaves the previous dist/ as it was (stale, so the launchers do not use it).
const OUT = `${DIST}.tmp-${process.pid}`;
rmSync(OUT, { recursive: true, force: true });
const r = spawnSync(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', OUT], {
  stdio: 'inherit',
});
if (r.status !== 0) {
  rmSync(OUT, { recursive: true, force: true });
  console.error(`berm build: tsc failed (exit ${r.status ?? r.signal})`);
  process.exit(1);
}

// Non-TypeScript files that modules load from their own folder.
// (the workbench's sources are bundled below, not copied)
for (const file of walk(SRC)) {
  if (file.endsWith('.ts') || file.startsWith(WORKBENCH_SRC)) continue;
  const out = join(OUT, relative(SRC, file));
  mkdirSync(dirname(out), { recursive: true });
  copyFileSync(file, out);
}

// The translator digest over the sources just compiled, the same function the sources use when
// they run unbuilt (src/translate/abi.ts sourceDigest), so both modes share cache entries.
const abiJs = join(OUT, 'translate', 'abi.js');
const { sourceDigest } = await import(pathToFileURL(abiJs).href);
const digest = sourceDigest(join(SRC, 'translate'));
const text = readFileSync(abiJs, 'utf8');
const marker = /^const BUILT_DIGEST = null;$/m;
if (!marker.test(text)) {
  console.error(`berm build: ${abiJs} has no line "const BUILT_DIGEST = null;" to fix the digest in`);
  process.exit(1);
}
writeFileSync(abiJs, text.replace(marker, `const BUILT_DIGEST = ${JSON.stringify(digest)};`));

// The CLI as one CommonJS file (after the digest is fixed: the bundle carries its own copy), and
// the baseline translator as one ES module for the daemon and the other dist/ users.
try {
  await bundleTranslator(OUT);
  await bundleCli(OUT);
  // the workbench page bermd serves at / (src/workbench, browser code: its own type check)
  await bundleWorkbench(OUT);
} catch (e) {
  rmSync(OUT, { recursive: true, force: true });
  console.error(`berm build: bundling failed: ${e.message}`);
  process.exit(1);
}

// The bundle's size and SHA-256: bin/launch.js runs the bundle only when both match, so a
// truncated or emptied file (still valid JavaScript when cut between modules) never runs silently.
const bundleBytes = readFileSync(join(OUT, CLI_BUNDLE));
const bundle = {
  bytes: bundleBytes.length,
  sha256: createHash('sha256').update(bundleBytes).digest('hex'),
};
writeFileSync(
  join(OUT, '.build.json'),
  JSON.stringify({ started, translatorDigest: digest, node: process.version, bundle }) + '\n',
);
const OLD = `${DIST}.old-${process.pid}`;
try {
  renameSync(DIST, OLD);
} catch {
  // no previous build
}
renameSync(OUT, DIST);
rmSync(OLD, { recursive: true, force: true });
// The bundle's code cache comes from a run of the built CLI, so it is made once dist/ is in place;
// without one (no fixture to run, a failed run) the CLI compiles the bundle as usual.
writeCodeCache(ROOT);
console.error(`berm build: dist/ in ${((Date.now() - started) / 1000).toFixed(1)} s`);

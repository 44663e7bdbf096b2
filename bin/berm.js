#!/usr/bin/env -S node --stack-size=4000
// Entry point of the berm CLI: the compiled JavaScript in dist/ when it is current, else the
// TypeScript sources through the loader (bin/launch.js). `berm --version` alone is answered here,
// without loading the program (what commander would print: the package version and a newline).
import { readFileSync } from 'node:fs';

const argv = process.argv.slice(2);
if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  process.stdout.write(`${pkg.version}\n`);
} else {
  const { launch } = await import('./launch.js');
  await launch('cli/main');
}

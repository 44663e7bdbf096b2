#!/usr/bin/env -S node --stack-size=4000
'use strict';
// Entry point of the berm CLI: the bundled compiled JavaScript (dist/berm-cli.cjs) when dist/ is
// current, else the TypeScript sources through the loader (bin/launch.js). `berm --version` alone
// is answered here, without loading the program (what commander would print: the package version
// and a newline). CommonJS, see bin/launch.js.
const argv = process.argv.slice(2);
if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
  const pkg = JSON.parse(require('node:fs').readFileSync(`${__dirname}/../package.json`, 'utf8'));
  process.stdout.write(`${pkg.version}\n`);
} else {
  void require('./launch.js').launch('cli/main', 'berm-cli.cjs');
}

#!/usr/bin/env -S node --stack-size=4000
// Entry point of the berm CLI: runs the TypeScript sources through a small esbuild-based loader
// (scripts/ts/hooks.mjs), so a clone works without a build step.
const register = new URL('../scripts/ts/register.mjs', import.meta.url).href;
// Worker threads (the capability bridge runs exec, http and grep jobs in one) do not inherit hooks
// registered at run time, only the process's execArgv: hand them the loader that way.
process.execArgv.push(`--import=${register}`);
await import(register);
await import('../src/cli/main.ts');

#!/usr/bin/env -S node --stack-size=4000
// Entry point of bermd, the berm daemon: runs the TypeScript sources through the same loader as
// bin/berm.js (scripts/ts/register.mjs), handed to worker threads through execArgv.
const register = new URL('../scripts/ts/register.mjs', import.meta.url).href;
process.execArgv.push(`--import=${register}`);
await import(register);
await import('../src/daemon/main.ts');

#!/usr/bin/env -S node --stack-size=4000
// Entry point of the berm CLI: runs the TypeScript sources through a small esbuild-based loader
// (scripts/ts/hooks.mjs), so a clone works without a build step.
import { register } from 'node:module';

register('../scripts/ts/hooks.mjs', import.meta.url);
process.setSourceMapsEnabled(true);
await import('../src/cli/main.ts');

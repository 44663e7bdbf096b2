// `node --import ./scripts/ts/register.mjs file.ts` runs a TypeScript file (see hooks.mjs).
import { register } from 'node:module';

register('./hooks.mjs', import.meta.url);
process.setSourceMapsEnabled(true);

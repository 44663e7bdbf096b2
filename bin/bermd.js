#!/usr/bin/env -S node --stack-size=4000
// Entry point of bermd, the berm daemon: the compiled JavaScript in dist/ when it is current, else
// the TypeScript sources through the loader (bin/launch.js).
import { launch } from './launch.js';

await launch('daemon/main');

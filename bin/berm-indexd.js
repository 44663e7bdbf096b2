#!/usr/bin/env -S node --stack-size=4000
'use strict';
// Entry point of berm-indexd, the index service: the compiled JavaScript in dist/ when it is
// current, else the TypeScript sources through the loader (bin/launch.js). CommonJS, see bin/launch.js.
void require('./launch.js').launch('index/main');

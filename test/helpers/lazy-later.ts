// Child process of test/lazy.test.ts: a later process compiling an image whose whole translation
// an earlier (lazy) process cached; prints the tier, whether it came from the cache and a tool
// call's outcome.
import { Engine } from '../../src/engine/engine.js';
import { Harness } from '../../src/harness/harness.js';

const [elf, dir, tool, args] = process.argv.slice(2);
const engine = new Engine({ cacheDir: dir, optimizeInBackground: false });
const h = await Harness.load(engine, elf);
const r = h.invoke(tool, args);
process.stdout.write(
  JSON.stringify({
    tier: h.module.info.tier,
    cached: h.module.info.cached,
    lazy: h.module.lazy !== null,
    ok: r.status === 'ok',
    result: r.status === 'ok' ? r.result : r.message,
  }),
);

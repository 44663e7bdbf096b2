// Child process of test/cache.test.ts: compile one ELF with a given cache dir (and tier, default
// 'optimized') and print CompileInfo.
import { Engine, Linker, type Tier } from '../../src/engine/engine.js';

const [elf, dir, tier] = process.argv.slice(2);
const engine = new Engine({ cacheDir: dir, tier: (tier ?? 'optimized') as Tier });
const mod = await engine.compile(elf);
const [a0] = new Linker(engine).instantiate(mod).call('raw_add', 2n, 3n);
process.stdout.write(JSON.stringify({ cached: mod.info.cached, a0: a0.toString() }));

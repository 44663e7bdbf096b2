// A harness deployed with an empty cache starts on the baseline tier (compiled in a worker on the
// engine's 'auto' tier); the optimised tier, compiled in the background, must then reach every
// worker of the queue, not only the engine that compiled it: the workers instantiate the module
// the deploy broadcast, and before the upgrade was broadcast too they ran the baseline tier until
// the process restarted (docs/engine.md, translation tiers).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t from 'tap';
import { BermRuntime, type Outcome } from '../src/runtime/index.js';
import { ROOT } from './helpers/fixtures.js';
import { until } from './helpers/wait.js';

const ECHO = new Uint8Array(fs.readFileSync(path.join(ROOT, 'fixtures/build/echo-gcc-O2.elf')));

t.test(
  'a cold deploy runs on the baseline tier, then on the optimised tier in every worker',
  { timeout: 240_000 },
  async (t) => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-rt-tier-'));
    t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));
    const rt = await BermRuntime.create({
      state: path.join(tmp, 'state'),
      poolSize: 2,
      cacheDir: path.join(tmp, 'cache'),
      limits: { timeoutMs: 30_000 },
    });
    t.teardown(() => rt.close());
    await rt.deploy('plain', ECHO, { capabilities: [] });
    rt.start();
    t.equal(rt.harness('plain')!.compile.tier, 'baseline', 'an empty cache: the baseline tier first');
    const text = (o: Outcome) => (o.status === 'ok' ? o.result : JSON.stringify(o));
    t.equal(text(await rt.invoke('plain', 'echo', '{"a":1}')), '{"a":1}', 'a call on the baseline tier');
    // the background optimiser of a small harness takes seconds; a loaded machine gets 120 s
    await until('the optimised tier', async () => rt.harness('plain')!.compile.tier === 'optimized', 120_000);
    t.equal(rt.harness('plain')!.compile.tier, 'optimized', 'the optimised tier reached the workers');
    for (let i = 0; i < 4; i++)
      t.equal(text(await rt.invoke('plain', 'echo', `{"i":${i}}`)), `{"i":${i}}`, `call ${i} after the swap`);
  },
);

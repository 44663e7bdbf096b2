/**
 * The optimising tier on one long basic block whose instructions form one dependency chain
 * (`addi a0, a0, 1` repeated): Binaryen's simplify-locals sinks each value into the next use, so
 * the function became one expression nested as deep as the chain, which took time quadratic in its
 * length and overflowed the host stack when the module was written. Long functions now get only
 * passes linear in their size (src/translate/module.ts LINEAR_PASSES).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { Engine, Linker, basicHostFunctions } from '../src/engine/engine.js';
import { buildElf } from './helpers/elf-builder.js';

const CHAIN = 12_000;

t.test('a 12,000-instruction dependency chain compiles on the optimising tier and adds up', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'berm-chain-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'chain.elf');
  writeFileSync(file, buildElf({ chain: CHAIN }).bytes);
  const engine = new Engine({ cacheDir: null, tier: 'optimized' });
  const mod = await engine.compile(file);
  t.equal(mod.info.tier, 'optimized');
  const linker = new Linker(engine);
  for (const [n, f] of basicHostFunctions(mod)) linker.define(n, f);
  // each addi adds 1 to a0 (RV64I ADDI): 5 + 12,000
  t.equal(linker.instantiate(mod).call('long', 5n)[0], 5n + BigInt(CHAIN));
});

/**
 * Re-create the hand-written regressions for translator bugs found while building the suite
 * (run: node --stack-size=4000 --import ./scripts/ts/register.mjs conformance/save-known.ts).
 */
import { JAL_A0_LOCAL } from './gen-unit.js';
import { runBatch, saveRegression } from './lib.js';

const r = await runBatch([JAL_A0_LOCAL]);
saveRegression(
  'jal-rd-a0-local-label',
  [JAL_A0_LOCAL],
  r.qemuOut,
  [
    'translator bug: `jal a0, label` (rd not x0/ra, target inside the same function) traps',
    'BadIndirectTarget instead of jumping and setting a0 = pc + 4 (spec: JAL writes pc+4 to rd).',
    `berm: ${r.divergences.map((d) => d.details.join('; ')).join(' | ') || 'agrees now'}`,
  ].join('\n'),
  true,
);

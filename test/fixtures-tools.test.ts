// Every fixture tool, for every compiler and optimisation level, returns what the same C source
// returns natively against the SDK's stand-in host (fixtures/expected.json, made by
// fixtures/expected.py, never by berm).
import t from 'tap';
import { Engine } from '../src/engine/engine.js';
import type { WireHandler } from '../src/harness/harness.js';
import { expected, fixtureElfs, TEST_CACHE } from './helpers/fixtures.js';
import { runToolCases } from './helpers/tool-cases.js';

const engine = new Engine({ cacheDir: TEST_CACHE });
const tools = expected().tools;
const dec = new TextDecoder();

/** An in-memory store with the berm.get/set/delete wire shape: get of an absent key replies with no fields. */
function memoryStore(): Map<string, WireHandler> {
  const kv = new Map<string, Uint8Array>();
  return new Map<string, WireHandler>([
    ['berm.get', ([k]) => (kv.has(dec.decode(k)) ? { fields: [kv.get(dec.decode(k))!] } : { fields: [] })],
    ['berm.set', ([k, v]) => (kv.set(dec.decode(k), v), { fields: [] })],
    ['berm.delete', ([k]) => (kv.delete(dec.decode(k)), { fields: [] })],
  ]);
}

// how many builds each expected case runs on: a case whose source matches no build would
// otherwise be skipped without a word (checked at the end)
const runs = new Map(tools.map((c) => [c, 0]));

for (const elf of fixtureElfs()) {
  const mine = tools.filter(
    (c) => c.source === elf.source && (c.abi ?? 1) === ((elf as { abi?: number }).abi ?? 1),
  );
  if (mine.length === 0) continue;
  for (const c of mine) runs.set(c, runs.get(c)! + 1);
  t.test(elf.path.split('/').pop()!, (t) =>
    runToolCases(t, engine, elf.path, mine, () => ({ capabilities: memoryStore(), timeoutMs: 20_000 })),
  );
}

t.test('every expected tool case runs on the gcc and clang builds of its source', async (t) => {
  t.ok(tools.length >= 25, `${tools.length} cases in fixtures/expected.json`);
  for (const [c, n] of runs) t.ok(n >= 6, `${c.source} ${c.tool}(${c.args.slice(0, 30)}): ${n} builds`);
});

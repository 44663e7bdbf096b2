// Every fixture tool, for every compiler and optimisation level, returns what the same C source
// returns natively against the SDK's stand-in host (fixtures/expected.json, made by
// fixtures/expected.py, never by berm).
import t from 'tap';
import { Engine } from '../src/engine/engine.js';
import { Harness, type WireHandler } from '../src/harness/harness.js';
import { expected, fixtureElfs, TEST_CACHE } from './helpers/fixtures.js';

const engine = new Engine({ cacheDir: TEST_CACHE });
const tools = expected().tools;
const enc = new TextEncoder();
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

for (const elf of fixtureElfs()) {
  const mine = tools.filter(
    (c) => c.source === elf.source && (c.abi ?? 1) === ((elf as { abi?: number }).abi ?? 1),
  );
  if (mine.length === 0) continue;
  t.test(elf.path.split('/').pop()!, async (t) => {
    const h = await Harness.load(engine, elf.path);
    for (const c of mine) {
      const r = h.invoke(c.tool, enc.encode(c.args), { capabilities: memoryStore(), timeoutMs: 20_000 });
      const what = `${c.tool}(${c.args.slice(0, 40)})`;
      if (c.ok) {
        t.equal(r.status, 'ok', `${what} succeeds`);
        if (r.status === 'ok') t.equal(r.result, c.result, `${what} result`);
      } else {
        t.equal(r.status, 'failed', `${what} fails through berm.fail`);
        if (r.status === 'failed') t.equal(r.message, c.result, `${what} message`);
      }
    }
  });
}

// The lazy tier translates a guest function when a call first reaches it (src/translate/lazy-image.ts,
// src/engine/lazy.ts). Results are checked against fixtures/rust/expected.json (computed natively
// by fixtures/rust/expected.py, never by berm); traps are compared with the baseline tier, which
// translates every function whole with the same code generator: the same trap, pc, symbol and
// guest backtrace.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { basicHostFunctions, Engine, Linker } from '../src/engine/engine.js';
import { Harness } from '../src/harness/harness.js';
import * as traps from '../src/engine/traps.js';
import { caseInt, cases, fixtureElfs, ROOT } from './helpers/fixtures.js';

const RS_JSON = join(ROOT, 'fixtures', 'rust', 'build', 'rs_json-O0.elf');
interface RustCase {
  harness: string;
  tool: string;
  args: string;
  ok: boolean;
  result: string;
}
const rustCases = (
  JSON.parse(readFileSync(join(ROOT, 'fixtures', 'rust', 'expected.json'), 'utf8')) as { tools: RustCase[] }
).tools.filter((c) => c.harness === 'rs_json');
const outcome = (r: ReturnType<Harness['invoke']>) =>
  r.status === 'ok' ? { ok: true, result: r.result } : { ok: false, result: r.message };

t.test('one call of a small rs_json-O0 tool translates a small part of it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'berm-lazy-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const engine = new Engine({ cacheDir: dir, optimizeInBackground: false, lazy: true });
  const h = await Harness.load(engine, RS_JSON);
  t.equal(h.module.info.tier, 'lazy', "a cold 'auto' compile with lazy: true starts on the lazy tier");
  const lazy = h.module.lazy!;
  t.equal(lazy.translated, 0, 'no guest function translated before the first call');
  const c = rustCases.find((x) => x.tool === 'strict' && x.ok)!;
  t.same(outcome(h.invoke(c.tool, c.args)), { ok: c.ok, result: c.result }, `${c.tool}(${c.args})`);
  const n = lazy.translated;
  t.ok(n > 0, `${n} functions translated by the call`);
  t.ok(n * 5 < lazy.functions, `${n} of ${lazy.functions} functions translated: under a fifth`);
  t.equal(lazy.translatedEntries().length, n);

  // the whole image, translated after the call's turn, is cached ...
  engine.cache!.flush();
  const key = engine.keyFor(new Uint8Array(readFileSync(RS_JSON)), 'baseline');
  t.ok(
    engine.cache!.list().some((e) => e.key === key),
    'the whole baseline tier is cached',
  );
  // ... swapped in for this process's later instances once V8 compiled it ...
  for (let i = 0; i < 1000 && h.module.info.tier === 'lazy'; i++) await new Promise((r) => setTimeout(r, 10));
  t.equal(h.module.info.tier, 'baseline', 'later instances run the whole baseline module');
  t.same(outcome(h.invoke(c.tool, c.args)), { ok: c.ok, result: c.result }, 'the same result whole');
  // ... and served whole to a later process
  const later = JSON.parse(
    execFileSync(
      process.execPath,
      ['--import=./scripts/ts/register.mjs', 'test/helpers/lazy-later.ts', RS_JSON, dir, c.tool, c.args],
      { cwd: ROOT, encoding: 'utf8' },
    ),
  ) as Record<string, unknown>;
  t.same(
    later,
    { tier: 'baseline', cached: true, lazy: false, ok: c.ok, result: c.result },
    'a later process',
  );
});

t.test('every rs_json case on the lazy tier gives the native result', async (t) => {
  const engine = new Engine({ cacheDir: null, tier: 'lazy' });
  const h = await Harness.load(engine, RS_JSON);
  t.equal(h.module.info.tier, 'lazy');
  t.ok(rustCases.length >= 8, `${rustCases.length} cases`);
  for (const c of rustCases) {
    // as bytes: the guest's own parser sees malformed JSON too (a string is checked by the host)
    const r = h.invoke(c.tool, new TextEncoder().encode(c.args));
    t.same(outcome(r), { ok: c.ok, result: c.result }, `${c.tool}(${c.args})`);
  }
  t.equal(h.module.info.tier, 'lazy', "tier 'lazy' never swaps the whole module in");
  t.ok(h.module.lazy!.translated < h.module.lazy!.functions, 'still not every function translated');
});

t.test('traps on the lazy tier are those of the baseline tier', async (t) => {
  const elfs = fixtureElfs().filter((e) => e.source === 'misbehave.c');
  const trapCases = cases().traps.filter((c) => c.symbol !== undefined);
  t.ok(elfs.length >= 2 && trapCases.length >= 5, `${elfs.length} builds, ${trapCases.length} cases`);
  const classes = traps as unknown as Record<string, new (...a: never[]) => traps.Trap>;
  for (const elf of elfs) {
    const runs = await Promise.all(
      (['lazy', 'baseline'] as const).map(async (tier) => {
        const engine = new Engine({ cacheDir: null, tier });
        const mod = await engine.compile(elf.path);
        t.equal(mod.info.tier, tier);
        const linker = new Linker(engine);
        for (const [name, fn] of basicHostFunctions(mod)) linker.define(name, fn);
        return (symbol: string, args: bigint[], timeoutMs: number): unknown => {
          try {
            return linker.instantiate(mod, { timeoutMs }).call(symbol, ...args);
          } catch (e) {
            return e;
          }
        };
      }),
    );
    for (const c of trapCases) {
      const args = (c.args as string[]).map(caseInt);
      // a spinning guest is stopped by its deadline, wherever it happens to be then
      const spins = c.trap === 'Interrupted';
      const [lazy, base] = runs.map((run) => run(c.symbol!, args, spins ? 20 : 10_000));
      const what = `${elf.path.split('/').pop()!} ${c.symbol}`;
      t.type(lazy, classes[c.trap], `${what}: ${c.trap}`);
      if (!(lazy instanceof traps.Trap) || !(base instanceof traps.Trap) || spins) continue;
      t.same(
        [lazy.name, lazy.pc, lazy.symbol, lazy.message, lazy.backtrace.map((f) => f.symbol)],
        [base.name, base.pc, base.symbol, base.message, base.backtrace.map((f) => f.symbol)],
        `${what}: trap, pc, symbol and backtrace as on the baseline tier`,
      );
    }
  }
});

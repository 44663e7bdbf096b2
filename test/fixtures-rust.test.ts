// The Rust fixtures (fixtures/rust: serde_json, core::fmt with Box<dyn Trait>, dense matches,
// built by rustc at opt-level 0, 2 and s against the Rust guest SDK) return, tool by tool, what
// the same sources return natively against the SDK's stand-in host (fixtures/rust/expected.json,
// made by fixtures/rust/expected.py, never by berm). And the shared case set: the same harness
// logic written against the C SDK (fixtures/src/shared.c) and the Rust SDK (rs_shared) gives
// identical results through `berm call`, equal to the C source's native results.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Engine } from '../src/engine/engine.js';
import { runBerm } from './helpers/berm-cli.js';
import { expected, FIXTURES, TEST_CACHE } from './helpers/fixtures.js';
import { runToolCases, type ExpectedToolCase } from './helpers/tool-cases.js';

interface RustElf {
  path: string;
  harness: string;
  opt: string;
}
interface RustCase extends ExpectedToolCase {
  harness: string;
}

const RUST = join(FIXTURES, 'rust');
const elfs: RustElf[] = JSON.parse(readFileSync(join(RUST, 'manifest.json'), 'utf8')).elfs;
const cases: RustCase[] = JSON.parse(readFileSync(join(RUST, 'expected.json'), 'utf8')).tools;
const isObject = (json: string): boolean => {
  const v: unknown = JSON.parse(json);
  return typeof v === 'object' && v !== null && !Array.isArray(v);
};

t.equal(
  elfs.length,
  12,
  'rs_json and rs_fmt at opt-level 0, 2, s and z, rs_dense at 0, 2 and s, rs_shared at 2',
);
t.equal(cases.filter((c) => c.harness !== 'rs_shared').length, 47, 'Rust fixture cases');

// The baseline tier is what a first call runs; the optimising tier of every Rust fixture is
// measured by the benchmark (bench/run.ts), where its minutes of Binaryen time belong.
const engine = new Engine({ cacheDir: TEST_CACHE, tier: 'baseline' });
for (const elf of elfs) {
  const mine = cases.filter((c) => c.harness === elf.harness);
  t.test(`${elf.path.split('/').pop()!}: ${mine.length} cases`, async (t) => {
    t.ok(mine.length >= 10, 'cases for this harness');
    await runToolCases(t, engine, join(FIXTURES, '..', elf.path), mine, () => ({ timeoutMs: 60_000 }), 50);
  });
}

t.test('the shared case set: C SDK and Rust SDK builds agree through `berm call`', async (t) => {
  const shared = expected().tools.filter((c) => c.source === 'shared.c');
  t.equal(shared.length, 22, 'shared cases');
  const c = join(FIXTURES, 'build', 'shared-gcc-O2.elf');
  const rust = join(RUST, 'build', 'rs_shared-O2.elf');
  // one process per call, as a user runs them; two cases (four processes) at a time
  for (let i = 0; i < shared.length; i += 2) {
    const batch = shared.slice(i, i + 2);
    const runs = await Promise.all(
      batch.flatMap((s) => [c, rust].map((elf) => runBerm(['call', elf, s.tool, s.args], TEST_CACHE))),
    );
    batch.forEach((s, k) => {
      const [fromC, fromRust] = [runs[2 * k], runs[2 * k + 1]];
      const what = `${s.tool} ${s.args.slice(0, 40)}`;
      t.same(
        { code: fromRust.code, stdout: fromRust.stdout },
        { code: fromC.code, stdout: fromC.stdout },
        `${what}: same exit code and output`,
      );
      if (!isObject(s.args)) {
        // the schema ({"type":"object"}) refuses it before the guest runs: exit 2, bad input
        t.equal(fromC.code, 2, `${what}: refused by the parameters schema`);
        return;
      }
      t.equal(fromC.code, s.ok ? 0 : 1, `${what}: exit code ${s.ok ? 0 : 1}`);
      t.equal(fromC.stdout.replace(/\n$/, ''), s.result, `${what}: the native result`);
    });
  }
});

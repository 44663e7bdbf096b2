// bin/launch.js's restoreStackSizeFlag: a process started with --stack-size=4000 (the launchers'
// shebang) gives V8's flag its default value back, so that code caches made under the default
// flags (Node's cache of its built-in modules) are taken again, and keeps the larger stack.
// V8's verdict on a code cache made by a plain `node` process and the depth a JavaScript recursion
// reaches are measured in child processes: the values come from V8, not from the launcher.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import t from 'tap';
import { ROOT } from './helpers/fixtures.js';

const LAUNCH = join(ROOT, 'bin', 'launch.js');
const SOURCE = '(function f(a, b) { return a * b + 1; })';

/** Run `code` in a fresh node with `flags`; its stdout (trimmed) and stderr. */
function node(flags: string[], code: string, env: NodeJS.ProcessEnv = {}): { out: string; err: string } {
  const r = spawnSync(process.execPath, [...flags, '-e', code], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
  });
  if (r.status !== 0) throw new Error(`node ${flags.join(' ')} exited ${r.status}: ${r.stderr}`);
  return { out: r.stdout.trim(), err: r.stderr };
}

// a code cache made under V8's default flags, as Node's cache of its built-in modules is
const cache = node(
  [],
  `process.stdout.write(new (require('node:vm').Script)(${JSON.stringify(SOURCE)}).createCachedData().toString('base64'))`,
).out;

/** V8's verdict on `cache` and the recursion depth reached (in steps of 500), in a child. */
function probe(flags: string[], restore: boolean): { rejected: boolean; depth: number; err: string } {
  const code = `
if (${restore}) require(${JSON.stringify(LAUNCH)}).restoreStackSizeFlag();
const s = new (require('node:vm').Script)(${JSON.stringify(SOURCE)}, { cachedData: Buffer.from(process.env.CACHE, 'base64') });
const d = (n) => (n === 0 ? 0 : 1 + d(n - 1));
let depth = 0;
try { for (;;) { d(depth + 500); depth += 500; } } catch {}
process.stdout.write(JSON.stringify({ rejected: s.cachedDataRejected, depth }));`;
  const { out, err } = node(flags, code, { CACHE: cache });
  return { ...(JSON.parse(out) as { rejected: boolean; depth: number }), err };
}

t.test('the default flags: the cache is taken', async (t) => {
  const plain = probe([], false);
  t.equal(plain.rejected, false, 'taken');
  const restoredPlain = probe([], true);
  t.equal(restoredPlain.rejected, false, 'taken: nothing to restore without --stack-size');

  const big = probe(['--stack-size=4000'], false);
  t.equal(big.rejected, true, '--stack-size=4000 alone: V8 refuses the cache (its flag hash differs)');
  t.ok(big.depth > 3 * plain.depth, `--stack-size=4000 recurses deeper (${big.depth} vs ${plain.depth})`);

  const restored = probe(['--stack-size=4000'], true);
  t.equal(restored.rejected, false, 'restored: the cache is taken again');
  t.ok(
    restored.depth >= 0.9 * big.depth,
    `restored: the larger stack stays (${restored.depth} vs ${big.depth} before, ${plain.depth} by default)`,
  );
  t.equal(restored.err, '', 'no deprecation warning on stderr');

  const underscore = probe(['--stack_size=4000'], true);
  t.equal(underscore.rejected, false, '--stack_size spelling: restored too');
});

t.test('--throw-deprecation does not turn the silenced warning into an exception', async (t) => {
  const r = probe(['--stack-size=4000', '--throw-deprecation'], true);
  t.equal(r.rejected, false, 'taken');
  t.equal(r.err, '', 'nothing on stderr');
});

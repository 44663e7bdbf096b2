// The wall clock stepped an hour forward and back under a running bermd while wakes are pending
// (libfaketime in the daemon's process, moved through its control file; its monotonic clock, and
// so its timers, untouched: what an NTP step or an operator's `date -s` does). The documented
// semantics (docs/wakes.md, "The wall clock"): due instants are wall-clock instants; a forward
// step fires within a second whatever is now due, each once, and a recurring schedule continues
// from the stepped now without replaying the occurrences it skipped; a backward step delays
// what is pending by the step, nothing fires early or twice; a harness's rate limit counts a
// backward step as no time elapsed, so its calls are not held back for the hour.
import { existsSync, readFileSync, readdirSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { TEST_CACHE } from './helpers/fixtures.js';
import { http, startBermd, stopBermd } from './helpers/cluster.js';
import { QG, sha, sleep, until } from './helpers/scale-out.js';

const MIN = 60_000;

/** libfaketime's preload library (Debian's faketime package), or null. */
function libfaketime(): string | null {
  for (const d of readdirSync('/usr/lib', { withFileTypes: true })) {
    const f = join('/usr/lib', d.name, 'faketime', 'libfaketime.so.1');
    if (d.isDirectory() && existsSync(f)) return f;
  }
  return null;
}

t.test('clock stepped an hour forward and back while wakes are pending', async (t) => {
  const lib = libfaketime();
  if (lib === null) {
    const why = "libfaketime not found (Debian's faketime package)";
    if (process.env.CI === 'true') t.fail(`${why} (CI=true: the clock-step test must run)`);
    else void t.skip(why, () => {});
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'berm-clock-'));
  const control = join(dir, 'faketime');
  const step = (offset: string) => writeFileSync(control, `${offset}\n`);
  step('+0');
  const root = join(dir, 'root');
  // the schedule grant: the recurring wake re-arms itself
  const config = join(dir, 'decl.toml');
  writeFileSync(
    config,
    `[[harnesses]]\nname = "qg"\nsource = "qg.elf"\nsha256 = "${sha(QG)}"\ncapabilities = ["schedule"]\n`,
  );
  const b = await startBermd({
    root,
    config,
    cacheDir: TEST_CACHE,
    workers: 1,
    // one call a second, a burst of one: the rate limit's clock is the wall clock too
    extra: ['--limit', 'harnessRate=1', '--limit', 'harnessBurst=2'],
    env: {
      LD_PRELOAD: lib,
      FAKETIME_TIMESTAMP_FILE: control,
      FAKETIME_NO_CACHE: '1',
      FAKETIME_DONT_FAKE_MONOTONIC: '1',
    },
  });
  t.teardown(() => stopBermd(b));
  t.equal((await http(`${b.url}/harnesses/qg`, 'PUT', QG)).status, 200, 'qg deployed');
  const arm = async (id: string, delay: number, payload = id) => {
    const a = await http(`${b.url}/wakes`, 'POST', { harness: 'qg', id, delay_ms: delay, payload });
    t.equal(a.status, 201, `${id} armed`);
    return a.body.due_at as number;
  };
  const fired = () => {
    const f = join(root, 'journal.jsonl');
    if (!existsSync(f)) return [];
    return readFileSync(f, 'utf8')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((r) => r.trigger === 'wake');
  };
  const firedOf = (id: string) => fired().filter((r) => r.wake === id);
  const pending = async () =>
    new Map(
      ((await http(`${b.url}/wakes`, 'GET')).body.wakes as { id: string; due_at: number }[]).map((w) => [
        w.id,
        w.due_at,
      ]),
    );

  const dueHalf = await arm('half', 30 * MIN);
  const dueLater = await arm('later', 90 * MIN);
  // a recurring schedule of a 10-minute period: 5 occurrences fall inside the step
  const dueTick = await arm('tick', 10 * MIN, `tick:${10 * MIN}`);
  await sleep(1500);
  t.same(fired(), [], 'nothing fires before the step');

  // forward an hour: what is now due fires at once, each once
  step('+1h');
  const t0 = performance.now();
  await until('half fired after the forward step', async () => firedOf('half').length > 0, 20_000).catch(
    (e: unknown) => t.fail((e as Error).message),
  );
  t.comment(`half fired ${Math.round(performance.now() - t0)} ms after the step`);
  await until('tick fired after the forward step', async () => firedOf('tick').length > 0, 20_000).catch(
    (e: unknown) => t.fail((e as Error).message),
  );
  await sleep(1500);
  const half = firedOf('half');
  t.equal(half.length, 1, 'half fired once');
  t.equal(half[0]?.scheduledAt, dueHalf, 'with its own due instant');
  t.equal(half[0]?.attempt, 1, 'as its first delivery');
  t.ok(
    (half[0]?.start as number) - dueHalf >= 29 * MIN,
    `its start on the stepped clock is half an hour past due (${(half[0]?.start as number) - dueHalf} ms)`,
  );
  const tick = firedOf('tick');
  t.equal(tick.length, 1, 'the recurring schedule fired once: the occurrences it skipped are not replayed');
  const w = await pending();
  t.ok(w.has('later'), 'later (due in 90 min) is still pending');
  t.equal(w.get('later'), dueLater, 'at its own due instant');
  // qg re-arms with a plain delay, which counts from the invocation's instant on the stepped clock
  // (berm_every would keep the phase instead: docs/wakes.md)
  t.ok(dueTick < (tick[0]?.start as number) - 49 * MIN, 'tick fired 50 min late on the stepped clock');
  t.equal(
    w.get('tick'),
    (tick[0]?.start as number) + 10 * MIN,
    'the schedule re-armed one period after it ran',
  );
  // calls spend the rate limit's tokens on the stepped clock
  for (let i = 0; i < 3; i++) await http(`${b.url}/harnesses/qg/tools/echo`, 'POST', { i: String(i) });
  const dueSoon = await arm('soon', 5000);

  // back an hour: nothing fires early, pending wakes wait out the step
  step('+0');
  const dueBack = await arm('back', 2000);
  await until('back fired after the backward step', async () => firedOf('back').length > 0, 20_000).catch(
    (e: unknown) => t.fail((e as Error).message),
  );
  t.equal(firedOf('back')[0]?.scheduledAt, dueBack, 'a wake armed after the backward step fires on time');
  await sleep(4000);
  t.same(firedOf('soon'), [], 'a wake due 5 s after the stepped now did not fire: the step delays it');
  t.equal((await pending()).get('soon'), dueSoon, 'it is pending at its own due instant');
  t.equal(firedOf('half').length, 1, 'nothing fired twice');
  t.equal(firedOf('tick').length, 1, 'the schedule did not fire again');
  // the rate limit refills from the step on (a backward step is no time elapsed, not a debt)
  const calls: number[] = [];
  for (let i = 0; i < 3; i++) {
    const c0 = performance.now();
    const a = await http(`${b.url}/harnesses/qg/tools/echo`, 'POST', { back: String(i) });
    calls.push(a.status);
    t.ok(performance.now() - c0 < 10_000, `call ${i} after the backward step answered within 10 s`);
    await sleep(1100);
  }
  t.same(calls, [200, 200, 200], 'calls after the backward step are served at the harness rate');
});

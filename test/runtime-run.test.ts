// `berm worker` as a child process: boot log (limits with their sources, harnesses with their
// grants), the SDK's recurring ticker (examples/ticker.elf, guest-sdk/examples/ticker) firing at
// its period with a trap costing one occurrence, `berm wake add|ls|rm --state`, and SIGTERM
// draining and exiting 0.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t from 'tap';
import { readJournal } from '../src/runtime/index.js';
import { ROOT, TEST_CACHE } from './helpers/fixtures.js';

const BERM = path.join(ROOT, 'bin', 'berm.js');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-run-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
const sha = (f: string) => createHash('sha256').update(fs.readFileSync(f)).digest('hex');
const entry = (name: string, elf: string, caps: string[]) =>
  `[[harnesses]]\nname = "${name}"\nsource = "${elf}"\nsha256 = "${sha(elf)}"\ncapabilities = ${JSON.stringify(caps)}\n`;
const config = path.join(dir, 'harnesses.toml');
fs.writeFileSync(
  config,
  '[limits]\ntimeoutMs = 4000\n\n' +
    entry('ticker', path.join(ROOT, 'examples', 'ticker.elf'), ['schedule', 'storage']) +
    entry('plain', path.join(ROOT, 'fixtures', 'build', 'echo-gcc-O2.elf'), []),
);
const state = path.join(dir, 'state');
const env = { ...process.env, BERM_CACHE_DIR: TEST_CACHE };

function berm(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BERM, ...args], { env, encoding: 'utf8', timeout: 120_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

t.test(
  'berm worker: boot log, a recurring harness at its period, a trap costs one occurrence, SIGTERM exits 0',
  async (t) => {
    const child = spawn(
      process.execPath,
      [
        BERM,
        'worker',
        '--verbose',
        '--config',
        config,
        '--state',
        state,
        '--workers',
        '2',
        '--limit',
        'overrun=defer',
      ],
      { env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    t.teardown(() => void child.kill('SIGKILL'));
    const waitFor = async (re: RegExp, ms: number) => {
      const end = Date.now() + ms;
      while (!re.test(out)) {
        if (Date.now() > end)
          throw new Error(`timed out waiting for ${re}; stdout:\n${out}\nstderr:\n${err}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    await waitFor(/berm worker: ready/, 120_000);
    t.match(out, /limit timeoutMs = 4000 \(file\)/, 'a limit from the file');
    t.match(out, /limit overrun = defer \(flag\)/, 'a limit from a flag');
    t.match(out, /limit chainDepth = 4 \(default\)/, 'a default limit');
    t.match(out, /workers = 2 \(flag\)/);
    t.match(out, /harness ticker: schedule, storage.*on_wake/);
    t.match(out, /harness plain: no capabilities; 2 tools/);

    // the period and the occurrence that traps ride in the payload (guest-sdk/examples/ticker)
    const PERIOD = 400;
    const add = berm([
      'wake',
      'add',
      'ticker',
      '--state',
      state,
      '--config',
      config,
      '--in',
      String(PERIOD),
      '--id',
      'ticker',
      '--payload',
      JSON.stringify({ period_ms: PERIOD, trap_on: 3 }),
    ]);
    t.equal(add.status, 0, add.stderr);
    t.equal(add.stdout.trim(), 'ticker');
    const refused = berm(['wake', 'add', 'plain', '--state', state, '--config', config, '--in', '10']);
    t.equal(refused.status, 2);
    t.match(refused.stderr, /plain does not export on_wake/);

    // seven occurrences (each line followed by its --verbose log lines)
    await waitFor(/wake=ticker attempt=1[^\n]*\n(( {2}\[log\][^\n]*\n)*.*wake=ticker[^\n]*\n){6}/, 60_000);
    const ls = berm(['wake', 'ls', '--state', state, '--json']);
    t.equal(ls.status, 0, ls.stderr);
    t.match(JSON.parse(ls.stdout), [{ id: 'ticker', harness: 'ticker' }], 'the schedule is still armed');
    // --verbose: each wake's log lines (guest-sdk/examples/ticker's berm_logf) under its line
    t.match(
      out,
      /wake=ticker attempt=1 late=\d+ms\n {2}\[log\] tick 1 \(occurrence 1, attempt 1, \d+ ms late\)\n/,
    );
    t.match(out, /ticker\.on_wake trapped [^\n]*\n {2}\[log\] ticker: occurrence 3 traps as asked\n/);
    child.kill('SIGTERM');
    t.equal(await exited, 0, 'SIGTERM drains and exits 0');
    t.match(out, /SIGTERM: draining in-flight work/);

    const ticks = readJournal(path.join(state, 'journal.jsonl')).filter((r) => r.wake === 'ticker');
    t.ok(ticks.length >= 7, `${ticks.length} occurrences`);
    t.same(
      ticks.slice(0, 5).map((r) => r.outcome),
      ['ok', 'ok', 'trapped', 'ok', 'ok'],
      'the third occurrence trapped; the schedule went on',
    );
    t.match(ticks[2], { detail: /MemoryFault/ });
    for (let i = 1; i < ticks.length; i++) {
      const gap = ticks[i]!.scheduledAt! - ticks[i - 1]!.scheduledAt!;
      // each occurrence re-arms k periods after its own scheduled instant (berm_every keeps the
      // phase; delays count from the record's now, docs/wakes.md): k = 1 unless it started late
      t.ok(gap > 0 && gap % PERIOD === 0, `occurrence ${i + 1} due ${gap} ms after the previous`);
    }
    const rm = berm(['wake', 'rm', 'ticker', '--state', state]);
    t.equal(rm.status, 0, rm.stderr);
    t.equal(berm(['wake', 'rm', 'ticker', '--state', state]).status, 2, 'nothing left to cancel');
  },
);

// `berm wake add --state` telling a running `berm worker` to rescan, against a queue that is
// draining and against a pid file a killed queue left behind: a wake armed during a SIGTERM drain
// never kills the queue (the wake in flight is journaled once and the process exits 0), and a
// stale run.pid never gets another process signalled (the pid is checked against the state lock).
// The ready line counts as re-deliveries only the claims found at start.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t from 'tap';
import { readJournal } from '../src/runtime/index.js';
import { runBerm } from './helpers/berm-cli.js';
import { ROOT, TEST_CACHE } from './helpers/fixtures.js';

const BERM = path.join(ROOT, 'bin', 'berm.js');
const ELF = path.join(ROOT, 'test', 'data', 'queue-guest.elf');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-run-signals-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
const config = path.join(dir, 'harnesses.toml');
// a spinning wake runs until its 10 s timeout (a CLI start takes seconds on a loaded machine); the drain
// waits for it (drainMs above the timeout: it ends by its own deadline, not interrupted by close)
fs.writeFileSync(
  config,
  '[limits]\ntimeoutMs = 10000\ndrainMs = 30000\n\n' +
    `[[harnesses]]\nname = "qg"\nsource = "${ELF}"\n` +
    `sha256 = "${createHash('sha256').update(fs.readFileSync(ELF)).digest('hex')}"\ncapabilities = []\n`,
);

interface Queue {
  child: ChildProcess;
  out: () => string;
  waitFor: (re: RegExp, ms: number) => Promise<void>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function startQueue(state: string): Queue {
  const child = spawn(
    process.execPath,
    [BERM, 'worker', '--config', config, '--state', state, '--workers', '1'],
    { env: { ...process.env, BERM_CACHE_DIR: TEST_CACHE }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  const waitFor = async (re: RegExp, ms: number) => {
    const end = Date.now() + ms;
    while (!re.test(out)) {
      if (Date.now() > end || child.exitCode !== null || child.signalCode !== null)
        throw new Error(`no ${re} from berm worker; stdout:\n${out}\nstderr:\n${err}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  };
  return { child, out: () => out, waitFor, exited };
}

const wakeAdd = (state: string, ...more: string[]) =>
  runBerm(['wake', 'add', 'qg', '--state', state, '--config', config, ...more], TEST_CACHE);

t.test(
  'a wake armed from the CLI during a SIGTERM drain: the queue drains, exits 0, journals once',
  async (t) => {
    const state = path.join(dir, 'drain');
    const q = startQueue(state);
    t.teardown(() => void q.child.kill('SIGKILL'));
    await q.waitFor(/berm worker: ready/, 120_000);
    const add = await wakeAdd(state, '--id', 'spinner', '--payload', 'spin');
    t.equal(add.code, 0, add.stderr);
    // the spinning wake has started when the worker is busy; give the rescan a moment to fire it
    await new Promise((r) => setTimeout(r, 500));
    q.child.kill('SIGTERM');
    await q.waitFor(/SIGTERM: draining in-flight work/, 10_000);
    // armed while the spinner still runs (about 9 s of its 10 s left): the runner is signalled
    const late = await wakeAdd(state, '--id', 'late', '--in', '60000', '--json');
    t.equal(late.code, 0, late.stderr);
    t.match(JSON.parse(late.stdout), { signalled: true }, 'the draining queue was told');
    const end = await q.exited;
    t.same(end, { code: 0, signal: null }, `berm worker exits 0 after the drain:\n${q.out()}`);
    t.match(q.out(), /berm worker: stopped/);
    const spins = readJournal(path.join(state, 'journal.jsonl')).filter((r) => r.wake === 'spinner');
    t.equal(spins.length, 1, 'the wake in flight is journaled once');
    t.match(spins[0], { outcome: 'trapped', attempt: 1 });
    t.notOk(fs.existsSync(path.join(state, 'run.pid')), 'the pid file is gone');

    // the next start: the wake armed during the drain is still pending, the spinner is not run again
    const q2 = startQueue(state);
    t.teardown(() => void q2.child.kill('SIGKILL'));
    await q2.waitFor(/berm worker: ready; 1 wakes pending, 0 to re-deliver/, 120_000);
    await new Promise((r) => setTimeout(r, 300));
    q2.child.kill('SIGTERM');
    t.same(await q2.exited, { code: 0, signal: null });
    const again = readJournal(path.join(state, 'journal.jsonl')).filter((r) => r.wake === 'spinner');
    t.equal(again.length, 1, 'the spinner did not run again');
  },
);

t.test('a stale run.pid after a SIGKILL: berm wake add signals nobody', async (t) => {
  const state = path.join(dir, 'stale');
  const q = startQueue(state);
  t.teardown(() => void q.child.kill('SIGKILL'));
  await q.waitFor(/berm worker: ready/, 120_000);
  const pid = q.child.pid!;
  t.equal(fs.readFileSync(path.join(state, 'run.pid'), 'utf8').trim(), String(pid));
  q.child.kill('SIGKILL');
  await q.exited;
  t.ok(fs.existsSync(path.join(state, 'run.pid')), 'a SIGKILL leaves the pid file behind');
  // the killed queue's pid now belongs to an unrelated process (a reused pid, made certain here
  // by writing that process's pid into the file)
  const bystander = spawn('sleep', ['30'], { stdio: 'ignore' });
  t.teardown(() => void bystander.kill('SIGKILL'));
  const bystanderEnd = new Promise<NodeJS.Signals | null>((resolve) =>
    bystander.on('exit', (_code, signal) => resolve(signal)),
  );
  fs.writeFileSync(path.join(state, 'run.pid'), `${bystander.pid}\n`);
  const add = await wakeAdd(state, '--id', 'after-kill', '--in', '60000', '--json');
  t.equal(add.code, 0, add.stderr);
  t.match(JSON.parse(add.stdout), { signalled: false }, 'no queue runs: nobody is told');
  const early = await Promise.race([bystanderEnd, new Promise((r) => setTimeout(() => r('alive'), 300))]);
  t.equal(early, 'alive', 'the process holding the stale pid was not signalled');

  // a queue started again owns the pid file: wake add reaches it
  const q2 = startQueue(state);
  t.teardown(() => void q2.child.kill('SIGKILL'));
  await q2.waitFor(/berm worker: ready/, 120_000);
  const add2 = await wakeAdd(state, '--id', 'live', '--in', '60000', '--json');
  t.match(JSON.parse(add2.stdout), { signalled: true });
  await q2.waitFor(/picked up 1 wakes armed from outside/, 10_000);
  q2.child.kill('SIGTERM');
  t.same(await q2.exited, { code: 0, signal: null });
});

t.test('a fresh state with a wake due at once: ready says nothing is to be re-delivered', async (t) => {
  const state = path.join(dir, 'fresh');
  const add = await wakeAdd(state, '--id', 'first', '--in', '0');
  t.equal(add.code, 0, add.stderr);
  const q = startQueue(state);
  t.teardown(() => void q.child.kill('SIGKILL'));
  await q.waitFor(/berm worker: ready;/, 120_000);
  t.match(
    q.out(),
    /berm worker: ready; 1 wakes pending, 0 to re-deliver\n/,
    'nothing crashed: 0 to re-deliver',
  );
  await q.waitFor(/wake=first attempt=1 /, 30_000);
  q.child.kill('SIGTERM');
  t.same(await q.exited, { code: 0, signal: null });
});

// The dead-letter set through bermd and the CLI, with real SIGKILLs: two wakes spinning in a real
// bermd process when it is killed come back at the next start with their attempt past
// wakeAttempts (1 here), so they are not run again but moved to the dead-letter set (reason
// interrupted). They show in GET /wakes/dead, `berm wake ls --dead` (--host and --state, text and
// --json) and /metrics; they survive another SIGKILL; `berm wake retry` arms one again (it runs,
// attempt 1, and leaves the set); `berm wake drop` removes the other (journaled); nothing else is
// lost or run twice.
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO } from './helpers/daemon.js';
import { TEST_CACHE } from './helpers/fixtures.js';
import { runBerm } from './helpers/berm-cli.js';
import { sleep, until } from './helpers/wait.js';

const QG = readFileSync(join(REPO, 'test/data/queue-guest.elf'));
const root = mkdtempSync(join(tmpdir(), 'bermd-dead-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));

interface Bermd {
  proc: ChildProcess;
  url: string;
}

function startBermd(): Promise<Bermd> {
  return new Promise((resolve, reject) => {
    const proc = spawn(
      process.execPath,
      [
        '--stack-size=4000',
        join(REPO, 'bin/bermd.js'),
        '--addr',
        '127.0.0.1:0',
        '--root',
        root,
        '--cache-dir',
        TEST_CACHE,
        '--workers',
        '2',
        '--limit',
        'wakeAttempts=1',
        // both of qg's wakes run at once (by default one harness leaves a worker to the others)
        '--limit',
        'harnessConcurrency=2',
        '--limit',
        'timeoutMs=8000',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let err = '';
    const timer = setTimeout(() => reject(new Error(`bermd did not start:\n${err}`)), 90_000);
    proc.stderr!.on('data', (c: Buffer) => {
      err += c.toString();
      const m = /listening on (http:\/\/\S+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, url: m[1]! });
      }
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`bermd exited with ${code} before listening:\n${err}`));
    });
  });
}

function kill9(b: Bermd): Promise<void> {
  return new Promise((resolve) => {
    if (b.proc.exitCode !== null || b.proc.signalCode !== null) return resolve();
    b.proc.once('exit', () => resolve());
    b.proc.kill('SIGKILL');
  });
}

/** The value of a metric line `name` (with labels) in a /metrics text, or undefined. */
function metric(text: string, name: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

function journal(): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const f of readdirSync(root)) {
    if (!/^journal(\.\d+)?\.jsonl$/.test(f)) continue;
    for (const line of readFileSync(join(root, f), 'utf8').split('\n'))
      if (line.trim() !== '') out.push(JSON.parse(line) as Record<string, unknown>);
  }
  return out;
}

interface DeadEntry {
  id: string;
  harness: string;
  payload: string;
  reason: string;
  attempts: number;
  last_error: string;
  dead_at: number;
  due_at: number;
}

t.test(
  'killed while running: dead-lettered, shown, kept, retried, dropped',
  { timeout: 300_000 },
  async (t) => {
    let b = await startBermd();
    t.teardown(() => kill9(b));
    t.equal((await fetch(`${b.url}/harnesses/qg`, { method: 'PUT', body: QG })).status, 200);
    const armedAt = Date.now();
    for (const id of ['a', 'b']) {
      const r = await fetch(`${b.url}/wakes`, {
        method: 'POST',
        body: JSON.stringify({ harness: 'qg', id, delay_ms: 0, payload: 'spin' }),
      });
      t.equal(r.status, 201, `wake ${id} armed`);
    }
    // both running (spinning for up to timeoutMs): killed mid-run
    await until(
      'both wakes running',
      async () => metric(await (await fetch(`${b.url}/metrics`)).text(), 'berm_in_flight') === 2,
      60_000,
      50,
    );
    await kill9(b);
    t.same(
      journal().filter((r) => r.trigger === 'wake'),
      [],
      'killed before either ended',
    );

    // the next start: each claim comes back at attempt 2 > wakeAttempts 1 and is not run again
    b = await startBermd();
    let dead: DeadEntry[] = [];
    await until(
      'the dead-letter set filled',
      async () => {
        const j = (await (await fetch(`${b.url}/wakes/dead`)).json()) as { dead: DeadEntry[]; count: number };
        dead = j.dead;
        return j.count === 2;
      },
      60_000,
    );
    t.same(dead.map((d) => d.id).sort(), ['a', 'b']);
    for (const d of dead) {
      t.match(d, { harness: 'qg', payload: 'spin', reason: 'interrupted', attempts: 1, kind: 'wake' });
      t.match(d.last_error, /process running it stopped/);
      t.ok(d.dead_at >= armedAt && d.due_at >= armedAt - 1000 && d.due_at <= d.dead_at, 'times');
    }
    const metrics = await (await fetch(`${b.url}/metrics`)).text();
    t.equal(metric(metrics, 'berm_wakes_dead{harness="qg"}'), 2, 'gauge per harness');
    t.equal(metric(metrics, 'berm_wakes_dead_total'), 2, 'counter of entries');
    t.equal(metric(metrics, 'berm_wakes_pending'), 0, 'nothing pending');
    t.same(
      journal()
        .filter((r) => r.trigger === 'dead')
        .map((r) => [r.wake, r.attempt])
        .sort(),
      [
        ['a', 1],
        ['b', 1],
      ],
      'each move journaled',
    );

    // the CLI: against bermd (--host) and on its state directory (--state), text and --json
    const host = await runBerm(['wake', 'ls', '--dead', '--host', b.url], TEST_CACHE);
    t.equal(host.code, 0, host.stderr);
    t.match(host.stdout, /^ID\s+HARNESS\s+DEAD SINCE\s+REASON\s+ATTEMPTS\s+LAST ERROR\n/);
    t.match(host.stdout, /\na\s+qg\s+\S+Z\s+interrupted\s+1\s+no outcome of delivery 1/);
    const json = await runBerm(['--json', 'wake', 'ls', '--dead', '--host', b.url], TEST_CACHE);
    t.equal(json.code, 0, json.stderr);
    t.same((JSON.parse(json.stdout) as DeadEntry[]).map((d) => [d.id, d.reason]).sort(), [
      ['a', 'interrupted'],
      ['b', 'interrupted'],
    ]);
    const local = await runBerm(['--json', 'wake', 'ls', '--dead', '--state', root], TEST_CACHE);
    t.equal(local.code, 0, local.stderr);
    t.same(JSON.parse(local.stdout), JSON.parse(json.stdout), '--state lists what bermd lists');

    // kept across another SIGKILL
    await kill9(b);
    b = await startBermd();
    const kept = (await (await fetch(`${b.url}/wakes/dead`)).json()) as { dead: DeadEntry[]; count: number };
    t.equal(kept.count, 2, 'the set survived the kill');
    t.equal(
      metric(await (await fetch(`${b.url}/metrics`)).text(), 'berm_wakes_dead{harness="qg"}'),
      2,
      'gauge after the restart',
    );

    // retry a: out of the set, runs again from attempt 1 (it spins into its own deadline: a
    // guest's own outcome, journaled, not dead-lettered)
    const retry = await runBerm(['wake', 'retry', 'a', '--host', b.url], TEST_CACHE);
    t.equal(retry.code, 0, retry.stderr);
    t.equal(retry.stdout, 'armed a again\n');
    await until(
      'a ran again',
      async () => journal().some((r) => r.trigger === 'wake' && r.wake === 'a'),
      90_000,
    );
    t.match(
      journal().filter((r) => r.trigger === 'wake'),
      [{ wake: 'a', attempt: 1, outcome: 'trapped' }],
      'ran once, attempt 1',
    );
    const missing = await fetch(`${b.url}/wakes/dead/a/retry`, { method: 'POST' });
    t.equal(missing.status, 404, 'no longer in the set');

    // drop b, through the state directory's door while bermd runs; the daemon's list follows
    const drop = await runBerm(['wake', 'drop', 'b', '--state', root], TEST_CACHE);
    t.equal(drop.code, 0, drop.stderr);
    t.equal(drop.stdout, 'dropped b\n');
    const again = await runBerm(['wake', 'drop', 'b', '--host', b.url], TEST_CACHE);
    t.equal(again.code, 2, 'a second drop is refused');
    t.match(again.stderr, /b/);
    t.equal((await fetch(`${b.url}/wakes/dead/b`, { method: 'DELETE' })).status, 404);
    const empty = (await (await fetch(`${b.url}/wakes/dead`)).json()) as { dead: DeadEntry[]; count: number };
    t.same(empty, { dead: [], count: 0 });
    t.equal(
      metric(await (await fetch(`${b.url}/metrics`)).text(), 'berm_wakes_dead{harness="qg"}'),
      undefined,
      'gauge empty',
    );
    t.match(
      journal().filter((r) => r.trigger === 'drop'),
      [{ wake: 'b', harness: 'qg', attempt: 1 }],
      'the drop journaled',
    );
    await sleep(200);
    t.equal(journal().filter((r) => r.trigger === 'wake').length, 1, 'nothing else ran');
  },
);

// At-least-once delivery under kill -9 (docs/runtime-queue.md, "Delivery"): 10,000 wakes due over
// a few seconds, `berm worker` SIGKILLed at random moments at least 20 times and restarted; from the
// journal: every wake fired at least once, and every repeated delivery of a wake carries a higher
// attempt than the one before it (so every duplicate has attempt > 1), counted.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t from 'tap';
import { readJournal, SqliteStore, type WakeSpec } from '../src/runtime/index.js';
import { ROOT, TEST_CACHE } from './helpers/fixtures.js';

const WAKES = 10_000;
const KILLS = 20;
const BERM = path.join(ROOT, 'bin', 'berm.js');
const ELF = path.join(ROOT, 'test', 'data', 'queue-guest.elf');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-crash-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
const config = path.join(dir, 'harnesses.toml');
fs.writeFileSync(
  config,
  `[[harnesses]]\nname = "qg"\nsource = "${ELF}"\n` +
    `sha256 = "${createHash('sha256').update(fs.readFileSync(ELF)).digest('hex')}"\ncapabilities = []\n`,
);
const state = path.join(dir, 'state');
const journal = path.join(state, 'journal.jsonl');

// a seeded generator: the kill moments differ between moments of one run, not between runs
let seed = 0x5eed;
const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;

function start(): { child: ChildProcess; ready: Promise<void>; exited: Promise<number | null> } {
  const child = spawn(
    process.execPath,
    [BERM, 'worker', '--config', config, '--state', state, '--workers', '2'],
    { env: { ...process.env, BERM_CACHE_DIR: TEST_CACHE }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      // invocation lines are many: keep only the tail, enough to see a "ready" cut between two
      // chunks. Looked for before the cut: a reader that falls behind (a loaded machine) gets the
      // line in one chunk with thousands of invocation lines after it, and the tail alone has lost it
      const seen = out + d.toString();
      if (/berm worker: ready/.test(seen)) resolve();
      out = seen.slice(-4096);
    });
    child.on('exit', (code) => reject(new Error(`berm worker exited (${code}) before it was ready: ${err}`)));
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, ready, exited };
}

function firedIds(): Set<string> {
  return new Set(readJournal(journal).flatMap((r) => (r.trigger === 'wake' && r.wake ? [r.wake] : [])));
}

t.test(
  `${WAKES} wakes survive ${KILLS} SIGKILLs: each fires at least once, repeats carry attempt > 1`,
  async (t) => {
    // arm through the store, as `berm wake add --count` does, due over the first seconds
    const store = SqliteStore.open(state);
    const now = Date.now();
    const specs: WakeSpec[] = [];
    for (let i = 0; i < WAKES; i++) {
      specs.push({
        id: `w${i}`,
        kind: 'wake',
        harness: 'qg',
        entry: 'on_wake',
        when: now + 3000 + Math.floor((i * 6000) / WAKES),
        payload: '',
        armedBy: 'test',
        chain: null,
        depth: 0,
        armedAt: now,
      });
    }
    store.dues.armMany(specs);
    t.equal(store.dues.count(), WAKES);
    store.close();

    let kills = 0;
    let killedWhileFiring = 0;
    while (kills < KILLS) {
      const run = start();
      await run.ready;
      const before = firedIds().size;
      await new Promise((r) => setTimeout(r, 100 + random() * 600));
      run.child.kill('SIGKILL');
      await run.exited;
      kills++;
      if (firedIds().size > before) killedWhileFiring++;
    }
    t.ok(killedWhileFiring >= 5, `${killedWhileFiring} of the ${KILLS} kills fell while wakes were firing`);

    // a last run to the end, stopped cleanly
    const run = start();
    await run.ready;
    const deadline = Date.now() + 150_000;
    // fired, or moved to the dead-letter set (journaled with trigger `dead`)
    const settled = (): number =>
      new Set(
        readJournal(journal).flatMap((r) =>
          (r.trigger === 'wake' || r.trigger === 'dead') && r.wake ? [r.wake] : [],
        ),
      ).size;
    while (settled() < WAKES && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
    run.child.kill('SIGTERM');
    t.equal(await run.exited, 0, 'the last run stops cleanly');

    const records = readJournal(journal).filter((r) => r.trigger === 'wake');
    const byId = new Map<string, number[]>();
    for (const r of records) byId.set(r.wake!, [...(byId.get(r.wake!) ?? []), r.attempt!]);
    // a wake whose process was killed during each of its wakeAttempts (3) deliveries is not lost:
    // it is in the dead-letter set (docs/wakes.md), interrupted, for the operator to retry
    const reStore = SqliteStore.open(state);
    const dead = reStore.dues.deadList();
    const deadIds = new Set(dead.map((d) => d.wake.id));
    t.ok(
      dead.every((d) => d.reason === 'interrupted' && d.attempts >= 3 && !byId.has(d.wake.id)),
      `the ${dead.length} dead-lettered wakes were interrupted on each of their 3 deliveries`,
    );
    const missing = specs.filter((s) => !byId.has(s.id) && !deadIds.has(s.id)).map((s) => s.id);
    t.same(
      missing.slice(0, 10),
      [],
      `every wake fired at least once or is in the dead-letter set (${missing.length} missing)`,
    );
    let duplicates = 0;
    let bad = 0;
    for (const attempts of byId.values()) {
      if (attempts.length > 1) duplicates += attempts.length - 1;
      // journal order is delivery order: each repeat has a higher attempt than the one before
      for (let i = 1; i < attempts.length; i++)
        if (!(attempts[i]! > attempts[i - 1]! && attempts[i]! > 1)) bad++;
    }
    t.equal(bad, 0, 'every repeated delivery carries a higher attempt, > 1');
    t.ok(
      records.every((r) => r.outcome === 'ok'),
      'every delivery ran to completion',
    );
    t.equal(reStore.dues.count(), 0, 'nothing left pending');
    t.same(reStore.dues.claimed(), [], 'nothing left claimed');
    reStore.close();
    const redelivered = records.filter((r) => r.attempt! > 1).length;
    t.ok(redelivered > 0, 'kills during firing left claims that were delivered again');
    t.comment(
      `${records.length} deliveries of ${WAKES} wakes after ${KILLS} SIGKILLs: ${redelivered} with ` +
        `attempt > 1 (claimed by a killed process), ${duplicates} of them repeating a journaled delivery`,
    );
  },
);

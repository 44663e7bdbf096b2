// SIGKILL of a real bermd process during deploys and invocations. After each kill a new bermd on
// the same root must list every acknowledged deploy with its digest, serve no half-written image
// (every stored image hashes to its name; no temporary file survives the restart), and its
// journal must hold every acknowledged invocation (matched by the chain id bermd returned).
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO, elf } from './helpers/daemon.js';
import { TEST_CACHE } from './helpers/fixtures.js';

const IMAGES = [
  elf('fixtures/build/echo-gcc-O2.elf'),
  elf('fixtures/build/echo-clang-O2.elf'),
  elf('fixtures/build/text-gcc-O2.elf'),
  elf('fixtures/build/misbehave-gcc-O2.elf'),
];
const ECHO = IMAGES[0]!;
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');
const ROUNDS = 4;

interface Bermd {
  proc: ChildProcess;
  url: string;
}

function startBermd(root: string): Promise<Bermd> {
  return new Promise((resolve, reject) => {
    const proc = spawn(
      process.execPath,
      [
        join(REPO, 'bin/bermd.js'),
        '--addr',
        '127.0.0.1:0',
        '--root',
        root,
        '--cache-dir',
        TEST_CACHE,
        '--workers',
        '2',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let err = '';
    const timer = setTimeout(() => reject(new Error(`bermd did not start:\n${err}`)), 60_000);
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

function journalChains(root: string): Set<string> {
  const out = new Set<string>();
  for (const f of readdirSync(root)) {
    if (!/^journal(\.\d+)?\.jsonl$/.test(f)) continue;
    for (const line of readFileSync(join(root, f), 'utf8').split('\n')) {
      try {
        out.add((JSON.parse(line) as { chain: string }).chain);
      } catch {
        // a torn last line: that invocation was never acknowledged
      }
    }
  }
  return out;
}

t.test(
  'SIGKILL during deploys and invocations loses nothing acknowledged',
  { timeout: 240_000 },
  async (t) => {
    const root = mkdtempSync(join(tmpdir(), 'bermd-crash-'));
    const acked = new Map<string, string>(); // name -> digest
    const ackedChains: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const b = await startBermd(root);
      // the previous rounds' deploys are all there, with their digests
      const list = (await (await fetch(`${b.url}/harnesses`)).json()) as { name: string; digest: string }[];
      const listed = new Map(list.map((h) => [h.name, h.digest]));
      for (const [name, digest] of acked)
        t.equal(listed.get(name), digest, `round ${round}: ${name} survived`);
      const images = join(root, 'deployments', 'images');
      for (const f of readdirSync(images)) {
        t.notOk(f.startsWith('.tmp-'), `no temporary image survives the restart (${f})`);
        if (f.endsWith('.elf')) t.equal(sha(readFileSync(join(images, f))), f.slice(0, -4), `${f} is whole`);
      }
      if (round > 0) {
        const chains = journalChains(root);
        const missing = ackedChains.filter((c) => !chains.has(c));
        t.same(missing, [], `round ${round}: every acknowledged invocation is in the journal`);
        // a restored harness answers
        const r = await fetch(`${b.url}/harnesses/base/tools/echo`, { method: 'POST', body: '{"r":1}' });
        t.same(await r.json(), { done: '{"r":1}' });
      } else {
        const r = await fetch(`${b.url}/harnesses/base`, { method: 'PUT', body: ECHO });
        t.equal(r.status, 200);
        acked.set('base', sha(ECHO));
      }

      // deploys and invocations in flight; kill at a random moment after this round's first
      // acknowledged deploy (so every round has something acknowledged to lose, however slow the
      // machine: a fixed delay killed before any deploy was answered under heavy load)
      let stop = false;
      let firstAck: () => void = () => {};
      const acknowledged = new Promise<void>((r) => (firstAck = r));
      const deployer = async (k: number): Promise<void> => {
        for (let i = 0; !stop; i++) {
          const img = IMAGES[(round + k + i) % IMAGES.length]!;
          const name = `r${round}-k${k}-${i}`;
          try {
            const r = await fetch(`${b.url}/harnesses/${name}`, { method: 'PUT', body: img });
            if (r.status === 200) {
              const j = (await r.json()) as { digest: string };
              acked.set(name, j.digest);
              firstAck();
            }
          } catch {
            return; // killed
          }
        }
      };
      const invoker = async (): Promise<void> => {
        while (!stop) {
          try {
            const r = await fetch(`${b.url}/harnesses/base/tools/echo`, { method: 'POST', body: '{"x":1}' });
            const chain = r.headers.get('x-berm-chain');
            if (r.status === 200 && (await r.json()) && chain) ackedChains.push(chain);
          } catch {
            return;
          }
        }
      };
      const work = [deployer(0), deployer(1), invoker(), invoker()];
      await Promise.race([acknowledged, new Promise((r) => setTimeout(r, 60_000))]);
      await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 1200)));
      await kill9(b);
      stop = true;
      await Promise.all(work);
    }
    const b = await startBermd(root);
    t.teardown(() => kill9(b));
    const list = (await (await fetch(`${b.url}/harnesses`)).json()) as { name: string; digest: string }[];
    const listed = new Map(list.map((h) => [h.name, h.digest]));
    for (const [name, digest] of acked) t.equal(listed.get(name), digest, `final: ${name} survived`);
    t.ok(acked.size > ROUNDS, `deploys were acknowledged (${acked.size})`);
    t.ok(ackedChains.length > 0, `invocations were acknowledged (${ackedChains.length})`);
    const missing = ackedChains.filter((c) => !journalChains(root).has(c));
    t.same(missing, [], 'final: every acknowledged invocation is in the journal');
    t.notOk(existsSync(join(root, 'deployments', 'deployments.json.tmp')), 'no temporary index');
  },
);

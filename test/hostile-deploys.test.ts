// Many deployments against a real bermd process (bin/bermd.js on 127.0.0.1, port 0), each
// scenario bounded in time: every deployment answered 200 answers its calls, and a deployment
// whose instance cannot be made is refused 507 (never acknowledged). The instance memory they
// keep: test/hostile-memory.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { bermdArgs, startBermd, stopBermd, type Bermd } from './helpers/cluster.js';
import { elf, REPO } from './helpers/daemon.js';
import { TEST_CACHE } from './helpers/fixtures.js';
import { call, put, rss } from './helpers/bermd-load.js';

const ECHO = elf('fixtures/build/echo-gcc-O2.elf');
const MiB = 1024 * 1024;
const tmp = mkdtempSync(join(tmpdir(), 'berm-hostile-deploys-'));
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));

t.test('many deployments on 16 workers all answer their calls', async (t) => {
  const b = await startBermd({ root: join(tmp, 'many'), cacheDir: TEST_CACHE, workers: 16 }, 120_000);
  t.teardown(() => stopBermd(b));
  // 1,000 take minutes on a loaded 2-core machine (each deploy registers the module in all 16
  // workers and writes the deployment index durably); the address space no longer grows with the
  // deployments (one instance made per deploy, in one worker; each worker keeps at most 2,048 / 16
  // instances: test/slot-keeper), so fewer show the same: every acknowledged deploy answers
  const N = 60;
  const status: number[] = new Array<number>(N);
  let next = 0;
  const started = Date.now();
  // eight deploys in flight at once
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < N) {
        const i = next++;
        const r = await put(b, `e${i}`, ECHO);
        status[i] = r.status;
        if (r.status !== 200) t.fail(`deploy e${i}: ${r.status} ${await r.text()}`);
        else await r.body?.cancel();
      }
    }),
  );
  const deployMs = Date.now() - started;
  const ok = status.filter((s) => s === 200).length;
  t.equal(ok, N, 'every deploy acknowledged');
  // every acknowledged deployment answers
  const names = Array.from({ length: N }, (_, k) => k);
  const answers = await Promise.all(
    names.map(async (i) => {
      const r = await call(b, `e${i}`, 'echo', { i });
      return { i, status: r.status, body: (await r.json()) as unknown };
    }),
  );
  for (const a of answers) t.same(a, { i: a.i, status: 200, body: { done: JSON.stringify({ i: a.i }) } });
  t.comment(
    `${N} deploys in ${(deployMs / 1000).toFixed(1)} s; RSS ${(rss(b.proc.pid!) / MiB).toFixed(0)} MiB`,
  );
  t.notMatch(b.log(), /could not allocate memory/, 'no allocation failed');
});

t.test('a deployment whose instance cannot be made is refused 507, never acknowledged', async (t) => {
  // the address space cut to 48 GiB (`ulimit -v`): V8 starts, and each guest memory reserves
  // about 10 GiB of it, so only a few instances can exist at once
  const root = join(tmp, 'refuse');
  const args = bermdArgs({ root, cacheDir: TEST_CACHE, workers: 1 });
  const proc = spawn(
    'bash',
    ['-c', 'ulimit -v $((48 * 1024 * 1024)) && exec "$@"', 'bash', process.execPath, ...args],
    { stdio: ['ignore', 'ignore', 'pipe'], cwd: REPO },
  );
  const b = await new Promise<Bermd>((resolve, reject) => {
    let err = '';
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
      proc.once('exit', (code, signal) => res({ code, signal })),
    );
    proc.stderr.on('data', (c: Buffer) => {
      err += c.toString();
      const m = /listening on (http:\/\/\S+)/.exec(err);
      if (m) resolve({ proc, url: m[1]!, log: () => err, exited });
    });
    void exited.then(() => reject(new Error(`bermd exited:\n${err}`)));
  });
  t.teardown(() => stopBermd(b));
  const answered: { name: string; status: number; body: Record<string, unknown> }[] = [];
  for (let i = 0; i < 12; i++) {
    const r = await put(b, `e${i}`, ECHO);
    answered.push({ name: `e${i}`, status: r.status, body: (await r.json()) as Record<string, unknown> });
    if (r.status !== 200) break;
  }
  const refused = answered.at(-1)!;
  t.ok(answered.length > 1, `${answered.length - 1} deploys acknowledged first`);
  t.equal(refused.status, 507, 'then one refused');
  t.equal(refused.body.limit, 'max-instance-memory');
  t.match(
    refused.body.error,
    /harness e\d+ cannot be served: a worker could not make its instance \(.*could not allocate memory/,
  );
  const list = (await (await fetch(`${b.url}/harnesses`)).json()) as { name: string }[];
  const listed = (
    Array.isArray(list) ? list : ((list as { harnesses?: { name: string }[] }).harnesses ?? [])
  ).map((h) => h.name);
  t.notOk(listed.includes(refused.name), 'the refused one is not listed');
  // every acknowledged one answers
  for (const a of answered.slice(0, -1)) {
    const r = await call(b, a.name, 'echo', { n: a.name });
    t.same(await r.json(), { done: JSON.stringify({ n: a.name }) }, `${a.name} answers`);
  }
  const again = await call(b, refused.name, 'echo', {});
  t.equal(again.status, 404, 'the refused one is unknown');
});

// Disk full (ENOSPC) under bermd's state: its --root (journal.jsonl, state.sqlite's due-set and
// deployment index, the deployed images) on a small tmpfs the test mounts and then fills to the
// last byte. While it is full nothing is acknowledged that is not written: a tool call, an arming
// and a deploy are answered 200/201 only when durable, else 503 with Retry-After and a message
// naming the full disk; the daemon keeps serving (/health). Once the space is back the same
// requests succeed, every wake armed before or during the episode fires, and every call answered
// 200 and every wake answered 201 is in the journal, whose every line is whole.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { TEST_CACHE } from './helpers/fixtures.js';
import { http, startBermd, stopBermd, type Answer } from './helpers/cluster.js';
import { ECHO, QG, until } from './helpers/scale-out.js';
import { smallDisk } from './helpers/tmpfs.js';

/** Every line of the journal, parsed; a line that is not whole JSON fails the test. */
function journalLines(t: Test, root: string): Record<string, unknown>[] {
  const text = readFileSync(join(root, 'journal.jsonl'), 'utf8');
  const out: Record<string, unknown>[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    try {
      out.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      t.fail(`a journal line is not whole: ${JSON.stringify(line.slice(0, 120))}`);
    }
  }
  return out;
}

t.test('disk full under --root: refused with 503, nothing acknowledged lost, work resumes', async (t) => {
  const disk = smallDisk(t, 16 << 20);
  if (disk === null) return;
  const root = join(disk.dir, 'root');
  const b = await startBermd({ root, cacheDir: TEST_CACHE, workers: 1 });
  t.teardown(() => stopBermd(b));
  void b.exited.then((x) => {
    // the test SIGKILLs it at the end; any other exit is a crash
    if (x.signal !== 'SIGKILL') t.fail(`bermd exited (${x.code ?? x.signal}):\n${b.log().slice(-3000)}`);
  });
  t.equal((await http(`${b.url}/harnesses/qg`, 'PUT', QG)).status, 200, 'qg deployed');

  const chains = new Set<string>();
  const wakes = new Set<string>();
  const seen: string[] = [];
  const note = (what: string, a: Answer, ok: number) => {
    seen.push(`${what} ${a.status}`);
    if (a.status !== ok && a.status !== 503) t.fail(`${what}: ${a.status} ${JSON.stringify(a.body)}`);
  };
  const call = async (k: string) => {
    const a = await http(`${b.url}/harnesses/qg/tools/echo`, 'POST', { k });
    note(`call ${k}`, a, 200);
    if (a.status === 200 && a.chain !== undefined) chains.add(a.chain);
    return a;
  };
  const arm = async (id: string, delay: number) => {
    const a = await http(`${b.url}/wakes`, 'POST', { harness: 'qg', id, delay_ms: delay, payload: id });
    note(`arm ${id}`, a, 201);
    if (a.status === 201) wakes.add(id);
    return a;
  };
  // wakes that fall due while the disk is full
  for (let i = 0; i < 5; i++) t.equal((await arm(`pre${i}`, 3000)).status, 201);
  await call('pre');

  const filled = disk.fill();
  t.ok(filled > 0, `the disk is full (${filled} bytes of filler)`);
  let refusedCall: Answer | null = null;
  for (let i = 0; i < 200 && refusedCall === null; i++) {
    const a = await call(`full${i}`);
    if (a.status === 503) refusedCall = a;
  }
  t.ok(refusedCall, 'a tool call is refused while the disk is full');
  if (refusedCall) t.match(refusedCall.body.error, /no space|disk|ENOSPC/i, 'its error names the full disk');
  let refusedArm: Answer | null = null;
  for (let i = 0; i < 200 && refusedArm === null; i++) {
    const a = await arm(`full${i}`, 0);
    if (a.status === 503) refusedArm = a;
  }
  t.ok(refusedArm, 'an arming is refused while the disk is full');
  if (refusedArm) t.match(refusedArm.body.error, /no space|disk|full/i, 'its error names the full disk');
  const deploy = await http(`${b.url}/harnesses/echo`, 'PUT', ECHO);
  t.equal(deploy.status, 503, `a deploy is refused while the disk is full: ${JSON.stringify(deploy.body)}`);
  t.match(deploy.body.error, /no space|disk|full/i, 'its error names the full disk');
  // the armed wakes fall due meanwhile; the daemon keeps serving
  await new Promise((r) => setTimeout(r, 2000));
  t.equal((await http(`${b.url}/health`, 'GET')).status, 200, '/health answers while the disk is full');
  t.equal(b.proc.exitCode, null, 'bermd is still running');

  disk.free();
  for (let i = 0; i < 5; i++) t.equal((await call(`after${i}`)).status, 200, 'a call once space is back');
  t.equal((await arm('after', 0)).status, 201, 'an arming once space is back');
  t.equal((await http(`${b.url}/harnesses/echo`, 'PUT', ECHO)).status, 200, 'a deploy once space is back');
  await until(
    'every acknowledged wake fired',
    async () => {
      const fired = new Set(journalLines(t, root).map((r) => r.wake));
      return [...wakes].every((w) => fired.has(w));
    },
    30_000,
  ).catch((e: unknown) => t.fail((e as Error).message));
  const recs = journalLines(t, root);
  const journaled = new Set(recs.filter((r) => r.trigger === 'call').map((r) => r.chain));
  t.same(
    [...chains].filter((c) => !journaled.has(c)),
    [],
    `every one of the ${chains.size} calls answered 200 is in the journal`,
  );
  const fired = new Set(recs.map((r) => r.wake));
  t.same(
    [...wakes].filter((w) => !fired.has(w)),
    [],
    `every one of the ${wakes.size} wakes answered 201 fired`,
  );
  t.comment(seen.join(', '));

  // the deployments acknowledged around the episode survive a kill
  await stopBermd(b);
  const again = await startBermd({ root, cacheDir: TEST_CACHE, workers: 1 });
  t.teardown(() => stopBermd(again));
  for (const h of ['qg', 'echo'])
    t.equal(
      (await http(`${again.url}/harnesses/${h}`, 'GET')).status,
      200,
      `${h} is deployed after a restart`,
    );
});

// bermd listens before it restores its deployments: during a long restore a client gets a 503
// with Retry-After and the progress (not "connection refused"), /health and /metrics answer, and
// the boot log says whether the restore is done; once it is, everything is served. The restore is
// held back at the runtime's deploy (a real runtime behind a gate), over real HTTP.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { DaemonClient, resolveTarget } from '../src/cli/commands/daemon-client.js';
import type { Io } from '../src/cli/context.js';
import { runCli } from '../src/cli/program.js';
import { startDaemon } from '../src/daemon/daemon.js';
import { createRuntimeBackend } from '../src/daemon/runtime-backend.js';
import { resolveSettings } from '../src/daemon/settings.js';
import { AgentClient, decodeServer, encodeClient, parseEndpoint, type Plain } from '../src/protocol/index.js';
import { elf, testDaemon } from './helpers/daemon.js';
import { TEST_CACHE } from './helpers/fixtures.js';

/**
 * bermd on `root` (listening on 127.0.0.1:0, one worker) whose restore is held back: the runtime's
 * deploy of every deployment from the `holdFrom`-th on (0-based) waits for `open()`. `url` settles
 * with the address once bermd says it listens before the restore is done, or with '' after 10 s
 * without (the gate then opens, so the boot can end); `restored()` counts deployments back.
 */
function gatedDaemon(
  root: string,
  opts: { extra?: Record<string, string>; holdFrom?: number; logs?: string[] } = {},
): {
  url: Promise<string>;
  open: () => void;
  booted: ReturnType<typeof startDaemon>;
  restored: () => number;
  giveUp: NodeJS.Timeout;
} {
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  let early!: (url: string) => void;
  const url = new Promise<string>((r) => (early = r));
  const settings = {
    ...resolveSettings({ addr: '127.0.0.1:0', root, workers: '1', cacheDir: TEST_CACHE, ...opts.extra }, {}),
    limit: [],
  };
  let deploys = 0;
  let finished = 0;
  const booted = startDaemon(
    settings,
    async (ctx) => {
      const b = await createRuntimeBackend(ctx);
      const deploy = b.deploy.bind(b);
      b.deploy = async (...a) => {
        if (deploys++ >= (opts.holdFrom ?? 0)) await gate;
        const r = await deploy(...a);
        finished++;
        return r;
      };
      return b;
    },
    {},
    (l) => {
      opts.logs?.push(l);
      const m = /^listening at (http:\/\/\S+), restore not done/.exec(l);
      if (m) early(m[1]!);
    },
  );
  const giveUp = setTimeout(() => {
    early('');
    open();
  }, 10_000);
  return { url, open, booted, restored: () => finished, giveUp };
}

t.test('a restore in progress: 503 with progress, health and metrics answer', async (t) => {
  const first = await testDaemon();
  for (const name of ['echo', 'text'])
    t.equal(
      (
        await first.req(`/harnesses/${name}`, {
          method: 'PUT',
          body: elf(`fixtures/build/${name}-gcc-O2.elf`),
        })
      ).status,
      200,
    );
  await first.stop();

  const logs: string[] = [];
  // the first deployment comes back at once, the second waits for the gate
  const { url: listening, open, booted, restored, giveUp } = gatedDaemon(first.root, { holdFrom: 1, logs });
  const url = await listening;
  t.not(url, '', 'bermd listens while the restore is held back');
  if (url === '') {
    clearTimeout(giveUp);
    const d = await booted;
    await d.stop();
    return;
  }
  t.notOk(
    logs.some((l) => /^listening on /.test(l)),
    'no "listening on" line (what tools wait for) before the restore is done',
  );
  t.ok(logs.some((l) => /restore not done: 2 deployments to restore/.test(l)));

  // wait until the first deployment is back: the progress then says 1 of 2
  for (let i = 0; i < 400 && restored() < 1; i++) await new Promise((r) => setTimeout(r, 25));
  await new Promise((r) => setTimeout(r, 50));
  const health = await fetch(`${url}/health`);
  t.equal(health.status, 200);
  t.same(await health.json(), { status: 'restoring', restore: 'restoring 1 of 2 deployments' });
  const metrics = await fetch(`${url}/metrics`);
  t.equal(metrics.status, 200);
  t.match(await metrics.text(), /berm_http_requests_total/);
  for (const [path, init] of [
    ['/harnesses', {}],
    ['/harnesses/echo/tools/echo', { method: 'POST', body: '{}' }],
    ['/wakes', {}],
    ['/mcp', { method: 'POST', body: '{}' }],
  ] as const) {
    const r = await fetch(url + path, init);
    t.equal(r.status, 503, path);
    t.equal(r.headers.get('retry-after'), '1', `${path}: Retry-After`);
    t.same(await r.json(), {
      error: 'bermd is restoring its deployments (restoring 1 of 2 deployments); retry shortly',
    });
  }

  clearTimeout(giveUp);
  open();
  const d = await booted;
  t.teardown(() => d.stop());
  t.ok(
    logs.some((l) => l === `listening on ${url} (restore done: 2 of 2 deployments restored)`),
    logs.join('\n'),
  );
  t.same(await (await fetch(`${url}/health`)).json(), { status: 'ok' });
  const call = await fetch(`${url}/harnesses/echo/tools/echo`, { method: 'POST', body: '{"a":1}' });
  t.same(await call.json(), { done: '{"a":1}' });
  const list = (await (await fetch(`${url}/harnesses`)).json()) as { name: string }[];
  t.same(
    list.map((h) => h.name),
    ['echo', 'text'],
  );
});

t.test('the protocol endpoint answers 503 while the restore is held, not "no harness"', async (t) => {
  // it listened (and armed into the due-set) from before the restore: a schedule_wake for a
  // deployed harness not yet restored was refused 422 "no harness named qg is deployed", an
  // answer a client takes as final, so the agent daemon's reminder was lost
  const first = await testDaemon();
  t.equal(
    (await first.req('/harnesses/qg', { method: 'PUT', body: elf('test/data/queue-guest.elf') })).status,
    200,
  );
  await first.stop();
  const sock = join(mkdtempSync(join(tmpdir(), 'berm-restore-door-')), 'door.sock');
  const {
    url: listening,
    open,
    booted,
    giveUp,
  } = gatedDaemon(first.root, {
    extra: { protocolEndpoint: `unix:${sock}` },
  });
  t.teardown(async () => {
    clearTimeout(giveUp);
    open();
    await (await booted).stop();
  });
  await listening;
  const c = new AgentClient(parseEndpoint(`unix:${sock}`));
  t.teardown(() => c.close());
  const ask = async (body: Plain) =>
    decodeServer((await c.call(encodeClient('berm', body), { timeoutMs: 5_000 }))[0]!);
  const held = await ask({ schedule_wake: { harness: 'qg', delay_ms: 600_000, payload: 'p', id: 'r1' } });
  t.match(held, {
    msg: 'error',
    error: { code: 503, message: /bermd is restoring its deployments.*retry shortly/ },
  });
  t.equal(decodeServer((await c.call(encodeClient('ping', {}), { timeoutMs: 5_000 }))[0]!).msg, 'pong');
  open();
  await booted;
  const ok = await ask({ schedule_wake: { harness: 'qg', delay_ms: 600_000, payload: 'p', id: 'r1' } });
  t.match(ok, { berm: { wake: { id: 'r1', harness: 'qg' } } }, 'armed once the restore is done');
});

t.test('the berm client verbs wait out a restore (503 with Retry-After) instead of failing', async (t) => {
  const first = await testDaemon();
  t.equal(
    (await first.req('/harnesses/echo', { method: 'PUT', body: elf('fixtures/build/echo-gcc-O2.elf') }))
      .status,
    200,
  );
  await first.stop();
  const { url: listening, open, booted, giveUp } = gatedDaemon(first.root);
  const url = await listening;
  t.not(url, '', 'bermd listens while the restore is held back');
  // without waiting, a verb meets the 503 (what a CI job's deploy got right after a restart: exit 4)
  const impatient = new DaemonClient(resolveTarget({ host: url }, {}), 0);
  await t.rejects(impatient.list(), { message: /bermd is restoring its deployments .*\(HTTP 503\)/ });
  await impatient.close();

  const io = (): Io & { stdout: string; stderr: string } => {
    const o = {
      stdout: '',
      stderr: '',
      out: (s: string) => void (o.stdout += s),
      err: (s: string) => void (o.stderr += s),
      readStdin: async () => '',
      stderrIsTTY: false,
      progressStream: process.stderr,
    };
    return o;
  };
  const t0 = Date.now();
  const invokeIo = io();
  const lsIo = io();
  const invoked = runCli(['invoke', 'echo', 'echo', '{"after":"restore"}', '--host', url], { io: invokeIo });
  const listed = runCli(['ls', '--host', url], { io: lsIo });
  await new Promise((r) => setTimeout(r, 1500));
  clearTimeout(giveUp);
  open();
  t.equal(await invoked, 0, invokeIo.stderr);
  t.equal(invokeIo.stdout, '{"after":"restore"}\n');
  t.equal(await listed, 0, lsIo.stderr);
  t.match(lsIo.stdout, /^echo +[0-9a-f]{12} +echo, echo_len$/m);
  t.ok(Date.now() - t0 >= 1500, 'they waited for the restore');
  const d = await booted;
  await d.stop();
});

// The client verbs end to end: a real bermd (bin/bermd.js, its own process) on 127.0.0.1 port 0
// with a token, driven by the berm CLI over HTTP. Expected results come from the fixtures'
// natively computed values (fixtures/expected.json) and sha256 of the ELF files; `deploy REF`
// pulls from a real docker-registry started by the test.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { Io } from '../src/cli/context.js';
import { runCli } from '../src/cli/program.js';
import { parseReference, pushHarness } from '../src/oci/index.js';
import { readElf } from '../src/elf/reader.js';
import { expected, ROOT, TEST_CACHE } from './helpers/fixtures.js';
import { startRegistry } from './helpers/oci-registry.js';

const BUILD = join(ROOT, 'fixtures', 'build');
const ECHO = join(BUILD, 'echo-gcc-O2.elf');
const TEXT = join(BUILD, 'text-gcc-O2.elf');
const HOSTCALLS = join(BUILD, 'hostcalls-gcc-O2.elf');
const PROBE = join(ROOT, 'examples', 'probe.elf');
const QG = join(ROOT, 'test', 'data', 'queue-guest.elf');
const TOKEN = 'cli-client-test-token';
const TMP = mkdtempSync(join(tmpdir(), 'berm-cli-daemon-'));
const TOKEN_FILE = join(TMP, 'token');
writeFileSync(TOKEN_FILE, TOKEN + '\n');
t.teardown(() => rmSync(TMP, { recursive: true, force: true }));

const sha = (p: string): string => createHash('sha256').update(readFileSync(p)).digest('hex');

let bermd: ChildProcess;
let HOST = '';
t.before(async () => {
  bermd = spawn(
    process.execPath,
    [
      join(ROOT, 'bin', 'bermd.js'),
      '--addr',
      '127.0.0.1:0',
      '--root',
      join(TMP, 'root'),
      '--cache-dir',
      TEST_CACHE,
    ],
    { env: { ...process.env, BERMD_TOKEN: TOKEN }, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let log = '';
  HOST = await new Promise<string>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`bermd did not start in 60 s:\n${log}`)), 60_000);
    bermd.stderr!.setEncoding('utf8').on('data', (d: string) => {
      log += d;
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        res(m[1]);
      }
    });
    bermd.on('exit', (code) => rej(new Error(`bermd exited with ${code}:\n${log}`)));
  });
});
t.teardown(async () => {
  if (bermd && bermd.exitCode === null) {
    const exited = new Promise((r) => bermd.once('exit', r));
    bermd.kill('SIGTERM');
    await exited;
  }
});

interface Out {
  code: number;
  stdout: string;
  stderr: string;
}
/** Run the CLI in this process (it talks HTTP to the bermd process) with the token file. */
async function berm(args: string[], opts: { token?: boolean; stdin?: string } = {}): Promise<Out> {
  const o = { stdout: '', stderr: '' };
  const io: Io = {
    out: (s) => void (o.stdout += s),
    err: (s) => void (o.stderr += s),
    readStdin: async () => opts.stdin ?? '',
    stderrIsTTY: false,
    progressStream: process.stderr,
  };
  const extra = ['--host', HOST, ...(opts.token === false ? [] : ['--token-file', TOKEN_FILE])];
  const code = await runCli([...args, ...extra], { io });
  return { code, ...o };
}

/** Run the real bin/berm.js (for environment variables and stream separation). */
function bermBin(args: string[], env: Record<string, string>): Promise<Out> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--stack-size=4000', join(ROOT, 'bin', 'berm.js'), ...args], {
      env: { ...process.env, BERM_TOKEN: '', BERMD_TOKEN: '', BERM_HOST: '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

t.test('deploy, ls, inspect, invoke, rm', async (t) => {
  const d = await berm(['deploy', 'echo', ECHO]);
  t.equal(d.code, 0, d.stderr);
  t.match(d.stdout, `deployed echo ${sha(ECHO)}`);
  t.match(d.stdout, /tools +echo, echo_len/);
  const dj = await berm(['deploy', 'text', TEXT, '--json']);
  t.equal(dj.code, 0, dj.stderr);
  const text = JSON.parse(dj.stdout);
  t.equal(text.digest, sha(TEXT));
  const manifest = JSON.parse(Buffer.from(readElf(readFileSync(TEXT)).manifest!).toString());
  t.same(
    text.tools.map((x: { name: string }) => x.name),
    manifest.tools.map((x: { name: string }) => x.name),
    'the tools of the .berm.abi section',
  );

  const ls = await berm(['ls']);
  t.equal(ls.code, 0, ls.stderr);
  t.equal(ls.stdout.split('\n')[0], 'NAME  DIGEST        TOOLS');
  t.match(ls.stdout, `echo  ${sha(ECHO).slice(0, 12)}  echo, echo_len`);
  t.match(ls.stdout, `text  ${sha(TEXT).slice(0, 12)}  `);
  const lj = JSON.parse((await berm(['ls', '--json'])).stdout);
  t.same(
    lj.map((h: { name: string }) => h.name),
    ['echo', 'text'],
  );

  const ins = await berm(['inspect', 'echo']);
  t.equal(ins.code, 0, ins.stderr);
  t.match(ins.stdout, `digest        ${sha(ECHO)}`);
  t.match(ins.stdout, /granted +none/);
  t.match(ins.stdout, /usage +Echo tools/);
  const ij = JSON.parse((await berm(['inspect', 'echo', '--json'])).stdout);
  t.match(ij, { name: 'echo', digest: sha(ECHO), granted: { capabilities: [] } });
  const local = await berm(['inspect', ECHO]);
  t.equal(local.code, 0);
  t.match(local.stdout, /^file +.*echo-gcc-O2\.elf/m, 'a path is still inspected locally (even with --host)');

  // invoke: result, failure, stdin arguments; values from fixtures/expected.json
  const inv = await berm(['invoke', 'echo', 'echo', '{"k":[1,2,3]}']);
  t.equal(inv.code, 0, inv.stderr);
  t.equal(inv.stdout, '{"k":[1,2,3]}\n');
  const stdin = await berm(['invoke', 'echo', 'echo_len', '-'], { stdin: '{"abc":1}' });
  t.equal(stdin.stdout, '9\n');
  const toolCase = expected().tools.find((c) => c.source === 'text.c' && c.ok)!;
  const r = await berm(['invoke', 'text', toolCase.tool, toolCase.args]);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, toolCase.result + '\n', `text.${toolCase.tool} as computed natively`);
  const failCase = expected().tools.find((c) => c.source === 'text.c' && !c.ok)!;
  const f = await berm(['invoke', 'text', failCase.tool, failCase.args, '--json']);
  t.equal(f.code, 1, f.stderr);
  t.same(JSON.parse(f.stdout), { failed: failCase.result });
  const f2 = await berm(['invoke', 'text', failCase.tool, failCase.args]);
  t.equal(f2.stdout, failCase.result + '\n', 'the failure message on stdout');
  t.match(f2.stderr, `tool ${failCase.tool} failed`);

  const rm = await berm(['rm', 'text']);
  t.equal(rm.code, 0, rm.stderr);
  t.equal(rm.stdout, 'removed text\n');
  const gone = await berm(['inspect', 'text', '--json']);
  t.equal(gone.code, 2);
  t.match(gone.stderr, /no harness named text is deployed/);
});

t.test('invoke --verbose streams log lines (SSE); traps exit 3', async (t) => {
  t.equal((await berm(['deploy', 'hc', HOSTCALLS])).code, 0);
  const args = JSON.stringify({ s: 'x'.repeat(150) });
  const r = await bermBin(['invoke', 'hc', 'hc_checksum', args, '--verbose', '--host', HOST], {
    BERMD_TOKEN: TOKEN,
  });
  t.equal(r.code, 0, r.stderr);
  // the same call made locally is the reference for both the result and the log lines
  const ref = await bermBin(
    ['call', HOSTCALLS, 'hc_checksum', args, '--verbose', '--cache-dir', TEST_CACHE],
    {},
  );
  t.equal(r.stdout, ref.stdout, 'the daemon computes what the local call computes');
  const logs = (s: string): string[] => s.split('\n').filter((l) => l.startsWith('[log] '));
  t.same(logs(r.stderr), logs(ref.stderr), 'log lines streamed in order');
  t.ok(logs(r.stderr).length >= 3);
  t.same(
    logs((await berm(['invoke', 'hc', 'hc_checksum', args])).stderr),
    [],
    'no log lines without --verbose',
  );

  // examples/probe.elf's `trap` tool loads through a null pointer
  t.equal((await berm(['deploy', 'probe', PROBE])).code, 0);
  const tr = await berm(['invoke', 'probe', 'trap']);
  t.equal(tr.code, 3, 'a trap exits 3');
  t.match(
    tr.stderr,
    /probe\.trap trapped: MemoryFault: .* at pc 0x[0-9a-f]+ \(berm_tool_trap\+0x[0-9a-f]+\)/,
  );
  const local = await bermBin(['call', PROBE, 'trap', '--cache-dir', TEST_CACHE], {});
  t.equal(local.code, 3, 'the local call traps the same way');
  t.match(local.stderr, /guest trap MemoryFault/);
});

t.test('refusals: token, unknown names, bad input', async (t) => {
  const no = await berm(['ls'], { token: false });
  t.equal(no.code, 2);
  t.match(no.stderr, /answered 401 .*set BERMD_TOKEN \(or --token-file FILE\)/);
  const wrong = await bermBin(['ls', '--host', HOST], { BERMD_TOKEN: 'nope' });
  t.equal(wrong.code, 2);
  t.match(wrong.stderr, /the token from BERMD_TOKEN was refused/);
  // BERM_TOKEN is the index's token (berm publish): the client verbs never send it to bermd
  const index = await bermBin(['ls', '--host', HOST], { BERM_TOKEN: TOKEN });
  t.equal(index.code, 2);
  t.match(index.stderr, /set BERMD_TOKEN .*BERM_TOKEN is the index's token and is not sent to bermd/);
  const env = await bermBin(['ls', '--json'], { BERMD_TOKEN: TOKEN, BERM_HOST: HOST });
  t.equal(env.code, 0, 'BERM_HOST and BERMD_TOKEN from the environment');
  t.ok(Array.isArray(JSON.parse(env.stdout)));

  const cases: [string[], RegExp][] = [
    [['invoke', 'nope', 'echo'], /no harness named nope is deployed/],
    [['invoke', 'echo', 'nope'], /harness echo has no tool named nope/],
    [['invoke', 'echo', 'echo', 'not json'], /not valid JSON/],
    [['rm', 'nope'], /no harness named nope/],
    [['deploy', 'x', join(ROOT, 'test', 'data', 'edge.elf')], /deploy x: .*no \.berm\.abi section/],
  ];
  for (const [argv, re] of cases) {
    const r = await berm(argv);
    t.equal(r.code, 2, argv.join(' '));
    t.match(r.stderr, re, argv.join(' '));
  }
});

t.test('wake add|ls|rm reach /wakes', async (t) => {
  const ls = await berm(['wake', 'ls', '--json']);
  t.equal(ls.code, 0, ls.stderr);
  t.same(JSON.parse(ls.stdout), []);
  const none = await berm(['wake', 'ls']);
  t.equal(none.stdout, 'no wakes pending\n');
  t.equal(none.stderr, '', 'said once');
  const add = await berm(['wake', 'add', 'echo', '--in', '1h']);
  // echo has no on_wake: the daemon refuses, and the CLI shows the daemon's reason
  t.equal(add.code, 2);
  t.match(add.stderr, /wake add echo: .*on_wake/);
  const rm = await berm(['wake', 'rm', 'no-such-wake']);
  t.equal(rm.code, 2);
  t.match(rm.stderr, /no wake with id no-such-wake/);

  // test/data/queue-guest.elf exports on_wake
  t.equal((await berm(['deploy', 'qg', QG])).code, 0);
  const before = Date.now();
  const a = await berm(['wake', 'add', 'qg', '--in', '10m', '--payload', 'later', '--id', 'w-later']);
  t.equal(a.code, 0, a.stderr);
  t.equal(a.stdout, 'w-later\n');
  const at = Math.ceil((Date.now() + 86_400_000) / 1000) * 1000;
  const b = await berm(['wake', 'add', 'qg', '--at', new Date(at).toISOString(), '--json']);
  t.equal(b.code, 0, b.stderr);
  const bw = JSON.parse(b.stdout);
  t.match(bw, { harness: 'qg', due_at: at });
  const far = await berm(['wake', 'add', 'qg', '--at', '2099-01-01T00:00:00Z']);
  t.equal(far.code, 2, 'beyond the maximum delay');
  t.match(far.stderr, /wake add qg: .*maxDelayMs/);
  const list = JSON.parse((await berm(['wake', 'ls', '--json'])).stdout) as {
    id: string;
    due_at: number;
    payload: string;
  }[];
  t.same(
    list.map((w) => w.id),
    ['w-later', bw.id],
    'earliest first',
  );
  t.ok(list[0].due_at >= before + 600_000 && list[0].due_at <= Date.now() + 600_000, 'due in 10 minutes');
  t.equal(list[0].payload, 'later');
  const text = (await berm(['wake', 'ls'])).stdout;
  t.match(text, /^ID +HARNESS +DUE +IN +PAYLOAD$/m);
  t.match(text, /^w-later +qg +\S+ +10m +"later"$/m, 'due in 10 minutes, shown in minutes');
  // bermd answers a page of the due-set (1,000 wakes unless asked): a cut list says so on stderr
  const all = await berm(['wake', 'ls']);
  t.equal(all.stderr, 'berm: 2 wakes pending\n');
  const page = await berm(['wake', 'ls', '--limit', '1']);
  t.equal(page.code, 0, page.stderr);
  t.same(
    page.stdout
      .trim()
      .split('\n')
      .slice(1)
      .map((l) => l.split(/ +/)[0]),
    ['w-later'],
    'the earliest one',
  );
  t.equal(page.stderr, 'berm: listed the earliest 1 of 2 pending wakes; --limit N lists up to 10000\n');
  const pageJson = await berm(['wake', 'ls', '--limit', '1', '--json']);
  t.same(
    (JSON.parse(pageJson.stdout) as { id: string }[]).map((w) => w.id),
    ['w-later'],
  );
  t.match(pageJson.stderr, /listed the earliest 1 of 2 pending wakes/);
  t.equal((await berm(['wake', 'rm', 'w-later'])).stdout, 'cancelled w-later\n');
  t.equal((await berm(['wake', 'rm', bw.id, '--json'])).code, 0);
  t.same(JSON.parse((await berm(['wake', 'ls', '--json'])).stdout), []);

  // a wake due now fires and leaves the list
  t.equal((await berm(['wake', 'add', 'qg', '--in', '0', '--id', 'w-now'])).code, 0);
  const t0 = Date.now();
  let pending: unknown[] = ['w-now'];
  while (pending.length > 0 && Date.now() - t0 < 60_000) {
    await new Promise((r) => setTimeout(r, 100));
    pending = JSON.parse((await berm(['wake', 'ls', '--json'])).stdout);
  }
  t.same(pending, [], 'the due wake fired');

  // an undeploy leaves the harness's wakes armed: rm says how many, and that a redeploy keeps them
  for (const id of ['w-x', 'w-y'])
    t.equal((await berm(['wake', 'add', 'qg', '--in', '1h', '--id', id])).code, 0);
  const undeploy = await berm(['rm', 'qg']);
  t.equal(undeploy.code, 0, undeploy.stderr);
  t.equal(undeploy.stdout, 'removed qg\n');
  t.equal(
    undeploy.stderr,
    'berm: 2 wakes of qg stay pending (berm wake ls): each runs if qg is deployed again by its due time, ' +
      'else it is dropped then (berm wake rm ID cancels one)\n',
  );
  t.same(
    (JSON.parse((await berm(['wake', 'ls', '--json'])).stdout) as { id: string }[]).map((w) => w.id),
    ['w-x', 'w-y'],
    'what rm reported is what is pending',
  );
  for (const id of ['w-x', 'w-y']) t.equal((await berm(['wake', 'rm', id])).code, 0);
  t.equal((await berm(['deploy', 'qg', QG])).code, 0);
  const quiet = await berm(['rm', 'qg']);
  t.equal(quiet.stderr, '', 'no wakes: no note');
});

t.test('deploy REF pulls from a registry, then uploads', async (t) => {
  const reg = await startRegistry();
  t.teardown(() => reg.stop());
  const elf = readFileSync(ECHO);
  const bytes = new Uint8Array(elf.buffer, elf.byteOffset, elf.byteLength);
  await pushHarness(parseReference(`${reg.host}/berm/echo:v1`), bytes, readElf(bytes).manifest!, { env: {} });
  const d = await berm(['deploy', 'pulled', `${reg.host}/berm/echo:v1`, '--json']);
  t.equal(d.code, 0, d.stderr);
  t.match(JSON.parse(d.stdout), { name: 'pulled', digest: sha(ECHO), reference: `${reg.host}/berm/echo:v1` });
  const r = await berm(['invoke', 'pulled', 'echo', '{"hi":1}']);
  t.equal(r.stdout, '{"hi":1}\n');
  const missing = await berm(['deploy', 'x', `${reg.host}/berm/echo:nope`]);
  t.equal(missing.code, 2);
  t.match(missing.stderr, /MANIFEST_UNKNOWN/);
});

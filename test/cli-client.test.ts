// The CLI's daemon client without a daemon: argument and option parsing of the client verbs,
// --host and token resolution, telling `inspect FILE` from `inspect NAME`, the SSE parser (against
// the examples of the WHATWG server-sent events section), delays and due times, and the refusal
// when nothing listens. End to end against a real bermd: test/cli-client-daemon.test.ts.
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { MAX_ANSWER_BYTES, SseParser, parseHost, resolveTarget } from '../src/cli/commands/daemon-client.js';
import {
  HARNESS_NAME,
  harnessText,
  inspectsDaemon,
  listText,
  shortDigest,
} from '../src/cli/commands/daemon-verbs.js';
import { parseAt, parseDelay, pendingText, untilText, wakesText } from '../src/cli/commands/wake-client.js';
import type { Io } from '../src/cli/context.js';
import { runCli } from '../src/cli/program.js';
import { ROOT } from './helpers/fixtures.js';

const TMP = mkdtempSync(join(tmpdir(), 'berm-cli-client-'));
t.teardown(() => rmSync(TMP, { recursive: true, force: true }));

function captureIo(): Io & { stdout: string; stderr: string } {
  const io = {
    stdout: '',
    stderr: '',
    out: (s: string) => void (io.stdout += s),
    err: (s: string) => void (io.stderr += s),
    readStdin: async () => '',
    stderrIsTTY: false,
    progressStream: process.stderr,
  };
  return io;
}

t.test('--host', async (t) => {
  t.equal(parseHost('http://127.0.0.1:7777'), 'http://127.0.0.1:7777');
  t.equal(parseHost('http://127.0.0.1:7777/'), 'http://127.0.0.1:7777');
  t.equal(parseHost('127.0.0.1:9000'), 'http://127.0.0.1:9000', 'a bare host:port is http');
  t.equal(parseHost('https://bermd.example'), 'https://bermd.example');
  t.equal(parseHost('[::1]:7777'), 'http://[::1]:7777');
  t.throws(() => parseHost('ftp://x'), { message: /only http and https/ });
  t.throws(() => parseHost('http://x/api'), { message: /just scheme, host and port/ });
  t.throws(() => parseHost('http://u:p@x'), { message: /just scheme, host and port/ });
  t.throws(() => parseHost('http://'), { message: /not a URL/ });
});

t.test('target and token resolution', async (t) => {
  t.same(resolveTarget({}, {}), { base: 'http://127.0.0.1:7777', token: null, tokenSource: null });
  t.same(resolveTarget({}, { BERM_HOST: '127.0.0.1:1234', BERMD_TOKEN: ' tok \n', BERM_TOKEN: 'index' }), {
    base: 'http://127.0.0.1:1234',
    token: 'tok',
    tokenSource: 'BERMD_TOKEN',
  });
  const file = join(TMP, 'token');
  writeFileSync(file, 'from-file\nsecond line ignored\n');
  t.match(resolveTarget({ host: 'http://h:1', tokenFile: file }, { BERMD_TOKEN: 'env', BERM_HOST: 'x:2' }), {
    base: 'http://h:1',
    token: 'from-file',
    tokenSource: `--token-file ${file}`,
  });
  writeFileSync(join(TMP, 'empty'), '\n');
  t.throws(() => resolveTarget({ tokenFile: join(TMP, 'empty') }, {}), { message: /first line is empty/ });
  t.throws(() => resolveTarget({ tokenFile: join(TMP, 'missing') }, {}), { message: /ENOENT/ });
});

t.test('inspect: a file or a deployed name', async (t) => {
  const here = join(TMP, 'echo');
  writeFileSync(here, 'x');
  t.equal(inspectsDaemon('echo', false), true, 'a name with no such file asks the daemon');
  t.equal(inspectsDaemon('build/echo.elf', false), false, 'a path is local');
  t.equal(inspectsDaemon('echo.elf', false), false, 'a dot is never in a harness name');
  t.equal(inspectsDaemon('Echo', false), false, 'not a harness name: local (and "no such file")');
  t.equal(inspectsDaemon(here, true), false, 'a path is a file even with --host');
  t.equal(inspectsDaemon('echo', true), true, '--host makes a name a deployment');
  const cwd = process.cwd();
  process.chdir(TMP);
  try {
    t.equal(inspectsDaemon('echo', false), false, 'a file of that name wins without --host');
    t.equal(inspectsDaemon('echo', true), true, 'and the deployment wins with --host');
  } finally {
    process.chdir(cwd);
  }
  t.ok(HARNESS_NAME.test('a-b_1'));
  t.notOk(HARNESS_NAME.test('a.b'));
  t.notOk(HARNESS_NAME.test('x'.repeat(65)));
});

t.test('SSE parsing (WHATWG HTML 9.2 examples)', async (t) => {
  const got: [string, string][] = [];
  const p = new SseParser((e, d) => got.push([e, d]));
  // split across chunks at awkward places, CRLF and CR line ends, a comment, no space after colon
  p.push(': comment\r\nevent: log\r\ndata: first line\r\n\r');
  p.push('\nevent:log\ndata:YHOO\ndata: +2\ndata: 10\n\n');
  p.push('data\n\nevent: result\rdata: {"status":200,');
  p.push('"done":"ok"}\r\r');
  p.push('data: trailing');
  p.end();
  t.same(got, [
    ['log', 'first line'],
    ['log', 'YHOO\n+2\n10'],
    ['message', ''],
    ['result', '{"status":200,"done":"ok"}'],
    ['message', 'trailing'],
  ]);
  // the same stream cut into two chunks at every position gives the same events
  const whole =
    ': comment\r\nevent: log\r\ndata: first line\r\n\r\nevent:log\ndata:YHOO\ndata: +2\ndata: 10\n\n' +
    'data\n\nevent: result\rdata: {"status":200,"done":"ok"}\r\rdata: trailing';
  for (let cut = 0; cut <= whole.length; cut++) {
    for (const third of [cut, Math.min(whole.length, cut + 3)]) {
      const split: [string, string][] = [];
      const q = new SseParser((e, d) => split.push([e, d]));
      q.push(whole.slice(0, cut));
      q.push(whole.slice(cut, third));
      q.push(whole.slice(third));
      q.end();
      if (JSON.stringify(split) !== JSON.stringify(got))
        t.fail(`cut at ${cut} and ${third}: ${JSON.stringify(split)}`);
    }
  }
});

t.test('delays, due times and listings', async (t) => {
  t.equal(parseDelay('1500'), 1500);
  t.equal(parseDelay('250ms'), 250);
  t.equal(parseDelay('30s'), 30_000);
  t.equal(parseDelay('1.5m'), 90_000);
  t.equal(parseDelay('2h'), 7_200_000);
  t.equal(parseDelay('1d'), 86_400_000);
  t.throws(() => parseDelay('-1s'), { message: /expected a delay/ });
  t.throws(() => parseDelay('soon'), { message: /expected a delay/ });
  t.equal(parseAt('1796103015238'), 1796103015238);
  t.equal(parseAt('2026-12-01T08:00:00Z'), Date.UTC(2026, 11, 1, 8));
  t.throws(() => parseAt('tomorrow'), { message: /ISO date-time/ });
  t.throws(() => parseAt('2026-13-45T99:00:00Z'), { message: /not a date-time/ });
  t.equal(shortDigest('sha256:' + 'ab'.repeat(32)), 'abababababab');
  t.equal(shortDigest('0123456789abcdef'), '0123456789ab');
  t.equal(listText([]), 'no harnesses deployed\n');
  t.equal(
    listText([
      { name: 'echo', digest: '8c9c56f636bbf589', tools: [{ name: 'echo' }, { name: 'echo_len' }] },
      { name: 'a', digest: 'sha256:0011223344556677', tools: [] },
    ]),
    'NAME  DIGEST        TOOLS\necho  8c9c56f636bb  echo, echo_len\na     001122334455  \n',
  );
  // inspect NAME shows the grant's arguments as the daemon reports them (GET /harnesses/{name})
  t.equal(
    harnessText({
      name: 'tally',
      digest: 'da29',
      deps: [],
      granted: { capabilities: ['fs', 'http'], root: '/srv/data', hosts: ['example.org'] },
      tools: [],
    }),
    'name          tally\ndigest        da29\ndeps          none\ngranted       fs, http\n' +
      'grant args    root = "/srv/data", hosts = ["example.org"]\ntools         0\n',
  );
  t.notMatch(
    harnessText({ name: 'e', digest: 'd', granted: { capabilities: [] }, tools: [] }),
    'grant args',
    'no arguments, no row',
  );
  t.same(
    [-5000, 0, 1499, 119_000, 120_000, 4_106_000, 7_199_000, 7_200_000, 172_799_000, 172_800_000].map(
      untilText,
    ),
    ['0s', '0s', '1s', '119s', '2m', '68m', '120m', '2h', '48h', '2d'],
    'the time until due in the units wake add --in takes',
  );
  t.equal(wakesText([]), 'no wakes pending\n');
  t.same([0, 1, 2].map(pendingText), ['0 wakes pending', '1 wake pending', '2 wakes pending']);
  t.equal(
    wakesText(
      [{ id: 'w1', harness: 'echo', due_at: Date.UTC(2026, 11, 1, 8), payload: 'p' }],
      Date.UTC(2026, 11, 1, 7, 59),
    ),
    'ID  HARNESS  DUE                       IN       PAYLOAD\nw1  echo     2026-12-01T08:00:00.000Z  60s      "p"\n',
  );
  // a berm.call.after wake runs a tool: HARNESS shows harness.tool
  t.match(
    wakesText(
      [{ id: 'after:a', harness: 'echo', due_at: 0, payload: '{}', kind: 'call', entry: 'echo_len' }],
      0,
    ),
    /^after:a +echo\.echo_len +1970-01-01T00:00:00\.000Z +0s +"\{\}"$/m,
  );
});

t.test(
  'wake ls --limit on a berm worker state directory: the earliest N, and stderr says how many',
  async (t) => {
    const qg = join(ROOT, 'test', 'data', 'queue-guest.elf');
    const dir = mkdtempSync(join(TMP, 'limit-'));
    const config = join(dir, 'h.toml');
    const digest = createHash('sha256').update(readFileSync(qg)).digest('hex');
    writeFileSync(config, `[[harnesses]]\nname = "qg"\nsource = "${qg}"\nsha256 = "${digest}"\n`);
    const state = join(dir, 'state');
    const add = captureIo();
    const argv = ['wake', 'add', 'qg', '--state', state, '--config', config, '--in', '1h', '--id', 'w'];
    t.equal(await runCli([...argv, '--count', '3', '--spread', '3000'], { io: add }), 0, add.stderr);
    const page = captureIo();
    t.equal(await runCli(['wake', 'ls', '--state', state, '--limit', '2'], { io: page }), 0, page.stderr);
    // the table bermd's list is shown in (it was a format of its own, without a header)
    t.match(page.stdout, /^ID +HARNESS +DUE +IN +PAYLOAD\nw-0 +qg +\S+Z +60m +""\nw-1 +qg +\S+Z +60m +""\n$/);
    t.equal(page.stderr, 'berm: listed the earliest 2 of 3 pending wakes\n');
    const whole = captureIo();
    t.equal(await runCli(['wake', 'ls', '--state', state, '--json'], { io: whole }), 0);
    t.equal((JSON.parse(whole.stdout) as unknown[]).length, 3, 'no --limit: every wake');
    // rm of an id that is not pending is refused on stderr with exit 2, in bermd's words (it was a
    // line on stdout); --json gives the shapes the daemon side gives
    const rm = captureIo();
    t.equal(await runCli(['wake', 'rm', 'nope', '--state', state], { io: rm }), 2);
    t.equal(rm.stdout, '');
    t.equal(rm.stderr, 'berm: wake rm nope: no wake with id nope\n');
    const rmJson = captureIo();
    t.equal(await runCli(['wake', 'rm', 'nope', '--state', state, '--json'], { io: rmJson }), 2);
    t.match(JSON.parse(rmJson.stdout), { status: 'error', message: 'wake rm nope: no wake with id nope' });
    const ok = captureIo();
    t.equal(await runCli(['wake', 'rm', 'w-1', '--state', state, '--json'], { io: ok }), 0);
    t.same(JSON.parse(ok.stdout), { status: 'ok', id: 'w-1' });
  },
);

/** A port nothing listens on: bind one, note it, close it. */
async function deadPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

t.test('usage errors and an unreachable daemon', async (t) => {
  const port = await deadPort();
  const host = `http://127.0.0.1:${port}`;
  for (const argv of [
    ['ls', '--host', host],
    ['rm', 'echo', '--host', host],
    ['invoke', 'echo', 'echo', '{}', '--host', host],
    ['inspect', 'echo', '--host', host],
    ['wake', 'ls', '--host', host],
    ['deploy', 'echo', join(TMP, 'echo'), '--host', host],
    // global: before the verb too, with --json anywhere
    ['--host', host, 'ls'],
    ['--json', `--host=${host}`, 'wake', 'ls'],
    ['--host', host, 'inspect', 'echo'],
  ]) {
    const io = captureIo();
    const code = await runCli(argv, { io });
    t.equal(code, 2, argv.join(' '));
    t.match(io.stderr, `cannot reach bermd at ${host} (ECONNREFUSED): is bermd running at ${host}?`, argv[0]);
  }
  const json = captureIo();
  t.equal(await runCli(['ls', '--host', host, '--json'], { io: json }), 2);
  t.match(JSON.parse(json.stdout), { status: 'error', message: /is bermd running/ });

  const cases: [string[], RegExp | string][] = [
    [['deploy', 'Bad.Name', 'x'], /invalid harness name 'Bad\.Name'/],
    [['deploy', 'ok', join(TMP, 'nonexistent')], /no such file \(nor a registry reference/],
    [['wake', 'add', 'echo', '--host', host], /exactly one of --in DELAY and --at TIME/],
    [['wake', 'add', 'echo', '--in', '5s', '--at', '1', '--host', host], /exactly one of --in/],
    [['wake', 'add', 'echo', '--in', 'soon'], /expected a delay/],
    // the local-only options are refused, not dropped (the daemon arms one wake per request)
    [
      ['wake', 'add', 'echo', '--in', '5s', '--count', '3', '--host', host],
      /wake add: --count works only with --state DIR/,
    ],
    [
      [
        'wake',
        'add',
        'echo',
        '--in',
        '5s',
        '--count',
        '3',
        '--spread',
        '100',
        '--config',
        'x.toml',
        '--host',
        host,
      ],
      /wake add: --count, --spread, --config work only with --state DIR/,
    ],
    [['invoke', 'echo'], /missing required argument 'tool'/],
    // --host and --token-file are global: before the verb they reach it as after it
    [
      ['--token-file', join(TMP, 'no token'), 'invoke', 'e', 'echo', '{"x":1}'],
      /--token-file .*no token: ENOENT/,
    ],
    [
      ['--host', host, 'wake', 'ls', '--state', TMP],
      /--state .* and --host\/--token-file .* exclude each other/,
    ],
    [
      ['wake', 'ls', '--state', TMP, '--host', host],
      /--state .* and --host\/--token-file .* exclude each other/,
    ],
    [['wake', 'rm', 'x', '--state', TMP, '--token-file', join(TMP, 'token')], /exclude each other/],
    // --index too: before the verb it reaches search as after it
    [['--index', join(TMP, 'no-index'), 'search', 'x'], /cannot reach the index at .*no-index/],
    [['search', 'x', '--index', join(TMP, 'no-index')], /cannot reach the index at .*no-index/],
    [['ls', '--host', 'ftp://x'], /only http and https/],
    // a mistyped --state is an error, not a new empty state
    [['wake', 'ls', '--state', join(TMP, 'no-state')], /--state .*no-state: no berm worker state there/],
    [
      ['wake', 'rm', 'x', '--state', join(TMP, 'no-state')],
      /no berm worker state there \(no state\.sqlite\)/,
    ],
  ];
  for (const [argv, re] of cases) {
    const io = captureIo();
    t.equal(await runCli(argv, { io }), 2, argv.join(' '));
    t.match(io.stderr, re, argv.join(' '));
  }
  t.notOk(existsSync(join(TMP, 'no-state')), 'nothing was created');
});

t.test('an endless answer is cut at the bound, not read until memory runs out', async (t) => {
  // A server that is not bermd (or a broken one) streams a JSON body that never ends, as a plain
  // answer and as an event stream. Before the bound, `berm ls` read 6.5 GB in a minute.
  const chunk = Buffer.from('{"name":"aaaaaaaaaaaaaaaaaaaaaaaaaaaa"},'.repeat(4096));
  let sent = 0;
  const server = createHttpServer((req, res) => {
    const sse = String(req.headers.accept).includes('text/event-stream');
    res.writeHead(200, { 'content-type': sse ? 'text/event-stream' : 'application/json' });
    res.write(sse ? 'event: log\ndata: ' : '{"harnesses":[');
    const pump = () => {
      while (!res.destroyed && sent < 4 * MAX_ANSWER_BYTES) {
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    res.on('error', () => undefined);
    pump();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => server.close());
  const host = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  for (const argv of [
    ['ls', '--host', host],
    ['invoke', '--host', host, 'x', 'y'],
    ['--verbose', 'invoke', '--host', host, 'x', 'y'],
  ]) {
    sent = 0;
    const io = captureIo();
    t.equal(await runCli(argv, { io }), 2, argv.join(' '));
    t.match(io.stderr, `the answer from ${host} is over ${MAX_ANSWER_BYTES} bytes (refused)`, argv.join(' '));
    t.ok(sent < 4 * MAX_ANSWER_BYTES, `stopped reading after ${sent} bytes were sent`);
  }
});

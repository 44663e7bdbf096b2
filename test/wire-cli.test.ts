// `berm run HARNESS TOOL [ARGUMENTS]` with upstream's semantics, as the real bin/berm.js process
// against a bermd on loopback: exit 0 with the result and a newline on stdout; exit 2 with
// `HARNESS.TOOL failed: MESSAGE` on stderr when the harness reports failure; exit 1 for any other
// error. Arguments come from the command line, else from stdin when it is not a terminal (piped,
// trimmed), else none (a real pseudo-terminal from script(1) as stdin: nothing is read). `--host`
// goes before or after the verb, `BERM_HOST` as before; `berm run --config` points at `berm worker`.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { elf, REPO, testDaemon } from './helpers/daemon.js';

const BERM = join(REPO, 'bin', 'berm.js');

interface Out {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Run bin/berm.js with `args`; `stdin`: text piped in, 'null' for /dev/null. */
function berm(
  args: string[],
  opts: { stdin?: string | 'null'; env?: Record<string, string> } = {},
): Promise<Out> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BERM, ...args], {
      env: { ...process.env, BERM_HOST: '', BERM_TOKEN: '', ...opts.env },
      stdio: [opts.stdin === undefined || opts.stdin === 'null' ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    if (opts.stdin !== undefined && opts.stdin !== 'null') child.stdin!.end(opts.stdin);
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

t.test('berm run', async (t) => {
  const d = await testDaemon();
  t.teardown(() => d.stop());
  for (const [name, file] of [
    ['echo', 'fixtures/build/echo-gcc-O2.elf'],
    ['mis', 'fixtures/build/misbehave-gcc-O2.elf'],
    ['probe', 'examples/probe.elf'],
  ] as const) {
    t.equal((await d.req(`/harnesses/${name}`, { method: 'PUT', body: elf(file) })).status, 200, name);
  }
  const host = d.url;

  // done: exit 0, the result and one newline on stdout, nothing on stderr
  for (const args of [
    ['run', 'echo', 'echo', '{"a":1}', '--host', host],
    ['--host', host, 'run', 'echo', 'echo', '{"a":1}'],
    [`--host=${host}`, 'run', 'echo', 'echo', '  {"a":1}\n'],
  ]) {
    const r = await berm(args);
    t.same(r, { code: 0, stdout: '{"a":1}\n', stderr: '' }, args.join(' '));
  }
  t.same(
    await berm(['run', 'echo', 'echo', '{"e":1}'], { env: { BERM_HOST: host } }),
    { code: 0, stdout: '{"e":1}\n', stderr: '' },
    'BERM_HOST',
  );

  // stdin piped: read and trimmed (the shell's newline is not part of the object)
  t.same(await berm(['run', 'echo', 'echo', '--host', host], { stdin: '  {"piped":true}\n\n' }), {
    code: 0,
    stdout: '{"piped":true}\n',
    stderr: '',
  });
  // stdin not a terminal but empty (/dev/null): no arguments, which bermd takes as {}
  t.same(await berm(['run', 'echo', 'echo', '--host', host], { stdin: 'null' }), {
    code: 0,
    stdout: '{}\n',
    stderr: '',
  });

  // --json before or after the verb: bermd's answer
  for (const args of [
    ['--json', 'run', 'echo', 'echo', '{"j":1}', '--host', host],
    ['run', 'echo', 'echo', '{"j":1}', '--json', '--host', host],
  ]) {
    const r = await berm(args);
    t.equal(r.code, 0, args.join(' '));
    t.same(JSON.parse(r.stdout), { done: '{"j":1}' });
  }

  // the harness reports failure: exit 2, HARNESS.TOOL failed: MESSAGE on stderr, stdout empty
  const http = (await (
    await d.req('/harnesses/mis/tools/always_fails', { method: 'POST', body: '{}' })
  ).json()) as {
    failed: string;
  };
  const failed = await berm(['run', 'mis', 'always_fails', '{}', '--host', host]);
  t.same(failed, { code: 2, stdout: '', stderr: `mis.always_fails failed: ${http.failed}\n` });

  // any other error: exit 1 with the reason on stderr
  const others: [string[], RegExp][] = [
    [['run', 'echo', 'nope', '{}', '--host', host], /no tool named nope/],
    [['run', 'nope', 'echo', '{}', '--host', host], /no harness named/],
    [['run', 'echo', 'echo', 'not json', '--host', host], /not valid JSON/],
    [['run', 'probe', 'trap', '{}', '--host', host], /trapped: MemoryFault/],
    [['run', 'echo', 'echo', '{}', '--host', 'http://127.0.0.1:1'], /cannot reach bermd/],
  ];
  for (const [args, re] of others) {
    const r = await berm(args);
    t.equal(r.code, 1, args.join(' '));
    t.equal(r.stdout, '', 'nothing on stdout');
    t.match(r.stderr, re, args.join(' '));
  }

  // berm invoke stays, with its own documented codes (1: the tool failed, message on stdout)
  const inv = await berm(['invoke', 'mis', 'always_fails', '{}', '--host', host]);
  t.equal(inv.code, 1);
  t.equal(inv.stdout, `${http.failed}\n`);
  t.same(await berm(['--host', host, 'invoke', 'echo', 'echo', '{"i":1}']), {
    code: 0,
    stdout: '{"i":1}\n',
    stderr: '',
  });
  // `berm ls` with --host before the verb
  const ls = await berm(['--host', host, '--json', 'ls']);
  t.equal(ls.code, 0, ls.stderr);
  t.same(
    (JSON.parse(ls.stdout) as { name: string }[]).map((h) => h.name),
    ['echo', 'mis', 'probe'],
  );

  // stdin a terminal: nothing is read (the call does not wait for typing) and no body is sent
  if (existsSync('/usr/bin/script')) {
    const cmd = [process.execPath, BERM, 'run', 'echo', 'echo', '--host', host]
      .map((w) => `'${w}'`)
      .join(' ');
    const r = await new Promise<Out>((resolve, reject) => {
      const child = spawn('/usr/bin/script', ['-qec', cmd, '/dev/null'], {
        env: { ...process.env, BERM_HOST: '' },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let stdout = '';
      child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
      child.on('error', reject);
      child.on('close', (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr: '' });
      });
    });
    t.equal(r.code, 0, r.stdout);
    t.equal(r.stdout.replace(/\r\n/g, '\n'), '{}\n', 'a terminal on stdin: no arguments');
  } else t.fail('/usr/bin/script (util-linux) is missing: the terminal case cannot run');
});

t.test('berm run --config: the foreground queue moved to berm worker', async (t) => {
  const r = await berm(['run', '--config', 'harnesses.toml', '--state', '/tmp/some state']);
  t.equal(r.code, 2);
  t.match(r.stderr, "berm worker --config harnesses.toml --state '/tmp/some state'");
  const usage = await berm(['run', 'echo']);
  t.equal(usage.code, 2, 'a tool name is required');
  t.match(usage.stderr, /usage: berm run HARNESS TOOL/);
  const help = await berm(['worker', '--help']);
  t.equal(help.code, 0);
  t.match(help.stdout, /--config <file>/);
});

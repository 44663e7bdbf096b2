// `bermd --help` against docs/daemon.md's settings table: every flag the table documents is an
// option, and the help names the flag's environment variable (the table's env column), so an
// operator reading either finds the same knobs. An address in use stops the boot with the fix.
import { spawn, spawnSync } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { ROOT } from './helpers/fixtures.js';

t.test('bermd --help names every flag and environment variable of docs/daemon.md', async (t) => {
  const r = spawnSync(process.execPath, [join(ROOT, 'bin', 'bermd.js'), '--help'], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  t.equal(r.status, 0, r.stderr);
  const help = r.stdout.replace(/\s+/g, ' ');
  const doc = readFileSync(join(ROOT, 'docs', 'daemon.md'), 'utf8');
  const rows = [...doc.matchAll(/^\| `(--[a-z-]+)[^`]*` \| `([A-Z_]+)[^`]*` \|/gm)];
  t.ok(rows.length >= 14, `${rows.length} settings rows`);
  for (const [, flag, env] of rows) {
    t.match(help, `${flag} `, `${flag} is an option`);
    t.match(help, env!, `${flag}: its env ${env} is named`);
  }
  t.notMatch(help, '(default: [])', 'no empty-list default shown');
});

t.test('an address in use: exit 1, the error and what to do', async (t) => {
  const held = createServer();
  await new Promise<void>((r) => held.listen(0, '127.0.0.1', r));
  t.teardown(() => held.close());
  const port = (held.address() as AddressInfo).port;
  const root = mkdtempSync(join(tmpdir(), 'berm-bermd-inuse-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const child = spawn(
    process.execPath,
    [join(ROOT, 'bin', 'bermd.js'), '--root', root, '--addr', `127.0.0.1:${port}`],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
  const code = await new Promise<number | null>((r) => child.on('exit', r));
  clearTimeout(timer);
  t.equal(code, 1, err);
  t.match(
    err,
    `cannot start: listen EADDRINUSE: address already in use 127.0.0.1:${port}; another process listens there`,
  );
  t.match(err, 'choose another --addr (port 0 picks a free one)');
});

t.test(
  'a bad flag is a refused boot: exit 2 as docs/daemon.md says, and --help lists the exit codes',
  async (t) => {
    const bermd = (...args: string[]) =>
      spawnSync(process.execPath, [join(ROOT, 'bin', 'bermd.js'), ...args], {
        encoding: 'utf8',
        timeout: 60_000,
      });
    for (const [args, message] of [
      [['--nope'], "error: unknown option '--nope'"],
      [['--addr'], "error: option '--addr <host:port>' argument missing"],
      [['serve'], 'error: too many arguments'],
    ] as const) {
      const r = bermd(...args);
      t.equal(r.status, 2, args.join(' '));
      t.match(r.stderr, message);
      t.notMatch(r.stderr, /listening on/);
    }
    const help = bermd('--help');
    t.equal(help.status, 0);
    t.match(help.stdout, /Exit codes:\n {2}0 .*\n {2}1 .*\n {2}2 {2}the boot is refused: a bad flag/);
    t.equal(bermd('--version').status, 0);
    const doc = readFileSync(join(ROOT, 'docs', 'daemon.md'), 'utf8');
    t.match(doc, /Exit codes: 0 after a graceful stop; 2 when the boot is refused \(a bad flag or setting/);
  },
);

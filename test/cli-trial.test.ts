// A new user's trial of the CLI, each finding a regression test: unusable cache directories fail
// at once with the fix, `cache ls` says which ELF an entry came from, `berm check` and
// `inspect --config` read a declaration file, and the README names the native build's needs.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t from 'tap';
import { runBerm, type CliRun } from './helpers/berm-cli.js';

const REPO = path.resolve(import.meta.dirname, '..');
const HOSTILE = path.join(REPO, 'test', 'data', 'hostile.elf');
const OS = path.join(REPO, 'examples', 'os.elf');
// a small ELF, quick to translate
const POKE = path.join(REPO, 'test', 'data', 'poke.elf');
const TMP = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-trial-'));
t.teardown(() => fs.rmSync(TMP, { recursive: true, force: true }));

const sha = (file: string) => createHash('sha256').update(fs.readFileSync(file)).digest('hex');

/** `node bin/berm.js ...args` with this file's cache, killed after `killMs`. */
const berm = (args: string[], env: Record<string, string> = {}, killMs = 120_000): Promise<CliRun> =>
  runBerm(args, path.join(TMP, 'cache'), env, killMs);

t.test('a cache directory under /proc fails at once instead of looping in mkdir', async (t) => {
  const r = await berm(['--cache-dir', '/proc/x', 'exec', HOSTILE, 'nothing'], {}, 90_000);
  t.equal(r.code, 2, r.stderr);
  t.match(
    r.stderr,
    /cache directory \/proc\/x: cannot create directory: .*; choose a writable directory .* or run with --no-cache/,
  );
});

t.test('a cache directory that is a file is refused, for compiling and listing', async (t) => {
  const file = path.join(TMP, 'not-a-dir');
  fs.writeFileSync(file, 'x');
  for (const args of [
    ['compile', HOSTILE],
    ['cache', 'ls'],
  ]) {
    const r = await berm(['--cache-dir', file, ...args]);
    t.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    t.match(r.stderr, `cache directory ${file}: exists and is not a directory`);
  }
  const nested = await berm(['--cache-dir', path.join(file, 'sub'), 'compile', HOSTILE]);
  t.equal(nested.code, 2);
  t.match(nested.stderr, `cache directory ${file}: exists and is not a directory`);
});

t.test('cache ls names the ELF each entry came from', async (t) => {
  const dir = path.join(TMP, 'labelled');
  const c = await berm(['--cache-dir', dir, 'compile', POKE]);
  t.equal(c.code, 0, c.stderr);
  const ls = await berm(['--cache-dir', dir, 'cache', 'ls', '--json']);
  t.equal(ls.code, 0);
  const j = JSON.parse(ls.stdout) as { entries: { key: string; source: string; elfSha256: string }[] };
  t.equal(j.entries.length, 1);
  t.equal(j.entries[0]!.source, POKE);
  t.equal(j.entries[0]!.elfSha256, sha(POKE));
  const text = await berm(['--cache-dir', dir, 'cache', 'ls']);
  t.match(text.stdout, `${POKE} (sha256 ${sha(POKE).slice(0, 12)})`);
  const clear = await berm(['--cache-dir', dir, 'cache', 'clear']);
  t.equal(clear.code, 0);
  t.same(fs.readdirSync(dir), [], 'labels are cleared with their entries');
});

t.test('berm check validates a declaration and lists harnesses, tools and grants', async (t) => {
  const dir = path.join(TMP, 'check');
  fs.mkdirSync(path.join(dir, 'work'), { recursive: true });
  const good = path.join(dir, 'good.toml');
  fs.writeFileSync(
    good,
    `[[harnesses]]\nname = "h"\nsource = "${HOSTILE}"\nsha256 = "${sha(HOSTILE)}"\ncapabilities = ["exec", "clock"]\nroot = "work"\n\n` +
      `[[harnesses]]\nname = "os"\nsource = "${OS}"\nsha256 = "${sha(OS)}"\ncapabilities = ["fs"]\nroot = "work"\n`,
  );
  const ok = await berm(['check', good, '--json']);
  t.equal(ok.code, 0, ok.stderr);
  const j = JSON.parse(ok.stdout) as {
    harnesses: { name: string; tools: string[]; capabilities: string[]; grant: unknown }[];
    problems: string[];
  };
  t.same(
    j.harnesses.map((h) => [h.name, h.tools, h.capabilities, h.grant]),
    [
      [
        'h',
        ['badutf8', 'big', 'exec', 'flood', 'match', 'rdtime', 'silent', 'spin'],
        ['clock', 'exec'],
        { root: path.join(dir, 'work') },
      ],
      ['os', ['exec', 'read', 'write'], ['fs'], { root: path.join(dir, 'work') }],
    ],
  );
  t.same(j.problems, []);
  const text = await berm(['check', good]);
  t.match(
    text.stdout,
    /^h {2}\(.*hostile\.elf, line 1\)\n {2}tools: badutf8, big, exec, flood, match, rdtime, silent, spin\n {2}capabilities: clock, exec\n {2}grants: root = /,
  );

  const bad = path.join(dir, 'bad.toml');
  fs.writeFileSync(
    bad,
    `[[harnesses]]\nname = "h"\nsource = "${HOSTILE}"\nsha256 = "${sha(HOSTILE)}"\ncapabilities = ["fs"]\n\n` +
      `[[harnesses]]\nname = "ok"\nsource = "${OS}"\nsha256 = "${sha(OS)}"\n`,
  );
  const r = await berm(['check', bad]);
  t.equal(r.code, 2);
  t.match(r.stderr, `${bad}:5: harness "h": fs is granted without a root; fix: add root =`);
  t.match(r.stderr, /1 harness\(es\) accepted, 1 refused, 1 problem\(s\)/);
  t.match(r.stdout, /^ok {2}\(/);
});

t.test('inspect --config shows the declared harness with its grants', async (t) => {
  const dir = path.join(TMP, 'inspect');
  fs.mkdirSync(path.join(dir, 'work'), { recursive: true });
  const toml = path.join(dir, 'h.toml');
  fs.writeFileSync(
    toml,
    `[[harnesses]]\nname = "h"\nsource = "${HOSTILE}"\nsha256 = "${sha(HOSTILE)}"\ncapabilities = ["exec"]\nroot = "work"\n`,
  );
  const r = await berm(['inspect', '--config', toml, 'h', '--json']);
  t.equal(r.code, 0, r.stderr);
  const j = JSON.parse(r.stdout) as {
    harness: string;
    grant: unknown;
    capabilities: string[];
    manifest: { tools: { name: string }[] };
  };
  t.equal(j.harness, 'h');
  t.same(j.capabilities, ['exec']);
  t.same(j.grant, { root: path.join(dir, 'work') });
  t.same(
    j.manifest.tools.map((x) => x.name),
    ['badutf8', 'big', 'exec', 'flood', 'match', 'rdtime', 'silent', 'spin'],
  );
  const missing = await berm(['inspect', '--config', toml, 'nope']);
  t.equal(missing.code, 2);
  t.match(missing.stderr, /no harness named nope is declared \(declared: h\)/);
});

t.test('the README says what installing better-sqlite3 may need', async (t) => {
  const readme = fs.readFileSync(path.join(REPO, 'README.md'), 'utf8');
  t.match(readme, /better-sqlite3/);
  t.match(readme, /python3.*make.*g\+\+|python3, make and g\+\+/s);
});

t.test('arguments on stdin are read up to a bound, not until memory runs out', async (t) => {
  // The writer offers 160 MiB ('a' after a '{'), far above the 16 MiB berm reads; before the bound
  // berm read all of it (an endless `yes | berm call ... -` grew until the process died).
  const child = spawn(
    process.execPath,
    [
      '--stack-size=4000',
      path.join(REPO, 'bin', 'berm.js'),
      'call',
      path.join(REPO, 'fixtures', 'build', 'echo-gcc-O2.elf'),
      'echo',
      '-',
    ],
    {
      cwd: REPO,
      env: { ...process.env, BERM_CACHE_DIR: path.join(TMP, 'cache') },
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  child.stdout.resume();
  child.stdin.on('error', () => {}); // EPIPE once berm stops reading
  const chunk = Buffer.alloc(1 << 20, 'a');
  let written = 0;
  const feed = async () => {
    child.stdin.write('{');
    while (written < 160 << 20 && !child.stdin.destroyed && child.exitCode === null) {
      written += chunk.length;
      if (!child.stdin.write(chunk)) await new Promise((r) => child.stdin.once('drain', r).once('close', r));
    }
    child.stdin.end();
  };
  void feed();
  const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
  const code = await new Promise<number | null>((r) => child.on('close', r));
  clearTimeout(timer);
  t.equal(code, 2, stderr.slice(0, 500));
  t.match(stderr, /stdin holds more than 16777216 bytes of arguments/);
  t.ok(written < 160 << 20, `berm stopped reading after ${written} bytes were offered`);
});

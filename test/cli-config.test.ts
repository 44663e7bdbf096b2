// `berm call --config FILE HARNESS TOOL [ARGS]` end to end (spawns bin/berm.js from the repo root):
// the README example, exit codes of declaration problems (file:line and the fix), an ungranted
// capability (trap, exit 3), a refused path (tool failure, exit 1).
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import t from 'tap';
import { TEST_CACHE } from './helpers/fixtures.js';

const ROOT = resolve(import.meta.dirname, '..');
const TMP = realpathSync(mkdtempSync(join(tmpdir(), 'berm-cli-config-')));
t.teardown(() => rmSync(TMP, { recursive: true, force: true }));

function berm(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, reject) => {
    const child = spawn(
      process.execPath,
      ['--stack-size=4000', join(ROOT, 'bin', 'berm.js'), '--cache-dir', TEST_CACHE, ...args],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}

const OS_ELF = join(ROOT, 'examples', 'os.elf');
const OS_SHA = createHash('sha256').update(readFileSync(OS_ELF)).digest('hex');

t.test('the README example prints README.md', async (t) => {
  const r = await berm(['call', '--config', 'examples/harnesses.toml', 'os', 'read', '{"path":"README.md"}']);
  t.equal(r.code, 0, r.stderr);
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  t.equal(r.stdout, readme.endsWith('\n') ? readme : readme + '\n');
  t.equal(r.stderr, '');
});

t.test('exec and http run through the CLI (their worker thread gets the TypeScript loader)', async (t) => {
  const r = await berm([
    'call',
    '--config',
    'examples/harnesses.toml',
    'os',
    'exec',
    '{"command":"echo hi from exec"}',
  ]);
  t.equal(r.code, 0, r.stderr);
  t.match(JSON.parse(r.stdout), { stdout: 'hi from exec\n', exit_code: 0 });
  const f = await berm([
    'call',
    '--config',
    'examples/harnesses.toml',
    'fetch',
    'fetch',
    '{"url":"http://127.0.0.1:1/"}',
  ]);
  t.equal(f.code, 1, 'a refused connection is the tool failing, at once');
  t.match(f.stdout + f.stderr, /ECONNREFUSED|refused|connect/i);
  t.notMatch(f.stdout + f.stderr, /timed out/);
});

t.test('examples/harnesses.toml names the committed ELFs with their real sha256', async (t) => {
  const toml = readFileSync(join(ROOT, 'examples', 'harnesses.toml'), 'utf8');
  for (const name of ['os', 'fetch']) {
    const sha = createHash('sha256')
      .update(readFileSync(join(ROOT, 'examples', `${name}.elf`)))
      .digest('hex');
    t.match(toml, `source = "${name}.elf"\nsha256 = "${sha}"`, name);
  }
});

t.test(
  'exit codes: tool failure 1, declaration problems 2 with file:line, ungranted capability 3',
  async (t) => {
    const refused = await berm([
      'call',
      '--config',
      'examples/harnesses.toml',
      'os',
      'read',
      '{"path":"../x"}',
    ]);
    t.equal(refused.code, 1);
    t.match(refused.stdout, /^read refused: /);

    const unknown = await berm(['call', '--config', 'examples/harnesses.toml', 'nobody', 'read', '{}']);
    t.equal(unknown.code, 2);
    t.match(unknown.stderr, /no harness named nobody is declared \(declared: os, fetch\)/);

    const missing = await berm(['call', '--config', join(TMP, 'none.toml'), 'os', 'read', '{}']);
    t.equal(missing.code, 2);
    t.match(missing.stderr, /none\.toml: cannot read the declaration file/);

    const badFile = join(TMP, 'bad.toml');
    writeFileSync(
      badFile,
      `[[harnesses]]\nname = "os"\nsource = "${OS_ELF}"\nsha256 = "${'0'.repeat(64)}"\ncapabilities = ["fs"]\nroot = "."\n`,
    );
    const mismatch = await berm(['call', '--config', badFile, 'os', 'read', '{"path":"x"}']);
    t.equal(mismatch.code, 2);
    t.match(mismatch.stderr, `${badFile}:4: harness "os": sha256 mismatch`);
    t.match(mismatch.stderr, /fix: /);
    t.notMatch(mismatch.stderr, /\.ts:/, 'no stack trace');

    const syntax = join(TMP, 'syntax.toml');
    writeFileSync(syntax, '[[harnesses]]\nname = "os\n');
    const s = await berm(['call', '--config', syntax, 'os', 'read', '{}']);
    t.equal(s.code, 2);
    t.match(s.stderr, `${syntax}:2: TOML syntax`);

    const readonly = join(TMP, 'readonly.toml');
    writeFileSync(
      readonly,
      `[[harnesses]]\nname = "ro"\nsource = "${OS_ELF}"\nsha256 = "${OS_SHA}"\ncapabilities = ["fs"]\nroot = "."\n`,
    );
    const trap = await berm(['call', '--config', readonly, 'ro', 'exec', '{"command":"touch ran"}']);
    t.equal(trap.code, 3);
    t.match(trap.stderr, /guest trap UnknownHostCall/);
    t.match(
      trap.stderr,
      /\(berm\.exec\.run\): it is not linked into this instance: capability "exec" is not granted/,
    );
    const ok = await berm(['call', '--config', readonly, 'ro', 'write', '{"path":"w.txt","content":"hi"}']);
    t.equal(ok.code, 0, ok.stderr);
    t.equal(readFileSync(join(TMP, 'w.txt'), 'utf8'), 'hi', 'root "." is the folder of the TOML file');

    // the same ELF called as a plain file is granted nothing: the message says how to grant
    const plain = await berm(['call', OS_ELF, 'read', '{"path":"README.md"}']);
    t.equal(plain.code, 3);
    t.match(
      plain.stderr,
      '(berm.fs.read): it is not linked into this instance: capability "fs" is not granted to this harness',
    );
    t.match(plain.stderr, 'a plain `berm call FILE` grants none: declare the harness and use call --config');

    const noTool = await berm(['call', '--config', readonly, 'ro', 'nosuch']);
    t.equal(noTool.code, 2);
    t.match(noTool.stderr, /no tool named nosuch \(tools: exec, read, write\)/);
  },
);

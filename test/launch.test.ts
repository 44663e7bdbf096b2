// The launchers (bin/launch.js) run dist/ only when it is a build of the current sources, and the
// TypeScript sources otherwise, so a test spawning bin/berm.js after an edit never runs stale code.
// A scratch tree with the real bin/ and loader and an entry module of each kind that says which ran.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ROOT } from './helpers/fixtures.js';

const dir = mkdtempSync(join(tmpdir(), 'berm-launch-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

cpSync(join(ROOT, 'bin'), join(dir, 'bin'), { recursive: true });
cpSync(join(ROOT, 'scripts', 'ts'), join(dir, 'scripts', 'ts'), { recursive: true });
symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module', version: '9.8.7' }));
writeFileSync(join(dir, 'tsconfig.build.json'), '{}');
mkdirSync(join(dir, 'src', 'cli'), { recursive: true });
mkdirSync(join(dir, 'dist', 'cli'), { recursive: true });
// the loader strips the type annotation; execArgv shows whether workers would get the loader too
writeFileSync(
  join(dir, 'src', 'cli', 'main.ts'),
  "const from: string = 'source';\nconsole.log(from, process.execArgv.some((a) => a.includes('register.mjs')));\n",
);
writeFileSync(
  join(dir, 'dist', 'cli', 'main.js'),
  "console.log('dist', process.execArgv.some((a) => a.includes('register.mjs')));\n",
);

const past = new Date(Date.now() - 3600_000);
function stamp(started: number): void {
  writeFileSync(join(dir, 'dist', '.build.json'), JSON.stringify({ started }));
}
function which(env: Record<string, string> = {}): string {
  const r = spawnSync(process.execPath, [join(dir, 'bin', 'berm.js'), 'call'], {
    encoding: 'utf8',
    env: { ...process.env, BERM_FROM_SOURCE: '', ...env },
  });
  if (r.status !== 0) throw new Error(r.stderr);
  return r.stdout.trim();
}
for (const f of ['src/cli/main.ts', 'src/cli', 'src', 'tsconfig.build.json'])
  utimesSync(join(dir, f), past, past);

t.test('dist/ runs when its build started after every source changed', async (t) => {
  stamp(Date.now());
  t.equal(which(), 'dist false', 'compiled, no loader handed to workers');
  t.equal(which({ BERM_FROM_SOURCE: '1' }), 'source true', 'BERM_FROM_SOURCE=1 forces the sources');
});

t.test('an edited source, an edited build config or a missing stamp run the sources', async (t) => {
  stamp(Date.now());
  const now = new Date();
  utimesSync(join(dir, 'src', 'cli', 'main.ts'), now, now);
  stamp(now.getTime() - 1000);
  t.equal(which(), 'source true', 'a source newer than the build: the sources, loader in execArgv');
  utimesSync(join(dir, 'src', 'cli', 'main.ts'), past, past);
  t.equal(which(), 'dist false', 'back to an older mtime: dist again');
  utimesSync(join(dir, 'tsconfig.build.json'), now, now);
  t.equal(which(), 'source true', 'tsconfig.build.json newer than the build');
  utimesSync(join(dir, 'tsconfig.build.json'), past, past);
  rmSync(join(dir, 'dist', '.build.json'));
  t.equal(which(), 'source true', 'no stamp (a failed or interrupted build)');
});

t.test('an installed package (dist/ without src/) runs dist/; --version needs neither', async (t) => {
  stamp(Date.now());
  cpSync(join(dir, 'src'), join(dir, 'src-away'), { recursive: true });
  rmSync(join(dir, 'src'), { recursive: true });
  try {
    t.equal(which(), 'dist false');
  } finally {
    cpSync(join(dir, 'src-away'), join(dir, 'src'), { recursive: true });
  }
  const r = spawnSync(process.execPath, [join(dir, 'bin', 'berm.js'), '--version'], { encoding: 'utf8' });
  t.equal(r.stdout, '9.8.7\n');
});

// A real package has neither src/ nor the loader (scripts/ts/): with its build record missing or
// damaged there is nothing to fall back to but dist/, which must run, saying why in one line.
t.test('an installed package with a missing or damaged build record runs dist/, saying why', async (t) => {
  const away = (p: string) => {
    cpSync(join(dir, p), join(dir, `${p}-away`), { recursive: true });
    rmSync(join(dir, p), { recursive: true });
  };
  away('src');
  away('scripts');
  t.teardown(() => {
    for (const p of ['src', 'scripts']) {
      cpSync(join(dir, `${p}-away`), join(dir, p), { recursive: true });
      rmSync(join(dir, `${p}-away`), { recursive: true });
    }
  });
  const run = (env: Record<string, string> = {}) =>
    spawnSync(process.execPath, [join(dir, 'bin', 'berm.js'), 'call'], {
      encoding: 'utf8',
      env: { ...process.env, BERM_FROM_SOURCE: '', ...env },
    });
  for (const [what, record] of [
    ['truncated', '{"started":'],
    ['not an object', '[]'],
    ['missing', null],
  ] as const) {
    if (record === null) rmSync(join(dir, 'dist', '.build.json'), { force: true });
    else writeFileSync(join(dir, 'dist', '.build.json'), record);
    const r = run();
    t.equal(r.status, 0, `${what}: exit 0 (${r.stderr.trim()})`);
    t.equal(r.stdout.trim(), 'dist false', `${what}: dist/ ran`);
    t.match(
      r.stderr,
      /dist\/\.build\.json is missing or damaged .*running dist\/ unbundled/,
      `${what}: says why`,
    );
  }
  const r = run({ BERM_FROM_SOURCE: '1' });
  t.equal(r.stdout.trim(), 'dist false', 'BERM_FROM_SOURCE=1 without sources: dist/ ran');
  t.match(r.stderr, /BERM_FROM_SOURCE=1, but this installation has no src\//);
  stamp(Date.now());
});

t.test('a process without WebAssembly (node --jitless) is refused with one clear line', async (t) => {
  stamp(Date.now());
  for (const flag of ['--jitless', '--no-expose-wasm']) {
    const r = spawnSync(process.execPath, [flag, join(dir, 'bin', 'berm.js'), 'call'], { encoding: 'utf8' });
    t.equal(r.status, 2, `${flag}: exit code 2 (bad usage)`);
    t.equal(r.stdout, '', `${flag}: the entry module did not run`);
    t.match(r.stderr, /berm: this Node process has no WebAssembly/, `${flag}: says why`);
    t.notMatch(r.stderr, /at .*\(.*:\d+:\d+\)/, `${flag}: no stack trace`);
  }
  const v = spawnSync(process.execPath, ['--jitless', join(dir, 'bin', 'berm.js'), '--version'], {
    encoding: 'utf8',
  });
  t.equal(v.stdout, '9.8.7\n', '--version still answers (it loads nothing)');
});

// A cache directory someone else can write: whatever stands at an entry's name (a FIFO, a symlink
// to /dev/zero or to a file outside the cache, a directory, an oversized file), a compile still
// completes (translating instead), the process stays up, `berm cache ls/clear` answer, and nothing
// outside the cache directory is read from, written or removed. Each compile runs in a child
// process with a deadline and a memory bound, so a regression fails here rather than hanging the
// test or exhausting the machine's memory.
import { execFileSync, spawn } from 'node:child_process';
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { WasmCache } from '../src/cache/cache.js';
import { Engine } from '../src/engine/engine.js';
import { readRegularFile } from '../src/util/read-file.js';
import { fixtureElfs, ROOT } from './helpers/fixtures.js';

const raw = fixtureElfs().find((e) => e.source === 'raw.c' && e.compiler === 'clang' && e.opt === 'O2')!;
/** raw_add(2, 3)'s a0 as `berm exec` prints it */
const A0 = '0x0000000000000005';
const TMP = mkdtempSync(join(tmpdir(), 'berm-cache-hostile-'));
t.teardown(() => rmSync(TMP, { recursive: true, force: true }));

/** Resolves after the current turn of the event loop, once the cache's queued writes are on disk. */
const afterTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * The names of the files compiling `raw` puts in a cache: the baseline and optimised modules, the
 * image summary, and the labels the CLI writes beside each module.
 */
async function entryNames(): Promise<string[]> {
  const names = new Set<string>();
  for (const tier of ['baseline', 'optimized'] as const) {
    const dir = mkdtempSync(join(TMP, 'names-'));
    await new Engine({ cacheDir: dir, tier }).compile(raw.path);
    await afterTurn();
    for (const f of readdirSync(dir)) names.add(f);
  }
  for (const n of [...names]) if (n.endsWith('.wasm')) names.add(n.replace(/\.wasm$/, '.json'));
  return [...names].sort();
}

interface Exit {
  code: number | null;
  stdout: string;
  stderr: string;
  /** why the child was stopped, when it was */
  stopped?: string;
}

/**
 * Run node with `args` from the repository root. The child is killed (SIGKILL) after `ms`, or as
 * soon as its resident memory passes 1 GiB (a compile of `raw` needs ~150 MB): an endless read
 * would otherwise take the machine's memory.
 */
function node(args: string[], ms = 60_000): Promise<Exit> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--stack-size=4000', ...args], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let stopped: string | undefined;
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const stop = (why: string) => {
      stopped ??= why;
      child.kill('SIGKILL');
    };
    const deadline = setTimeout(() => stop(`still running after ${ms} ms`), ms);
    const watch = setInterval(() => {
      try {
        const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
        if (m && Number(m[1]) > 1 << 20) stop(`resident memory ${m[1]} kB`);
      } catch {
        // exited meanwhile
      }
    }, 50);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(deadline);
      clearInterval(watch);
      resolve({ code, stdout, stderr, ...(stopped ? { stopped } : {}) });
    });
  });
}

/** Compile `raw` with the cache `dir` in a fresh process (tier auto) and call raw_add(2, 3). */
const compile = (dir: string) =>
  node(['--import=./scripts/ts/register.mjs', 'test/helpers/compile-once.ts', raw.path, dir, 'auto']);

/** `berm ARGS` with the cache `dir`, from the sources. */
const berm = (dir: string, args: string[]) => node(['bin/berm.js', '--cache-dir', dir, ...args]);

/** What a compile child printed, or how it ended when that is not JSON. */
function printed(r: Exit): unknown {
  try {
    return JSON.parse(r.stdout);
  } catch {
    return { code: r.code, stopped: r.stopped, stderr: r.stderr.slice(-500) };
  }
}

/** What stands at a path, without following a symlink. */
function kindAt(p: string): string {
  const st = lstatSync(p, { throwIfNoEntry: false });
  if (st === undefined) return 'absent';
  if (st.isFIFO()) return 'fifo';
  if (st.isSymbolicLink()) return 'symlink';
  if (st.isDirectory()) return 'directory';
  return st.isFile() ? 'file' : 'other';
}

const hostile: Record<string, (p: string) => void> = {
  fifo: (p) => execFileSync('mkfifo', [p]),
  'symlink to /dev/zero': (p) => symlinkSync('/dev/zero', p),
  directory: (p) => mkdirSync(p),
};

t.test('hostile objects at every entry name: compiles complete, the CLI answers', async (t) => {
  const names = await entryNames();
  t.equal(names.filter((n) => n.endsWith('.wasm')).length, 2, 'a baseline and an optimised module');
  t.equal(names.filter((n) => n.endsWith('.image')).length, 1, 'an image summary');
  const image = names.find((n) => n.endsWith('.image'))!;
  for (const [what, make] of Object.entries(hostile)) {
    const dir = mkdtempSync(join(TMP, 'hostile-'));
    for (const n of names) make(join(dir, n));
    const first = await compile(dir);
    t.same(
      { ...first, stderr: '' },
      { code: 0, stdout: JSON.stringify({ cached: false, a0: '5' }), stderr: '' },
      `${what}: the compile translates instead and the process exits normally`,
    );
    const base = names.find((n) => n.endsWith('.wasm') && kindAt(join(dir, n)) === 'file');
    if (what === 'directory') {
      // a directory is not the cache's to remove: the entry cannot be written, every compile translates
      for (const n of names) t.equal(kindAt(join(dir, n)), 'directory', `${what}: ${n} left alone`);
      t.same(printed(await compile(dir)), { cached: false, a0: '5' }, `${what}: again a miss`);
    } else {
      // the new entry replaces the FIFO or symlink (a rename never writes through either)
      t.ok(base, `${what}: the baseline module was written in its place`);
      t.equal(kindAt(join(dir, image)), 'file', `${what}: so was the image`);
      t.same(printed(await compile(dir)), { cached: true, a0: '5' }, `${what}: the next compile hits`);
    }
    // the CLI: exec labels the entry it ran (reading the label first); ls reads every label
    const exec = await berm(dir, ['exec', raw.path, 'raw_add', '2', '3']);
    t.same(
      { code: exec.code, a0: exec.stdout.slice(0, 21) },
      { code: 0, a0: `a0=${A0}` },
      `${what}: berm exec`,
    );
    const ls = await berm(dir, ['--json', 'cache', 'ls']);
    t.equal(ls.code, 0, `${what}: berm cache ls exits 0 (${ls.stopped ?? ls.stderr})`);
    const listed = ls.code === 0 ? (JSON.parse(ls.stdout) as { entries: { key: string }[] }).entries : [];
    for (const e of listed)
      t.equal(kindAt(join(dir, `${e.key}.wasm`)), 'file', `${what}: ls lists regular files only`);
    const clear = await berm(dir, ['--json', 'cache', 'clear']);
    t.equal(clear.code, 0, `${what}: berm cache clear exits 0 (${clear.stopped ?? clear.stderr})`);
    const left = readdirSync(dir).map((n) => `${n}: ${kindAt(join(dir, n))}`);
    t.same(
      left,
      what === 'directory' ? names.map((n) => `${n}: directory`) : [],
      `${what}: clear removes every file and link of the cache, never a directory`,
    );
  }
});

t.test('labels linked to files outside the cache: never written through', async (t) => {
  const dir = mkdtempSync(join(TMP, 'links-'));
  // a warm cache: the next exec finds its module and reads the label beside it
  const first = await berm(dir, ['exec', raw.path, 'raw_add', '2', '3']);
  t.equal(first.code, 0, 'berm exec warms the cache');
  const labels = readdirSync(dir).filter((n) => n.endsWith('.json'));
  t.equal(labels.length, 1, 'one label');
  const victims = new Map<string, string>();
  for (const n of labels) {
    const victim = join(TMP, `victim-${n}`);
    writeFileSync(victim, `precious ${n}\n`);
    rmSync(join(dir, n));
    symlinkSync(victim, join(dir, n));
    victims.set(n, victim);
  }
  const exec = await berm(dir, ['exec', raw.path, 'raw_add', '2', '3']);
  t.same({ code: exec.code, a0: exec.stdout.slice(0, 21) }, { code: 0, a0: `a0=${A0}` }, 'berm exec');
  for (const [n, victim] of victims) {
    t.equal(readFileSync(victim, 'utf8'), `precious ${n}\n`, `the file behind ${n} is untouched`);
    t.equal(kindAt(join(dir, n)), 'file', `${n}: the label replaced the link`);
  }
  const clear = await berm(dir, ['cache', 'clear']);
  t.equal(clear.code, 0, 'berm cache clear');
  for (const [n, victim] of victims) t.equal(readFileSync(victim, 'utf8'), `precious ${n}\n`, `${n}: still`);
});

t.test('a regular entry larger than any module V8 accepts is damaged: removed unread', async (t) => {
  const names = await entryNames();
  const dir = mkdtempSync(join(TMP, 'large-'));
  for (const n of names.filter((n) => !n.endsWith('.json'))) {
    // sparse: 3 GiB of nothing costs no disk, and reading it would cost seconds and 3 GiB of memory
    execFileSync('truncate', ['-s', '3G', join(dir, n)]);
  }
  const cache = new WasmCache(dir);
  for (const n of names.filter((n) => !n.endsWith('.json'))) {
    const [key, kind] = n.split('.') as [string, 'wasm' | 'image'];
    t.equal(cache.get(key, kind), null, `${n}: a miss`);
    t.equal(kindAt(join(dir, n)), 'absent', `${n}: removed`);
  }
});

t.test('Engine.compile of a path naming a FIFO or /dev/zero: refused at once, never read', async (t) => {
  const dir = mkdtempSync(join(TMP, 'input-'));
  const cache = mkdtempSync(join(TMP, 'input-cache-'));
  const fifo = join(dir, 'harness.elf');
  execFileSync('mkfifo', [fifo]);
  const cases: [string, RegExp][] = [
    [fifo, /harness\.elf: is a FIFO \(named pipe\); name a regular file/],
    ['/dev/zero', /\/dev\/zero: is a character device; name a regular file/],
  ];
  for (const [path, why] of cases) {
    const r = await node([
      '--import=./scripts/ts/register.mjs',
      'test/helpers/compile-once.ts',
      path,
      cache,
      'auto',
    ]);
    t.equal(r.stopped, undefined, `${path}: the process was not stopped (${r.stopped})`);
    t.not(r.code, 0, `${path}: the compile fails`);
    t.match(r.stderr, /InputFileError/, `${path}: with an InputFileError`);
    t.match(r.stderr, why, `${path}: naming the path and why`);
  }
});

t.test('readRegularFile: the file as it is, in an array of its own; refusals explained', async (t) => {
  const dir = mkdtempSync(join(TMP, 'read-'));
  const empty = join(dir, 'empty');
  writeFileSync(empty, '');
  for (const path of [
    ...fixtureElfs()
      .slice(0, 3)
      .map((e) => e.path),
    empty,
  ]) {
    const bytes = readRegularFile(path);
    t.same(Buffer.from(bytes), readFileSync(path), `${path}: the bytes readFileSync reads`);
    t.equal(Object.getPrototypeOf(bytes), Uint8Array.prototype, `${path}: a plain Uint8Array`);
    // read into memory that was not zeroed first: nothing beyond the file is reachable through it
    t.equal(bytes.buffer.byteLength, bytes.length, `${path}: its buffer holds the file and nothing else`);
  }
  t.throws(() => readRegularFile(join(dir, 'none')), /none: no such file \(ENOENT\)$/);
  t.throws(() => readRegularFile(dir), /: is a directory; name a regular file$/);
  t.throws(
    () => readRegularFile(fixtureElfs()[0].path, 10),
    /: is \d+ bytes, over the limit of 10; is it really a harness\?$/,
  );
});

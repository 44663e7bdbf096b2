// The Wasm cache: keyed by content, atomic, self-checking; a warm compile never imports Binaryen.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { cacheKey, defaultCacheDir, WasmCache } from '../src/cache/cache.js';
import { readElf } from '../src/elf/reader.js';
import { restoreImage, summarizeImage } from '../src/elf/summary.js';
import { Engine } from '../src/engine/engine.js';
import { findSummary, SUMMARY_SECTION } from '../src/engine/summary-section.js';
import { binaryenVersion, sourceDigest } from '../src/translate/abi.js';
import { fixtureElfs, ROOT } from './helpers/fixtures.js';

const raw = fixtureElfs().find((e) => e.source === 'raw.c' && e.compiler === 'clang' && e.opt === 'O2')!;

/** Resolves after the current turn of the event loop, once the cache's queued writes are on disk. */
const afterTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

function child(dir: string, forbid: boolean, tier = 'optimized'): { cached: boolean; a0: string } {
  const args = ['--stack-size=4000', '--import=./scripts/ts/register.mjs'];
  if (forbid) args.push('--import=./test/helpers/forbid-binaryen.mjs');
  args.push('test/helpers/compile-once.ts', raw.path, dir, tier);
  return JSON.parse(execFileSync(process.execPath, args, { cwd: ROOT, encoding: 'utf8' }));
}

t.test('cold then warm in new processes; the warm one never imports binaryen', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'berm-cache-'));
  const cold = child(dir, false);
  t.same(cold, { cached: false, a0: '5' });
  const warm = child(dir, true);
  t.same(warm, { cached: true, a0: '5' });
  t.throws(
    () => child(mkdtempSync(join(tmpdir(), 'berm-cache-')), true),
    'a cold compile of the optimised tier needs binaryen (the guard works)',
  );
  // the baseline tier writes Wasm itself: a cold start never loads Binaryen on the main thread
  // (the guard also reaches the background worker, whose optimisation then fails quietly)
  t.same(child(mkdtempSync(join(tmpdir(), 'berm-cache-')), true, 'auto'), { cached: false, a0: '5' });
});

t.test('a corrupt or truncated entry is detected and rebuilt', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'berm-cache-'));
  const engine = new Engine({ cacheDir: dir });
  const first = await engine.compile(raw.path);
  t.equal(first.info.cached, false);
  await afterTurn(); // entries are written after the compiling turn (WasmCache.putLater)
  const file = readdirSync(dir).find((f) => f.endsWith('.wasm'))!;
  const path = join(dir, file);
  const good = readFileSync(path);
  for (const bad of [
    good.subarray(0, good.length - 7),
    Buffer.concat([good.subarray(0, 60), Buffer.from([good[60] ^ 1]), good.subarray(61)]),
    Buffer.alloc(0),
  ]) {
    writeFileSync(path, bad);
    const again = await engine.compile(raw.path);
    t.equal(again.info.cached, false, 'a damaged entry is a miss');
    await afterTurn();
    t.same(readFileSync(path), good, 'and is rewritten whole');
  }
  t.equal((await engine.compile(raw.path)).info.cached, true);
});

t.test('the translator digest covers every source a translation is made of', async (t) => {
  // the translator's folder, the decoder's and ELF reader's, and the LEB128 encoder in util/ that
  // the byte writer's output is made of; other util/ modules do not change a translation
  const src = mkdtempSync(join(tmpdir(), 'berm-digest-'));
  const files = ['translate/a.ts', 'riscv/b.ts', 'elf/c.ts', 'util/leb.ts', 'util/other.ts'];
  for (const f of files) {
    mkdirSync(join(src, f, '..'), { recursive: true });
    writeFileSync(join(src, f), `// ${f}\n`);
  }
  const digest = () => sourceDigest(join(src, 'translate'));
  const seen = new Set([digest()]);
  for (const f of files.slice(0, 4)) {
    writeFileSync(join(src, f), `// ${f} edited\n`);
    t.notOk(seen.has(digest()), `an edit of ${f} changes the digest`);
    seen.add(digest());
  }
  const before = digest();
  writeFileSync(join(src, 'util/other.ts'), '// edited\n');
  t.equal(digest(), before, 'an edit of another util/ module does not');
});

t.test("the optimising tier's passes are part of the translator digest", async (t) => {
  // a copy of the real sources digests as they do; the same copy with one more pass in the
  // pipeline translate() runs (module.ts PIPELINE) does not, so a changed pipeline never reads a
  // module the old one optimised from the cache
  const src = mkdtempSync(join(tmpdir(), 'berm-digest-'));
  t.teardown(() => rmSync(src, { recursive: true, force: true }));
  for (const d of ['translate', 'riscv', 'elf', 'util']) {
    cpSync(join(ROOT, 'src', d), join(src, d), { recursive: true });
  }
  const digest = () => sourceDigest(join(src, 'translate'));
  t.equal(digest(), sourceDigest(join(ROOT, 'src', 'translate')), 'the copy digests as the sources');
  const file = join(src, 'translate', 'module.ts');
  const text = readFileSync(file, 'utf8');
  const edited = text.replace(/(export const PIPELINE: Pipeline = \{\s*before: \[)/, "$1'vacuum', ");
  t.not(edited, text, 'module.ts holds the pipeline');
  writeFileSync(file, edited);
  t.not(digest(), sourceDigest(join(ROOT, 'src', 'translate')), 'an edited pipeline changes the digest');
});

t.test("the installed Binaryen's version is part of the translator digest", async (t) => {
  // read independently of binaryenVersion(): the package.json npm installed
  const installed = (
    JSON.parse(readFileSync(join(ROOT, 'node_modules', 'binaryen', 'package.json'), 'utf8')) as {
      version: string;
    }
  ).version;
  t.equal(binaryenVersion(), installed);
  const dir = join(ROOT, 'src', 'translate');
  t.equal(sourceDigest(dir), sourceDigest(dir, installed), 'the default is the installed version');
  t.not(sourceDigest(dir, '1.0.0'), sourceDigest(dir, installed), 'another Binaryen, another digest');
});

t.test('keys separate content and options', async (t) => {
  t.not(cacheKey(['ab', 'c']), cacheKey(['a', 'bc']), 'parts are length-prefixed');
  // the key, computed independently: sha256 over each part preceded by its length as a 64-bit
  // little-endian integer (sha256sum over the same bytes)
  const big = new Uint8Array(70_000).fill(7);
  const le64 = (n: number) => {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(n));
    return b;
  };
  const framed = Buffer.concat([le64(2), Buffer.from('ab'), le64(big.length), big, le64(0)]);
  const sum = execFileSync('sha256sum', { input: framed, encoding: 'utf8' }).split(' ')[0];
  t.equal(cacheKey(['ab', big, '']), sum, 'sha256 of length-prefixed parts (lengths over 255 too)');
  // all-ASCII string parts take another way to the same bytes; a long or non-ASCII part the first
  const text = (parts: string[]) =>
    execFileSync('sha256sum', {
      input: Buffer.concat(parts.flatMap((p) => [le64(Buffer.byteLength(p)), Buffer.from(p)])),
      encoding: 'utf8',
    }).split(' ')[0];
  for (const parts of [
    ['ab', 'c'],
    ['f'.repeat(64), 'x'.repeat(127), ''],
    ['y'.repeat(128)],
    ['é', 'a\u0000b'],
  ]) {
    t.equal(cacheKey(parts), text(parts), `string parts ${parts.map((p) => p.length).join(',')}`);
  }
  const a = new Engine({ cacheDir: null });
  const b = new Engine({ cacheDir: null, memorySize: 1 << 20 });
  const elf = new Uint8Array(readFileSync(raw.path));
  t.not(a.keyFor(elf), b.keyFor(elf), 'memory size is part of the key');
  const c = new WasmCache(mkdtempSync(join(tmpdir(), 'berm-cache-')));
  t.equal(c.get('0'.repeat(64)), null);
  t.ok(c.put('1'.repeat(64), new Uint8Array([1, 2, 3])));
  // the entry: an ASCII header (magic, length as 16 hex digits, sha256 as 64), then the bytes
  const stored = readFileSync(join(c.dir, `${'1'.repeat(64)}.wasm`));
  const sha = execFileSync('sha256sum', { input: Buffer.from([1, 2, 3]), encoding: 'utf8' }).split(' ')[0];
  t.equal(stored.toString('latin1'), `BERMWC02${'3'.padStart(16, '0')}${sha}\x01\x02\x03`);
  t.same(c.get('1'.repeat(64)), new Uint8Array([1, 2, 3]));
  t.same(
    c.list().map((e) => e.key),
    ['1'.repeat(64)],
  );
  t.equal(c.clear(), 1);
  t.same(c.list(), []);
  t.throws(() => c.get('../etc/passwd'), /bad cache key/);
});

t.test('the image summary kept beside a module restores what running it needs', async (t) => {
  for (const f of fixtureElfs().filter((e) => e.opt === 'O2')) {
    const bytes = new Uint8Array(readFileSync(f.path));
    const parsed = readElf(bytes);
    const text = summarizeImage(parsed, bytes);
    t.ok(text, `${f.path}: summarised`);
    const back = restoreImage(text!, bytes)!;
    for (const k of ['entry', 'flags', 'functions', 'globalPointer', 'imageStart', 'imageEnd'] as const) {
      t.same(back[k], parsed[k], `${f.path}: ${k}`);
    }
    t.same(
      back.segments.map((s) => ({ ...s, data: [...s.data] })),
      parsed.segments.map((s) => ({ ...s, data: [...s.data] })),
      `${f.path}: segments and their bytes`,
    );
    t.same(
      back.manifest && [...back.manifest],
      parsed.manifest && [...parsed.manifest],
      `${f.path}: manifest`,
    );
    // the tables it does not keep come from parsing the ELF on first use
    t.same(back.relocations, parsed.relocations, `${f.path}: relocations parsed on demand`);
    t.same(back.symbols.length, parsed.symbols.length);
    t.equal(restoreImage(text!, bytes.subarray(0, bytes.length - 1)), null, 'not over another file size');
  }
  t.equal(restoreImage('{"v":0}', new Uint8Array(8)), null, 'another version is not restored');
  t.equal(restoreImage('not json', new Uint8Array(8)), null);
});

t.test(
  'a second engine restores the image summary from the cached module, else from beside it; a damaged one is reparsed',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'berm-cache-'));
    const bytes = new Uint8Array(readFileSync(raw.path));
    const first = await new Engine({ cacheDir: dir, tier: 'baseline' }).compile(bytes);
    await afterTurn();
    const files = readdirSync(dir);
    t.equal(files.filter((f) => f.endsWith('.image')).length, 1, 'one summary beside the module');
    const imageName = files.find((f) => f.endsWith('.image'))!;
    const img = join(dir, imageName);
    const cache = new WasmCache(dir);
    const beside = Buffer.from(cache.get(imageName.replace(/\.image$/, ''), 'image')!).toString('utf8');
    // the cached module carries the same summary in a custom section, as V8 itself reports it
    const stored = cache.get(first.info.key)!;
    t.ok(WebAssembly.validate(stored), 'the cached module is valid');
    // (WebAssembly.Module.customSections is in the JS API spec; TypeScript's lib here lacks it)
    const customSections = (
      WebAssembly.Module as unknown as { customSections(m: WebAssembly.Module, name: string): ArrayBuffer[] }
    ).customSections;
    const sections = customSections(new WebAssembly.Module(stored), SUMMARY_SECTION);
    t.equal(sections.length, 1);
    t.equal(Buffer.from(sections[0]).toString('utf8'), beside, 'the summary, as a custom section');
    t.equal(findSummary(stored)?.moduleBytes, first.info.wasmBytes, 'appended after the translated module');

    // warm: the summary comes from the module; the one beside it is not read
    writeFileSync(img, 'garbage');
    const warm = new Engine({ cacheDir: dir, tier: 'baseline' });
    const second = await warm.compile(bytes);
    t.equal(second.info.cached, true);
    t.equal(second.info.elfSha256, first.info.elfSha256);
    t.equal(second.info.wasmBytes, first.info.wasmBytes, 'the module size without the section');
    // V8 is given the module without the section (it would copy, hash and keep its bytes)
    t.equal(customSections(second.wasm, SUMMARY_SECTION).length, 0, 'V8 compiled it without the section');
    t.same(
      WebAssembly.Module.exports(second.wasm),
      WebAssembly.Module.exports(first.wasm),
      'the same exports as the translated module',
    );
    // a restored image parses the ELF for its sections on first use (a getter); a parsed one has them
    t.equal(Object.getOwnPropertyDescriptor(second.image, 'sections')?.get !== undefined, true, 'restored');
    t.same(second.image.functions, first.image.functions);

    // a module cached without the section: the summary beside it, here damaged, so parsed again
    cache.put(first.info.key, stored.subarray(0, findSummary(stored)!.moduleBytes));
    const third = await new Engine({ cacheDir: dir, tier: 'baseline' }).compile(bytes);
    t.equal(third.info.cached, true);
    t.equal(Object.getOwnPropertyDescriptor(third.image, 'sections')?.get, undefined, 'parsed again');
    t.same(third.image.functions, first.image.functions);
    await afterTurn();
    t.ok(readFileSync(img).length > 100, 'and the summary rewritten');
    const fourth = await new Engine({ cacheDir: dir, tier: 'baseline' }).compile(bytes);
    t.equal(
      Object.getOwnPropertyDescriptor(fourth.image, 'sections')?.get !== undefined,
      true,
      'restored from beside',
    );
    t.equal(new WasmCache(dir).list().length, 1, 'ls lists modules only');
  },
);

t.test('putLater: written after the turn or at exit; this process sees it at once', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'berm-cache-'));
  const cache = new WasmCache(dir);
  const key = cacheKey(['later']);
  let made = 0;
  cache.putLater(key, () => (made++, new Uint8Array([1, 2, 3])));
  t.equal(made, 0, 'nothing is made in the putting turn');
  t.same(readdirSync(dir), [], 'nor written');
  t.same(cache.get(key), new Uint8Array([1, 2, 3]), 'the same cache reads it (its queue is written first)');
  t.equal(made, 1);
  const other = cacheKey(['later too']);
  cache.putLater(other, () => new Uint8Array([4]));
  cache.putLater(cacheKey(['nothing']), () => null);
  await afterTurn();
  t.same(new WasmCache(dir).get(other), new Uint8Array([4]), 'another reader sees it after the turn');
  t.equal(new WasmCache(dir).get(cacheKey(['nothing'])), null, 'null makes no entry');
  // a process that exits in the putting turn still writes it (the exit hook)
  const script = [
    `import { WasmCache, cacheKey } from './src/cache/cache.ts';`,
    `new WasmCache(${JSON.stringify(dir)}).putLater(cacheKey(['at exit']), () => new Uint8Array([9, 9]));`,
    `process.exit(0);`,
  ].join('\n');
  execFileSync(
    process.execPath,
    ['--import=./scripts/ts/register.mjs', '--input-type=module', '-e', script],
    {
      cwd: ROOT,
    },
  );
  t.same(cache.get(cacheKey(['at exit'])), new Uint8Array([9, 9]), 'written by the exit hook');
});

t.test('the default directory: $BERM_CACHE_DIR, $XDG_CACHE_HOME/berm, else ~/.cache/berm', (t) => {
  const saved = { ...process.env };
  t.teardown(() => {
    for (const k of ['BERM_CACHE_DIR', 'XDG_CACHE_HOME', 'HOME']) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  });
  process.env.BERM_CACHE_DIR = '/tmp/berm-explicit';
  t.equal(defaultCacheDir(), '/tmp/berm-explicit');
  delete process.env.BERM_CACHE_DIR;
  process.env.XDG_CACHE_HOME = '/tmp/xdg';
  t.equal(defaultCacheDir(), '/tmp/xdg/berm');
  delete process.env.XDG_CACHE_HOME;
  process.env.HOME = '/tmp/some-home';
  // os.homedir() answers $HOME when it is set: the same directory either way
  t.equal(defaultCacheDir(), join(homedir(), '.cache', 'berm'));
  t.equal(defaultCacheDir(), '/tmp/some-home/.cache/berm');
  // without $HOME, os.homedir() reads the password database
  delete process.env.HOME;
  t.not(homedir(), '');
  t.equal(defaultCacheDir(), join(homedir(), '.cache', 'berm'));
  t.end();
});

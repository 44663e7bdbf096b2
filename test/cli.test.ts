// The berm CLI end to end: each test spawns `node bin/berm.js ...` and checks stdout, stderr and the
// exit code. Expected values come from fixtures/expected.json and cases.json (computed natively,
// never by berm) and from llvm-objdump listings in test/golden/. One temp cache dir is shared by
// the whole file; the first test warms it with `compile`.
import { spawn, spawnSync } from 'node:child_process';
import {
  closeSync,
  cpSync,
  existsSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { cases, expected, ROOT } from './helpers/fixtures.js';
import { parseListing } from './helpers/golden-listing.js';

const BUILD = join(ROOT, 'fixtures', 'build');
const TEXT = join(BUILD, 'text-gcc-O2.elf');
const MISBEHAVE = join(BUILD, 'misbehave-gcc-O2.elf');
const RAW = join(BUILD, 'raw-gcc-O2.elf');
const HOSTCALLS = join(BUILD, 'hostcalls-gcc-O2.elf');

const TMP = mkdtempSync(join(tmpdir(), 'berm-cli-test-'));
const CACHE = join(TMP, 'cache');
t.teardown(() => rmSync(TMP, { recursive: true, force: true }));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Run `node bin/berm.js ...args` from the repository root. */
function berm(args: string[], opts: { input?: string; env?: Record<string, string> } = {}): Promise<Run> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--stack-size=4000', join(ROOT, 'bin', 'berm.js'), ...args], {
      cwd: ROOT,
      env: { ...process.env, BERM_CACHE_DIR: CACHE, ...opts.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr, ms: performance.now() - t0 }));
    child.stdin.end(opts.input ?? '');
  });
}

/** Global options every run uses: the shared temp cache. */
const C = ['--cache-dir', CACHE];

/** No JS stack trace lines (`    at fn (file:line)`) in the text. */
const noStack = (s: string): boolean => !/^\s+at .*[(:]\d+/m.test(s) && !s.includes('.ts:');

const truncated = join(TMP, 'truncated.elf');
writeFileSync(truncated, readFileSync(TEXT).subarray(0, 100));

const toolCases = expected().tools;
const rawCases = expected().raw;

t.test('help lists the commands and the exit codes; no command is a usage error', async (t) => {
  const r = await berm(['--help']);
  t.equal(r.code, 0);
  for (const c of ['inspect', 'call', 'exec', 'compile', 'disasm', 'cache', 'new']) t.match(r.stdout, c);
  t.match(r.stdout, /Exit codes:/);
  for (const n of ['0', '1', '2', '3', '4']) t.match(r.stdout, new RegExp(`^\\s+${n}\\s`, 'm'));
  // exit 1 as README.md's table has it: every way a tool call ends without a result
  for (const why of [/berm\.fail/, /over the 4 MiB limit/, /not\s+valid UTF-8/, /returned without a result/])
    t.match(r.stdout, why);
  const none = await berm([]);
  t.equal(none.code, 2);
  const bad = await berm(['frobnicate']);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /unknown command/);
});

t.test('compile --json warms the cache and reports per-file outcomes', async (t) => {
  const files = [TEXT, MISBEHAVE, RAW, HOSTCALLS];
  const r = await berm([...C, 'compile', '--json', ...files]);
  t.equal(r.code, 0, r.stderr);
  const rep = JSON.parse(r.stdout);
  t.equal(rep.cacheDir, CACHE);
  t.equal(rep.files.length, files.length);
  t.same(
    rep.files.map((f: { file: string }) => f.file),
    files,
  );
  for (const f of rep.files) {
    t.equal(f.ok, true);
    t.match(f.key, /^[0-9a-f]{64}$/);
    t.type(f.cached, 'boolean');
    t.ok(f.wasmBytes > 0);
    t.type(f.totalMs, 'number');
    t.type(f.wasmCompileMs, 'number');
    if (!f.cached) t.match(f.translate, { build: Number, optimize: Number, emit: Number });
  }
  t.equal(rep.compiled + rep.cached, files.length);
  t.equal(rep.failed, 0);

  const again = await berm([...C, 'compile', '--json', RAW, truncated]);
  t.equal(again.code, 2, 'a malformed file makes the run exit 2');
  const rep2 = JSON.parse(again.stdout);
  t.match(rep2.files[0], { ok: true, cached: true, key: rep.files[2].key });
  t.match(rep2.files[1], { ok: false, error: 'ElfError', exitCode: 2 });
  t.match(rep2, { compiled: 0, cached: 1, failed: 1 });
  t.ok(noStack(again.stderr));

  const text = await berm([...C, 'compile', RAW]);
  t.equal(text.code, 0);
  t.match(text.stdout, /raw-gcc-O2\.elf: cache hit/, 'one line per file when stderr is not a terminal');

  const missing = join(TMP, 'no-such.elf');
  const gone = await berm([...C, 'compile', missing]);
  t.equal(gone.code, 2);
  t.match(gone.stderr, `berm: ${missing}: no such file`);
  t.notMatch(gone.stderr, `${missing}: ${missing}`, 'the file is named once');
});

t.test('compile reports an ELF that translates but is not a harness a deploy accepts', async (t) => {
  // test/data/edge.elf: a raw RV64 ELF without .berm.abi (bermd refuses it: no .berm.abi section)
  const edge = join(BUILD, '..', '..', 'test', 'data', 'edge.elf');
  const r = await berm([...C, 'compile', '--json', edge, TEXT]);
  t.equal(r.code, 0, 'translated: cached all the same');
  const rep = JSON.parse(r.stdout);
  t.match(rep.files[0], {
    ok: true,
    harness: false,
    notHarness: /^no \.berm\.abi section: build the harness/,
  });
  t.match(rep.files[1], { ok: true, harness: true });
  t.notOk('notHarness' in rep.files[1]);
  const text = await berm([...C, 'compile', edge]);
  t.equal(text.code, 0);
  t.match(text.stderr, `berm: ${edge}: translated, but not a harness bermd deploys: no .berm.abi section`);
});

t.test('cache ls and cache clear on a temp dir', async (t) => {
  const dir = join(TMP, 'cache-copy');
  cpSync(CACHE, dir, { recursive: true });
  const names = readdirSync(dir).filter((n) => n.endsWith('.wasm'));
  t.ok(names.length >= 4);

  const ls = await berm(['--cache-dir', dir, 'cache', 'ls', '--json']);
  t.equal(ls.code, 0);
  const j = JSON.parse(ls.stdout);
  t.equal(j.dir, dir);
  t.same(j.entries.map((e: { key: string }) => `${e.key}.wasm`).sort(), names.sort());
  for (const e of j.entries) {
    t.ok(e.bytes > 0);
    t.ok(!Number.isNaN(Date.parse(e.modified)));
  }

  const lsText = await berm(['cache', 'ls'], { env: { BERM_CACHE_DIR: dir } });
  t.equal(lsText.code, 0);
  t.equal(lsText.stdout.trim().split('\n').length, names.length, 'BERM_CACHE_DIR selects the dir');

  const clear = await berm(['--cache-dir', dir, 'cache', 'clear']);
  t.equal(clear.code, 0);
  t.match(clear.stdout, `removed ${names.length} entries`);
  t.same(
    readdirSync(dir).filter((n) => n.endsWith('.wasm')),
    [],
  );
  const empty = await berm(['--cache-dir', dir, 'cache', 'ls', '--json']);
  t.same(JSON.parse(empty.stdout).entries, []);
});

t.test('inspect shows manifest and counts without translating', async (t) => {
  const fresh = join(TMP, 'inspect-cache');
  const textTools = [...new Set(toolCases.filter((c) => c.source === 'text.c').map((c) => c.tool))];
  const r = await berm(['--cache-dir', fresh, 'inspect', TEXT]);
  t.equal(r.code, 0, r.stderr);
  for (const name of textTools) t.match(r.stdout, new RegExp(`^  ${name} - `, 'm'));
  t.match(r.stdout, /^abi_version\s+1$/m);
  t.match(r.stdout, /^functions\s+\d+ \(\d+ global\)$/m);
  t.match(r.stdout, /^indirect targets\s+\d+ code addresses/m);
  t.notOk(existsSync(fresh), 'inspect wrote nothing to the cache');

  const j = await berm(['--cache-dir', fresh, '--json', 'inspect', TEXT]);
  t.equal(j.code, 0);
  const rep = JSON.parse(j.stdout);
  t.same(rep.manifest.tools.map((x: { name: string }) => x.name).sort(), textTools.sort());
  t.equal(rep.manifest.abi_version, 1);
  t.equal(rep.functions.length, rep.functionCount);
  t.ok(rep.functionCount > 0);
  t.ok(rep.functions.some((f: { name: string }) => f.name === 'berm_tool_stats'));
  const it = rep.indirectTargets;
  t.equal(it.functionEntries + it.other, it.codeAddresses);
  t.notOk(existsSync(fresh));

  const listed = await berm(['inspect', '--functions', RAW]);
  t.equal(listed.code, 0);
  for (const s of new Set(rawCases.filter((c) => c.source === 'raw.c').map((c) => c.symbol))) {
    t.match(listed.stdout, new RegExp(` g ${s}(\\s|$)`, 'm'), s);
  }

  const bad = await berm(['inspect', truncated]);
  t.equal(bad.code, 2);
  t.match(bad.stderr, `berm: ${truncated}: the program header table runs past the end of the file`);
  t.notMatch(bad.stderr, 'ElfError', 'the file is named, not the error class');
  t.ok(noStack(bad.stderr), 'no stack trace');
  t.equal(bad.stdout, '');
  for (const verb of [['call'], ['exec'], ['disasm']]) {
    const r = await berm([...verb, truncated, ...(verb[0] === 'disasm' ? [] : ['x'])]);
    t.equal(r.code, 2, verb[0]);
    t.match(r.stderr, `berm: ${truncated}: the program header table`, verb[0]);
  }
  const badJson = await berm(['inspect', '--json', truncated]);
  t.match(JSON.parse(badJson.stdout), { status: 'error', error: 'ElfError' }, '--json keeps the class');

  const missing = await berm(['inspect', join(TMP, 'nope.elf')]);
  t.equal(missing.code, 2);
  t.match(missing.stderr, /no such file/);
});

t.test('call prints results (exit 0) and failures (exit 1) as expected.json says', async (t) => {
  // --no-validate: the guest's own parsing decides, as in the native run behind expected.json
  for (const c of toolCases.filter((x) => x.source === 'text.c')) {
    const r = await berm([...C, 'call', '--no-validate', TEXT, c.tool, c.args]);
    t.equal(r.code, c.ok ? 0 : 1, `${c.tool} ${c.args} exit code`);
    t.equal(r.stdout, c.result + '\n', `${c.tool} ${c.args} output`);
  }
  const fails = toolCases.find((x) => x.source === 'misbehave.c' && x.tool === 'always_fails')!;
  const f = await berm([...C, 'call', MISBEHAVE, 'always_fails']);
  t.equal(f.code, 1, 'a failed tool exits 1 (args default to {})');
  t.equal(f.stdout, fails.result + '\n');
  t.match(f.stderr, /always_fails failed/);
});

t.test('call reads - from stdin and prints JSON with --json', async (t) => {
  const c = toolCases.find((x) => x.source === 'text.c' && x.tool === 'stats' && x.ok)!;
  const r = await berm([...C, 'call', TEXT, c.tool, '-'], { input: c.args });
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, c.result + '\n');

  const j = await berm([...C, '--json', 'call', TEXT, c.tool, c.args]);
  t.equal(j.code, 0);
  t.match(JSON.parse(j.stdout), { status: 'ok', result: c.result, logs: [] });

  const fc = toolCases.find((x) => x.source === 'text.c' && !x.ok)!;
  const jf = await berm([...C, 'call', '--json', TEXT, fc.tool, fc.args]);
  t.equal(jf.code, 1);
  t.match(JSON.parse(jf.stdout), { status: 'failed', message: fc.result });
});

t.test('call: bad input exits 2 without a stack trace', async (t) => {
  const unknown = await berm([...C, 'call', TEXT, 'no_such_tool']);
  t.equal(unknown.code, 2);
  t.match(unknown.stderr, /no tool named no_such_tool/);
  t.match(unknown.stderr, /stats/, 'names the tools there are');
  t.ok(noStack(unknown.stderr));

  const notJson = await berm([...C, 'call', TEXT, 'stats', '{values:']);
  t.equal(notJson.code, 2);
  t.match(notJson.stderr, /not valid JSON/);
  t.ok(noStack(notJson.stderr));

  const schema = await berm([...C, 'call', TEXT, 'stats', '{"values":"many"}']);
  t.equal(schema.code, 2);
  t.match(schema.stderr, /do not match the parameters of stats: \/values: must be array/);
  const missing = await berm([...C, 'call', TEXT, 'stats', '{"nope":1}']);
  t.equal(missing.code, 2, 'a required property is missing');
  // worded as bermd and MCP word it (docs/daemon.md): the property's path, then the problem
  t.match(missing.stderr, /parameters of stats: \/values: must have required property 'values'/);

  const elf = await berm([...C, 'call', truncated, 'stats']);
  t.equal(elf.code, 2);
  t.match(elf.stderr, `berm: ${truncated}: the program header table runs past the end of the file`);
  t.ok(noStack(elf.stderr));

  const j = await berm([...C, '--json', 'call', TEXT, 'no_such_tool']);
  t.equal(j.code, 2);
  t.match(JSON.parse(j.stdout), { status: 'error', message: /no tool named/ });

  const mem = await berm([...C, '--memory', '3M', 'call', TEXT, 'stats']);
  t.equal(mem.code, 2);
  t.match(mem.stderr, /power of two/);
});

t.test('call --verbose shows compile timings', async (t) => {
  const c = toolCases.find((x) => x.source === 'text.c' && x.ok)!;
  const r = await berm([...C, 'call', '--verbose', TEXT, c.tool, c.args]);
  t.equal(r.code, 0);
  t.equal(r.stdout, c.result + '\n', 'stdout carries only the result');
  t.match(r.stderr, /cache hit, \d+ bytes of Wasm, total [\d.]+ ms/);
});

t.test('exec prints a0 and a1 as expected.json says', async (t) => {
  for (const c of rawCases.filter((x) => x.source === 'raw.c')) {
    const r = await berm([...C, 'exec', RAW, c.symbol, ...c.args]);
    t.equal(r.code, 0, `${c.symbol} ${c.args.join(' ')}: ${r.stderr}`);
    const m = /^a0=(0x[0-9a-f]{16}) a1=(0x[0-9a-f]{16})\n$/.exec(r.stdout);
    t.ok(m, r.stdout);
    if (c.returns >= 1) t.equal(m?.[1], c.a0, `${c.symbol}(${c.args.join(', ')}) a0`);
    if (c.returns >= 2) t.equal(m?.[2], c.a1, `${c.symbol}(${c.args.join(', ')}) a1`);
  }
});

t.test('exec: negative hex, --json, heap and log host calls', async (t) => {
  const c = rawCases.find((x) => x.symbol === 'raw_add' && x.args[0] === '0xffffffffffffffff')!;
  const r = await berm([...C, 'exec', '--json', RAW, 'raw_add', '-0x1', c.args[1]]);
  t.equal(r.code, 0, r.stderr);
  t.match(JSON.parse(r.stdout), { status: 'ok', symbol: 'raw_add', a0: c.a0 });

  const heap = rawCases.find((x) => x.symbol === 'hc_heap_sum')!;
  const h = await berm([...C, '--verbose', 'exec', HOSTCALLS, heap.symbol, ...heap.args]);
  t.equal(h.code, 0, h.stderr);
  t.match(h.stdout, `a0=${heap.a0} `);
  t.match(h.stderr, /^\[log\] hc_heap_sum filled$/m, '--verbose shows guest log lines');
  const quiet = await berm([...C, 'exec', HOSTCALLS, heap.symbol, ...heap.args]);
  t.equal(quiet.stderr, '', 'no log lines without --verbose');
});

t.test('exec: bad integers, too many, unknown symbol exit 2', async (t) => {
  for (const bad of [['12x'], ['0x1ffffffffffffffff'], ['-9223372036854775809'], ['1.5']]) {
    const r = await berm([...C, 'exec', RAW, 'raw_add', ...bad]);
    t.equal(r.code, 2, bad[0]);
    t.match(r.stderr, bad[0]);
    t.ok(noStack(r.stderr));
  }
  const many = await berm([...C, 'exec', RAW, 'raw_sum8', '1', '2', '3', '4', '5', '6', '7', '8', '9']);
  t.equal(many.code, 2);
  t.match(many.stderr, /at most 8/);
  const unknown = await berm([...C, 'exec', RAW, 'no_such_symbol']);
  t.equal(unknown.code, 2);
  t.match(unknown.stderr, /no function named no_such_symbol/);
});

t.test('exec: guest traps exit 3 naming the trap and the symbol', async (t) => {
  const traps = cases().traps.filter((c) => c.symbol !== undefined && c.source === 'misbehave.c');
  t.ok(traps.some((c) => c.symbol === 'bad_null_load'));
  for (const c of traps) {
    const r = await berm([...C, '--timeout', '3000', 'exec', MISBEHAVE, c.symbol!, ...(c.args as string[])]);
    t.equal(r.code, 3, `${c.symbol} exit code`);
    t.match(r.stderr, new RegExp(`guest trap ${c.trap}\\b`), `${c.symbol} trap name`);
    t.match(r.stderr, /at pc 0x[0-9a-f]+/);
    if (c.trap !== 'StackOverflow') t.match(r.stderr, c.symbol!, `${c.symbol} named`);
    t.ok(noStack(r.stderr));
    t.equal(r.stdout, '');
  }
  const j = await berm([...C, '--json', 'exec', MISBEHAVE, 'bad_null_load', '0']);
  t.equal(j.code, 3);
  t.match(JSON.parse(j.stdout), { status: 'trap', trap: 'MemoryFault', symbol: 'bad_null_load' });
});

t.test('exec --timeout 200 interrupts a loop without calls', async (t) => {
  const r = await berm([...C, 'exec', '--timeout', '200', MISBEHAVE, 'bad_loop_nocall', '1']);
  t.equal(r.code, 3);
  t.match(r.stderr, /guest trap Interrupted/);
  t.match(r.stderr, /bad_loop_nocall/);
  // the loop never ends by itself and the default timeout is 60 s: well under that, only
  // --timeout can have stopped it (process start and translation included, on a loaded machine)
  t.ok(r.ms < 30_000, `took ${r.ms.toFixed(0)} ms`);
});

t.test('--fuel ends a run with OutOfFuel', async (t) => {
  const r = await berm([...C, '--fuel', '100000', 'exec', MISBEHAVE, 'bad_loop_calls', '1']);
  t.equal(r.code, 3);
  t.match(r.stderr, /guest trap OutOfFuel/);
  const bad = await berm([...C, '--fuel', 'lots', 'exec', MISBEHAVE, 'bad_loop_calls', '1']);
  t.equal(bad.code, 2);
});

t.test('disasm prints what llvm-objdump printed', async (t) => {
  const golden = parseListing(
    readFileSync(join(ROOT, 'test', 'golden', 'fixtures', 'raw-gcc-O2.txt'), 'utf8'),
  );
  const want = new Map(golden.lines.map((l) => [l.address, l.text.replace(/ <[^>]*>$/, '')]));
  const symbols = [...new Set(rawCases.filter((c) => c.source === 'raw.c').map((c) => c.symbol))];
  for (const s of symbols.slice(0, 6)) {
    const r = await berm(['disasm', RAW, '--function', s]);
    t.equal(r.code, 0);
    const lines = r.stdout.split('\n');
    t.match(lines[0], new RegExp(`^[0-9a-f]{16} <${s}>:$`));
    const header = golden.headers.find((h) => h.name === s)!;
    t.equal(parseInt(lines[0].slice(0, 16), 16), header.address, `${s} address`);
    const ours = parseListing(r.stdout).lines;
    t.ok(ours.length > 0);
    for (const l of ours)
      t.equal(l.text.replace(/ <[^>]*>$/, ''), want.get(l.address), `${s} 0x${l.address.toString(16)}`);
  }
  const all = await berm(['disasm', RAW]);
  t.equal(all.code, 0);
  for (const s of symbols) t.match(all.stdout, `<${s}>:`);
  const none = await berm(['disasm', RAW, '-f', 'no_such_function']);
  t.equal(none.code, 2);
  t.match(none.stderr, /no function named no_such_function/);
});

t.test('new scaffolds a harness through scripts/new-harness', async (t) => {
  const dir = join(TMP, 'demo_tool');
  const r = await berm(['new', dir]);
  if (existsSync(join(ROOT, 'scripts', 'new-harness'))) {
    t.equal(r.code, 0, r.stderr);
    t.ok(existsSync(join(dir, 'demo_tool.c')));
    const again = await berm(['new', join(TMP, 'not a name')]);
    t.equal(again.code, 2);
    t.match(again.stderr, "'not a name' is not a valid C identifier");
    t.match(again.stderr, "name the folder 'not_a_name'", 'the message proposes a name that works');
    const existing = await berm(['new', dir]);
    t.equal(existing.code, 2, 'a folder that is there already is refused');
    t.equal(existing.stderr.trim().split('\n').length, 1, `one line: ${existing.stderr}`);
    t.match(existing.stderr, /^berm: .*demo_tool already exists and is not an empty folder/);
  } else {
    t.equal(r.code, 4);
    t.match(r.stderr, /scaffold script/);
  }
});

t.test(
  'a failed write to stdout exits non-zero with a message; a reader that stops early does not',
  async (t) => {
    // /dev/full: every write fails with ENOSPC, synchronously (a file), reported by the stream later
    const runs = [
      [...C, 'call', TEXT, 'stats', '{"values":[1,2]}'],
      [...C, '--json', 'call', TEXT, 'stats', '{"values":[1,2]}'],
      [...C, 'exec', RAW, 'raw_add', '1', '2'],
      [...C, 'disasm', TEXT],
    ];
    for (const args of runs) {
      const full = openSync('/dev/full', 'w');
      try {
        const r = spawnSync(process.execPath, ['--stack-size=4000', join(ROOT, 'bin', 'berm.js'), ...args], {
          cwd: ROOT,
          encoding: 'utf8',
          stdio: ['ignore', full, 'pipe'],
        });
        t.equal(r.status, 1, `${args.slice(2).join(' ')}: exit 1`);
        t.match(r.stderr, /^berm: writing to stdout failed: ENOSPC/m, 'says why');
        t.ok(noStack(r.stderr), 'no stack trace');
      } finally {
        closeSync(full);
      }
    }
    // disasm prints ~160 KB, more than a pipe holds: head's exit breaks the pipe under a write
    const head = spawnSync(
      'bash',
      [
        '-c',
        'set -o pipefail; "$0" --stack-size=4000 bin/berm.js --cache-dir "$1" disasm "$2" | head -1',
        process.execPath,
        CACHE,
        TEXT,
      ],
      { cwd: ROOT, encoding: 'utf8' },
    );
    t.equal(head.status, 0, head.stderr);
    t.match(head.stdout, /^[0-9a-f]{16} <\w+>:\n$/);
    t.equal(head.stderr, '');
    // a reader gone before the first write: EPIPE on it, whatever the output's size
    const early = spawn(
      process.execPath,
      ['--stack-size=4000', join(ROOT, 'bin', 'berm.js'), ...C, 'call', TEXT, 'stats', '{"values":[1,2]}'],
      {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    early.stdout.destroy();
    let stderr = '';
    early.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const code = await new Promise((done) => early.on('close', done));
    t.equal(code, 0, stderr);
    t.equal(stderr, '');
  },
);

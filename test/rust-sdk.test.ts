// The Rust guest SDK end to end: scaffold a crate with `berm new --lang rust`, build it and the
// SDK's demo harness with Debian's toolchain (/usr/bin/cargo, build-std, ld.lld), run the host tests
// with `make test`, and call the ELFs through `berm call`. Expected values come from the harness
// sources (the template's format string, the demo's panic! text) and docs/capabilities.md, not from
// a previous run. The builds share one cargo target dir (core and alloc are built once, then reused
// by later runs on the same machine).
import { execFile, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { readElf } from '../src/elf/reader.js';
import { parseManifest } from '../src/harness/manifest.js';
import { runBerm } from './helpers/berm-cli.js';

const ROOT = join(import.meta.dirname, '..');
const CARGO = '/usr/bin/cargo';
const DEMO = join(ROOT, 'guest-sdk', 'rust', 'examples', 'demo');
const RNOTES = join(ROOT, 'guest-sdk', 'rust', 'examples', 'notes');
const CNOTES = join(ROOT, 'guest-sdk', 'examples', 'notes');
const HAVE_C = existsSync('/usr/bin/riscv64-unknown-elf-gcc');

if (!existsSync(CARGO) || !existsSync('/usr/bin/rustc')) {
  if (process.env.CI) {
    t.fail(`${CARGO} or /usr/bin/rustc is missing: .ci/run installs rustc-web, cargo-web and rust-web-src`);
  } else {
    t.plan(0, `skipped: ${CARGO} is missing (apt-get install rustc-web cargo-web rust-web-src lld)`);
  }
} else {
  const TMP = mkdtempSync(join(tmpdir(), 'berm-rust-sdk-'));
  const CACHE = join(TMP, 'cache');
  const TARGET = process.env.BERM_RUST_TARGET_DIR ?? join(tmpdir(), 'berm-rust-target');
  t.teardown(() => rmSync(TMP, { recursive: true, force: true }));

  /** `make ARGS` with the shared target dir; rejects with the output when it fails. */
  const make = (args: string[]): Promise<string> =>
    new Promise((resolve, reject) => {
      execFile(
        'make',
        ['--no-print-directory', ...args],
        { env: { ...process.env, CARGO_TARGET_DIR: TARGET }, maxBuffer: 64 << 20, timeout: 20 * 60_000 },
        (err, stdout, stderr) =>
          err
            ? reject(new Error(`make ${args.join(' ')}: ${err.message}\n${stderr}`))
            : resolve(stdout + stderr),
      );
    });

  const hello = join(TMP, 'hello');
  const demoElf = join(TMP, 'demo', 'demo.elf');
  const demo0Elf = join(TMP, 'demo-abi0', 'demo.elf');

  t.before(async () => {
    const made = await runBerm(['new', hello, '--lang', 'rust'], CACHE);
    if (made.code !== 0) throw new Error(`berm new failed: ${made.stderr}`);
    const t0 = performance.now();
    await make(['-C', hello]);
    const t1 = performance.now();
    await make(['-C', DEMO, `BUILD=${join(TMP, 'demo')}`]);
    await make(['-C', DEMO, `BUILD=${join(TMP, 'demo-abi0')}`, 'BERM_ABI=0']);
    await make(['-C', RNOTES, `BUILD=${join(TMP, 'rnotes')}`]);
    const t2 = performance.now();
    if (HAVE_C) await make(['-C', CNOTES, `BUILD=${join(TMP, 'cnotes')}`]);
    t.comment(
      `builds: template ${Math.round(t1 - t0)} ms (incl. core/alloc when not cached), demo ABI 1 + 0 ${Math.round(t2 - t1)} ms`,
    );
  });

  t.test('the scaffolded crate builds, passes its host test and answers through berm call', async (t) => {
    const out = await make(['-C', hello, 'test']);
    t.match(out, /test tests::greet_returns_the_greeting \.\.\. ok/);
    const r = await runBerm(['call', join(hello, 'build', 'hello.elf'), 'greet', '{"name":"ada"}'], CACHE);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout.trim(), '{"greeting":"hello","args":{"name":"ada"}}');
  });

  t.test('the manifest is emitted at build time into a non-allocated .berm.abi', async (t) => {
    const img = readElf(new Uint8Array(readFileSync(demoElf)));
    const m = parseManifest(img.manifest);
    t.equal(m.abi_version, 1);
    t.same(
      m.tools.map((x) => x.name),
      ['greet', 'boom', 'read', 'now', 'nothing'],
    );
    t.same(m.tools[2].parameters, {
      type: 'object',
      properties: { path: { type: 'string' } },
      required: ['path'],
    });
    const sec = img.sections.find((s) => s.name === '.berm.abi');
    t.ok(sec && (sec.flags & 2) === 0, 'not SHF_ALLOC');
    const m0 = parseManifest(readElf(new Uint8Array(readFileSync(demo0Elf))).manifest);
    t.equal(m0.abi_version, 0);
  });

  t.test('a panic comes back as a failure carrying the panic message', async (t) => {
    for (const elf of [demoElf, demo0Elf]) {
      const r = await runBerm(['call', elf, 'boom', '{}'], CACHE);
      t.equal(r.code, 1, `exit 1: the tool failed (${r.stderr})`);
      // the demo's `panic!("boom after {} bytes", n)` at src/main.rs line 26, with "{}" (2 bytes)
      t.equal(r.stdout.trim(), 'panicked at src/main.rs:26:5: boom after 2 bytes');
    }
    const r = await runBerm(['call', demo0Elf, 'greet', '{"name":"x"}'], CACHE);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout.trim(), '{"greeting":"hello","args":{"name":"x"}}', 'ABI 0 returns the result in a0/a1');
  });

  t.test('a capability error is an Err, not a trap', async (t) => {
    const root = join(TMP, 'root');
    const sha = createHash('sha256').update(readFileSync(demoElf)).digest('hex');
    const decl = join(TMP, 'harnesses.toml');
    writeFileSync(
      decl,
      `[[harnesses]]\nname = "demo"\nsource = ${JSON.stringify(demoElf)}\nsha256 = "${sha}"\ncapabilities = ["fs"]\nroot = ${JSON.stringify(root)}\n`,
    );
    mkdirSync(root, { recursive: true });
    writeFileSync(join(root, 'a.txt'), 'hello\n');
    let r = await runBerm(['call', '--config', decl, 'demo', 'read', '{"path":"a.txt"}'], CACHE);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout.trim(), '6 bytes');
    r = await runBerm(['call', '--config', decl, 'demo', 'read', '{"path":"missing.txt"}'], CACHE);
    t.equal(r.code, 0, r.stderr);
    t.match(r.stdout, /^Err\(failed\): berm\.fs\.read: .*missing\.txt.*no such file/);
    r = await runBerm(['call', '--config', decl, 'demo', 'read', '{"path":"../x"}'], CACHE);
    t.equal(r.code, 0, r.stderr);
    t.match(r.stdout, /^Err\(refused\): /);
    // Ungranted, the same call traps UnknownHostCall (exit 3): the Err above came from the host.
    r = await runBerm(['call', demoElf, 'read', '{"path":"a.txt"}'], CACHE);
    t.equal(r.code, 3);
    // named, with the way out: a plain call loads no capability, yet the trap says which it was
    t.match(
      r.stderr,
      /UnknownHostCall: unknown host call 0x[0-9a-f]{16} \(berm\.fs\.read\): .*call --config/,
    );
  });

  t.test('a capability call without fields and an empty result pass empty slices cleanly', async (t) => {
    // An empty Rust slice or Vec has a dangling, non-null pointer (0x1 for bytes) below the image:
    // the host must read and write zero bytes there without a MemoryFault.
    const sha = createHash('sha256').update(readFileSync(demoElf)).digest('hex');
    const decl = join(TMP, 'clock.toml');
    writeFileSync(
      decl,
      `[[harnesses]]\nname = "demo"\nsource = ${JSON.stringify(demoElf)}\nsha256 = "${sha}"\ncapabilities = ["clock"]\n`,
    );
    const before = Date.now();
    let r = await runBerm(['call', '--config', decl, 'demo', 'now', '{}'], CACHE);
    const after = Date.now();
    t.equal(r.code, 0, r.stderr);
    const ms = Number(r.stdout.trim());
    t.ok(ms >= before && ms <= after, `berm.now ${r.stdout.trim()} within [${before}, ${after}]`);
    r = await runBerm(['call', demoElf, 'nothing', '{}'], CACHE);
    t.equal(r.code, 0, r.stderr);
    t.equal(r.stdout.trim(), '');
  });

  t.test('--no-validate passes stdin undecoded: arguments that are not UTF-8 fail the call', async (t) => {
    // rust/README.md: "Arguments that are not UTF-8 fail the call first" (the SDK, before the handler)
    const r = spawnSync(
      process.execPath,
      ['--stack-size=4000', join(ROOT, 'bin', 'berm.js'), 'call', '--no-validate', demoElf, 'greet', '-'],
      {
        input: Buffer.from([0xff, 0x7b, 0x7d]),
        env: { ...process.env, BERM_CACHE_DIR: CACHE },
        encoding: 'utf8',
        timeout: 120_000,
      },
    );
    t.equal(r.status, 1, r.stderr);
    t.equal(r.stdout.trim(), 'the arguments are not valid UTF-8');
  });

  t.test('the same harness in C and Rust answers a shared case set identically', async (t) => {
    if (!HAVE_C) {
      if (process.env.CI)
        t.fail('riscv64-unknown-elf-gcc is missing: .ci/run installs gcc-riscv64-unknown-elf');
      else t.pass('skipped: riscv64-unknown-elf-gcc is missing');
      return;
    }
    const root = join(TMP, 'notes-root');
    mkdirSync(root, { recursive: true });
    writeFileSync(join(root, '"a.txt"'), 'twelve bytes'); // the tool's path is the raw JSON text
    const decl = join(TMP, 'notes.toml');
    const entry = (name: string, elf: string): string =>
      `[[harnesses]]\nname = "${name}"\nsource = ${JSON.stringify(elf)}\n` +
      `sha256 = "${createHash('sha256').update(readFileSync(elf)).digest('hex')}"\n` +
      `capabilities = ["storage", "fs"]\nroot = ${JSON.stringify(root)}\n` +
      `database = ${JSON.stringify(join(TMP, `${name}.sqlite`))}\n`;
    writeFileSync(
      decl,
      entry('cnotes', join(TMP, 'cnotes', 'notes.elf')) + entry('rnotes', join(TMP, 'rnotes', 'notes.elf')),
    );
    // In order: each case runs on a fresh process; storage persists in each harness's database.
    const cases: [string, string][] = [
      ['note_get', '{}'], // no note yet: a failure
      ['note_put', '{"text":"first, \\"quoted\\" ünïcode"}'],
      ['note_get', '{}'],
      ['note_put', '{}'],
      ['note_get', '{}'],
      ['file_size', '"a.txt"'], // reads the file named "a.txt", quotes included
      ['file_size', '"b.txt"'], // no such file: an fs error
      ['file_size', '"x/../../y"'], // refused: '..'
      ['heartbeat_start', '{}'], // schedule not granted: both trap UnknownHostCall
    ];
    for (const [tool, args] of cases) {
      const c = await runBerm(['call', '--config', decl, 'cnotes', tool, args], CACHE);
      const r = await runBerm(['call', '--config', decl, 'rnotes', tool, args], CACHE);
      t.same(
        { code: r.code, stdout: r.stdout },
        { code: c.code, stdout: c.stdout },
        `${tool} ${args}: exit ${c.code}, ${JSON.stringify(c.stdout.trim().slice(0, 80))}`,
      );
    }
  });
}

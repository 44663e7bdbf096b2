import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t from 'tap';
import {
  DeclarationError,
  imageIdentity,
  linkerEntries,
  loadDeclarations,
  parseDeclarations,
} from '../src/config/declarations.js';
import { closeStores } from '../src/capabilities/storage/index.js';

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

function setup() {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'berm-cfg-')));
  const elf = new Uint8Array([0x7f, 0x45, 0x4c, 0x46, 1, 2, 3]);
  fs.mkdirSync(path.join(dir, 'bin'));
  fs.mkdirSync(path.join(dir, 'work'));
  fs.writeFileSync(path.join(dir, 'bin', 'os.elf'), elf);
  const file = path.join(dir, 'berm.toml');
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return { dir, elf, file, hash: sha(elf) };
}

t.teardown(closeStores);

t.test('a good file', async (t) => {
  const { dir, elf, file, hash } = setup();
  fs.writeFileSync(
    file,
    `# operator declarations
[[harnesses]]
name = "os"
source = "bin/os.elf"
sha256 = "${hash.toUpperCase()}"
capabilities = ["fs", "exec", "clock"]
root = "work"

[[harnesses]]
name = "search"
source = "bin/os.elf"
sha256 = "${hash}"
capabilities = ["http", "clock", "call", "storage"]
hosts = ["API.example.org", "*.wikipedia.org"]
callees = ["os"]
`,
  );
  const d = loadDeclarations(file);
  t.same(d.errors, []);
  t.equal(d.harnesses.length, 2);
  const [osH, search] = d.harnesses;
  t.match(osH, {
    name: 'os',
    source: path.join(dir, 'bin/os.elf'),
    sha256: hash,
    capabilities: ['clock', 'exec', 'fs'],
    grant: { root: path.join(dir, 'work') },
    line: 2,
  });
  t.same([...osH!.elf!], [...elf]);
  t.same(search!.grant, { hosts: ['*.wikipedia.org', 'api.example.org'], callees: ['os'] });
  t.equal(search!.line, 9);

  // only granted capabilities are linked, with their aliases
  const names = [...linkerEntries(osH!).keys()].sort();
  t.same(names, [
    'berm.clock.offset',
    'berm.exec.run',
    'berm.fs.glob',
    'berm.fs.grep',
    'berm.fs.read',
    'berm.fs.write',
    'berm.now',
    'crabtalk.exec.run',
    'crabtalk.fs.read',
    'crabtalk.fs.write',
  ]);
  t.notOk(linkerEntries(osH!).has('berm.http.fetch'), 'http is absent, not refused');
  // handlers are bound to the declared grant
  const write = linkerEntries(osH!).get('berm.fs.write')!;
  const enc = (s: string) => new TextEncoder().encode(s);
  t.same(write([enc('f.txt'), enc('hi')]), { fields: [enc('2')] });
  t.equal(fs.readFileSync(path.join(dir, 'work', 'f.txt'), 'utf8'), 'hi');
  const call = linkerEntries(search!, {
    depth: 2,
    callTool: (h, tool, a, depth) => ({ fields: [enc(`${h}.${tool}(${a})@${depth}`)] }),
  }).get('berm.call')!;
  t.same(call([enc('os'), enc('run'), enc('{}')]), { fields: [enc('os.run({})@3')] });

  // identity: same ELF + grant -> same image, whatever the name; any argument changes it
  const id = imageIdentity(osH!, elf);
  t.match(id, /^[0-9a-f]{64}$/);
  t.equal(imageIdentity({ ...osH!, name: 'renamed' } as typeof osH & object, elf), id);
  t.equal(
    imageIdentity({ ...osH!, capabilities: ['fs', 'exec', 'clock'] }, elf),
    id,
    'order does not matter',
  );
  t.not(imageIdentity({ ...osH!, grant: { root: '/elsewhere' } }, elf), id);
  t.not(imageIdentity({ ...osH!, capabilities: ['fs', 'exec'] }, elf), id);
  t.not(imageIdentity(osH!, new Uint8Array([...elf, 0])), id);
});

t.test('errors carry file, line and fix', async (t) => {
  const { file, hash } = setup();
  const text = `[[harnesses]]
name = "a.b"
source = "bin/os.elf"
sha256 = "${hash}"

[[harnesses]]
name = "noroot"
source = "bin/os.elf"
sha256 = "${hash}"
capabilities = ["fs"]

[[harnesses]]
name = "badcap"
source = "bin/os.elf"
sha256 = "${hash}"
capabilities = ["teleport"]

[[harnesses]]
name = "badsha"
source = "bin/os.elf"
sha256 = "xyz"

[[harnesses]]
name = "mismatch"
source = "bin/os.elf"
sha256 = "${'0'.repeat(64)}"

[[harnesses]]
name = "mismatch"
source = "bin/missing.elf"
sha256 = "${hash}"

[[harnesses]]
name = "extra"
source = "bin/os.elf"
sha256 = "${hash}"
colour = "blue"

[[harnesses]]
name = "nosource"
sha256 = "${hash}"

[[harnesses]]
name = "url"
source = "https://example.org/x.elf"
sha256 = "${hash}"

[[harnesses]]
name = "badhost"
source = "bin/os.elf"
sha256 = "${hash}"
capabilities = ["http"]
hosts = ["https://api.example.org:443"]

[[harnesses]]
name = "stray"
source = "bin/os.elf"
sha256 = "${hash}"
hosts = ["api.example.org"]

[[harnesses]]
name = "good"
source = "bin/os.elf"
sha256 = "${hash}"
capabilities = ["http"]
`;
  fs.writeFileSync(file, text);
  const d = loadDeclarations(file);
  t.same(
    d.harnesses.map((h) => h.name),
    ['good'],
  );
  t.same(d.harnesses[0]!.grant, {}, 'http with no hosts reaches no host');
  const got = d.errors.map((e) => [e.line, e.problem, e.fix]);
  const expect: [number, RegExp, RegExp][] = [
    [2, /name contains a dot/, /rename it, e.g. "a-b"/],
    [10, /fs is granted without a root/, /add root =/],
    [16, /unknown capability "teleport"/, /use one of call, clock, exec, fs, http, schedule, storage, ws/],
    [21, /sha256 is missing or not 64 hex/, /sha256sum/],
    [26, /sha256 mismatch: .* hashes to [0-9a-f]{64}/, /set sha256 to that value/],
    [29, /duplicate name \(first declared at line 23\)/, /its own name/],
    [30, /source .*missing\.elf cannot be read \(no such file \(ENOENT\)\)/, /build the harness/],
    [37, /unknown key "colour"/, /known keys are/],
    [39, /source is missing/, /add source =/],
    [45, /source is a URL/, /never downloads code/],
    [53, /host "https:\/\/api\.example\.org:443" is not a host name/, /bare host name/],
    [59, /hosts is set but http or ws is not granted/, /add "http" or "ws" to capabilities, or remove hosts/],
  ];
  t.equal(got.length, expect.length, JSON.stringify(got, null, 1));
  expect.forEach(([line, problem, fix], i) => {
    t.equal(got[i]?.[0], line, `line of ${problem}: ${got[i]?.[0]}`);
    t.match(got[i]?.[1], problem);
    t.match(got[i]?.[2], fix);
  });
  for (const e of d.errors) {
    t.type(e, DeclarationError);
    t.equal(e.file, file);
    t.match(e.message, new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:\\d+: .*; fix: `));
  }
});

t.test('syntax and top-level errors throw', async (t) => {
  const { file } = setup();
  t.throws(() => parseDeclarations('[[harnesses]]\nname = "x\n', file), {
    name: 'DeclarationError',
    line: 2,
    problem: /TOML syntax/,
  });
  t.throws(() => parseDeclarations('\n\n[settings]\nx = 1\n', file), {
    name: 'DeclarationError',
    line: 3,
    problem: /unknown top-level key "settings"/,
  });
  // [limits] belongs to the runtime (src/runtime/limit-sources.ts), which reads it from the same file
  t.same(parseDeclarations('[limits]\ntimeoutMs = 5\n', file).harnesses, []);
  t.throws(() => parseDeclarations('harnesses = 3\n', file), {
    name: 'DeclarationError',
    problem: /not an array of tables/,
  });
  t.throws(() => loadDeclarations(path.join(path.dirname(file), 'nope.toml')), {
    name: 'DeclarationError',
    line: 0,
    problem: /ENOENT/,
  });
  t.same(parseDeclarations('', file), { file, harnesses: [], errors: [] });
});

t.test('examples lint clean', async (t) => {
  const dir = path.resolve(import.meta.dirname, '..', 'examples');
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.toml'));
  t.ok(files.length > 0);
  for (const f of files) {
    const d = loadDeclarations(path.join(dir, f), { checkFiles: false });
    t.same(d.errors, [], f);
    t.ok(d.harnesses.length > 0, f);
  }
});

t.test('a root that is a symlink to / (or under /proc) is refused like root = "/"', async (t) => {
  const { dir, file, hash } = setup();
  fs.symlinkSync('/', path.join(dir, 'rootlink'));
  fs.symlinkSync('/proc/self', path.join(dir, 'proclink'));
  const entry = (name: string, root: string) =>
    `[[harnesses]]\nname = "${name}"\nsource = "bin/os.elf"\nsha256 = "${hash}"\ncapabilities = ["fs"]\nroot = "${root}"\n`;
  fs.writeFileSync(file, entry('a', 'rootlink') + entry('b', 'proclink') + entry('c', '/'));
  const d = loadDeclarations(file);
  t.same(d.harnesses, []);
  t.same(
    d.errors.map((e) => [e.line, e.problem]),
    [
      [6, `harness "a": root ${dir}/rootlink resolves to /, which exposes the host`],
      [
        12,
        `harness "b": root ${dir}/proclink resolves to ${fs.realpathSync('/proc/self')}, which exposes the host`,
      ],
      [18, 'harness "c": root / exposes the host'],
    ],
  );
});

t.test('a storage database whose folder does not exist is refused at load', async (t) => {
  const { dir, file, hash } = setup();
  const entry = (name: string, db: string) =>
    `[[harnesses]]\nname = "${name}"\nsource = "bin/os.elf"\nsha256 = "${hash}"\ncapabilities = ["storage"]\ndatabase = "${db}"\n`;
  fs.writeFileSync(
    file,
    entry('nofolder', 'state/kv.sqlite') + entry('isdir', 'bin') + entry('fine', 'kv.sqlite'),
  );
  const d = loadDeclarations(file);
  t.same(
    d.harnesses.map((h) => [h.name, h.grant.database]),
    [['fine', path.join(dir, 'kv.sqlite')]],
  );
  t.same(
    d.errors.map((e) => [e.line, e.problem, e.fix]),
    [
      [
        6,
        `harness "nofolder": database folder ${dir}/state is not an existing directory`,
        `create it (mkdir -p ${dir}/state) or correct the path`,
      ],
      [
        12,
        `harness "isdir": database ${dir}/bin is a directory`,
        'name a file, e.g. database = "state/kv.sqlite"',
      ],
    ],
  );
});

t.test('unknown keys are located as text, never compiled into a RegExp', async (t) => {
  const { file, hash } = setup();
  // "a(" is not a valid RegExp; "(a+)+$" followed by many a's and a "!" backtracks for ages.
  const evil = '(a+)+$' + 'a'.repeat(40) + '!';
  const text =
    `[[harnesses]]\nname = "k"\nsource = "bin/os.elf"\nsha256 = "${hash}"\n"a(" = 1\n` + `'${evil}' = 2\n`;
  const started = Date.now();
  const d = parseDeclarations(text, file, { checkFiles: false });
  t.same(
    d.errors.map((e) => [e.line, e.problem]),
    [
      [5, 'harness "k": unknown key "a("'],
      [6, `harness "k": unknown key ${JSON.stringify(evil)}`],
    ],
  );
  t.ok(Date.now() - started < 5_000, 'no backtracking blow-up');
  t.throws(() => parseDeclarations(`"x(" = 1\n`, file), {
    name: 'DeclarationError',
    line: 1,
    problem: /unknown top-level key "x\("/,
  });
  t.throws(() => parseDeclarations(`\n[["y["]]\nz = 1\n`, file), {
    name: 'DeclarationError',
    line: 2,
    problem: /unknown top-level key "y\["/,
  });
});

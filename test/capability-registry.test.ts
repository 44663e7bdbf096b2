// Capabilities as data: the registry drives the declaration keys, the grant schemas (ajv), the
// linker, the image identity and the host-call name table.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t from 'tap';
import {
  CAPABILITIES,
  DEFAULT_LIMITS,
  defineCapability,
  grantKeyOwners,
  limitsOf,
  ok,
  registerCapability,
} from '../src/capabilities/index.js';
import {
  ENTRY_KEYS,
  entryKeys,
  imageIdentity,
  linkerEntries,
  parseDeclarations,
} from '../src/config/declarations.js';
import { hostCallName } from '../src/util/host-call-names.js';
import { fnv1a64 } from '../src/util/fnv.js';

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

function setup() {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'berm-reg-')));
  const elf = new Uint8Array([0x7f, 0x45, 0x4c, 0x46, 9]);
  fs.writeFileSync(path.join(dir, 'h.elf'), elf);
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return {
    dir,
    elf,
    hash: createHash('sha256').update(elf).digest('hex'),
    file: path.join(dir, 'berm.toml'),
  };
}

t.test('declaration keys and their owners come from the grant schemas', async (t) => {
  t.same(Object.fromEntries(grantKeyOwners()), {
    root: ['exec', 'fs'],
    hosts: ['http', 'ws'],
    database: ['storage'],
    callees: ['call'],
  });
  t.same([...ENTRY_KEYS].sort(), [
    'callees',
    'capabilities',
    'database',
    'hosts',
    'name',
    'root',
    'sha256',
    'source',
  ]);
  t.equal(DEFAULT_LIMITS.fsReadMax, 4 * 1024 * 1024);
  t.equal(DEFAULT_LIMITS.maxCallDepth, 4);
  for (const c of Object.values(CAPABILITIES)) {
    for (const w of c.wireNames) t.equal(hostCallName(fnv1a64(w)), w, `${c.name}: ${w} is a known host call`);
  }
});

t.test('a definition is checked', async (t) => {
  t.throws(() => defineCapability({ name: 'a.b', calls: {} }), /name "a.b" is malformed/);
  t.throws(() => defineCapability({ name: 'x', calls: { NoDots: () => ok() } }), /wire name "NoDots"/);
  t.throws(
    () => defineCapability({ name: 'x', calls: {}, limits: { fsReadMax: 1 } }),
    /limit fsReadMax is already declared by fs/,
  );
  t.throws(() => defineCapability({ name: 'x', calls: {}, identity: ['nope'] }), /identity key nope/);
  const dup = defineCapability({ name: 'fs', calls: {} });
  t.throws(() => registerCapability(dup), /already registered/);
  const clash = defineCapability({ name: 'clash', calls: { 'berm.now': () => ok() } });
  t.throws(() => registerCapability(clash), /berm.now is already answered by clock/);
  const rootClash = defineCapability({
    name: 'rootclash',
    calls: {},
    grant: { schema: { type: 'object', properties: { root: { type: 'integer' } } } },
  });
  t.throws(() => registerCapability(rootClash), /grant key root is owned by (exec|fs) with another schema/);
});

t.test('a capability added as one module: keys, schema, linking and identity follow', async (t) => {
  const { dir, elf, hash, file } = setup();
  // Everything about the capability is in this one object.
  const ECHO_LIMITS = { echoMaxBytes: 8 };
  const echo = defineCapability({
    name: 'echo',
    calls: {
      'test.echo.say': (fields, ctx) => {
        const text = dec(fields[0] ?? new Uint8Array());
        const max = limitsOf(ctx, ECHO_LIMITS).echoMaxBytes;
        if (text.length > max) return { refused: `test.echo.say: longer than ${max}` };
        return ok(`${String(ctx.grant.prefix)}${text}`);
      },
    },
    grant: {
      schema: {
        type: 'object',
        properties: { prefix: { type: 'string', maxLength: 4 }, loud: { type: 'boolean' } },
        required: ['prefix'],
      },
      fixes: { prefix: 'write prefix = "> "' },
    },
    limits: ECHO_LIMITS,
    identity: ['prefix'],
  });
  registerCapability(echo);
  t.ok(entryKeys().includes('prefix'));
  t.equal(hostCallName(fnv1a64('test.echo.say')), 'test.echo.say');

  const entry = (name: string, extra: string) =>
    `[[harnesses]]\nname = "${name}"\nsource = "h.elf"\nsha256 = "${hash}"\n${extra}\n`;
  fs.writeFileSync(file, '');
  const d = parseDeclarations(
    entry('good', 'capabilities = ["echo"]\nprefix = "> "') +
      entry('missing', 'capabilities = ["echo"]') +
      entry('toolong', 'capabilities = ["echo"]\nprefix = "12345"') +
      entry('wrongtype', 'capabilities = ["echo"]\nprefix = "a"\nloud = "yes"') +
      entry('stray', 'prefix = "a"'),
    file,
  );
  t.same(
    d.harnesses.map((h) => h.name),
    ['good'],
  );
  t.same(
    d.errors.map((e) => [e.line, e.problem, e.fix]),
    [
      [11, 'harness "missing": echo is granted without a prefix', 'write prefix = "> "'],
      [17, 'harness "toolong": prefix must NOT have more than 4 characters', 'write prefix = "> "'],
      [24, 'harness "wrongtype": loud must be boolean', 'correct loud (see docs/capabilities.md, "echo")'],
      [
        29,
        'harness "stray": prefix is set but echo is not granted',
        'add "echo" to capabilities, or remove prefix',
      ],
    ],
  );
  const good = d.harnesses[0]!;
  t.same(good.grant, { prefix: '> ' });
  const say = linkerEntries(good, { limits: { echoMaxBytes: 3 } }).get('test.echo.say')!;
  t.same(say([enc('hi')]), ok('> hi'));
  t.same(say([enc('long')]), { refused: 'test.echo.say: longer than 3' });

  const id = imageIdentity(good, elf);
  t.not(imageIdentity({ ...good, grant: { prefix: '< ' } }, elf), id, 'an identity key changes the image');
  t.equal(
    imageIdentity({ ...good, grant: { prefix: '> ', loud: true } }, elf),
    id,
    'a key left out does not',
  );
  void dir;
});

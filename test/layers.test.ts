// Enforces the layer table of docs/architecture.md: a module imports only from its own layer or
// lower ones, capabilities never import each other, Binaryen is imported only by the translator, and
// the runtime imports nothing of HTTP, MCP or protobuf.
import t from 'tap';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const SRC = resolve(import.meta.dirname, '..', 'src');
const LAYER: Record<string, number> = {
  util: 0,
  types: 0,
  // the browser page: bundled apart, imports nothing of the server (checked below)
  workbench: 0,
  // the types that cross layers (HTTP shapes, wake info, stats, authority, outcomes)
  contract: 0,
  // the synchronous bridge: a thread that must block runs asynchronous work in a worker
  sync: 0,
  elf: 1,
  riscv: 1,
  wasm: 1,
  oci: 1,
  translate: 2,
  cache: 3,
  engine: 4,
  wire: 5,
  harness: 6,
  // the index of published harnesses: entries, JSON Lines files, search, sources, the service
  index: 6.5,
  // the runtime's persistence: the store interface, SQLite and PostgreSQL backends, the journal
  store: 6.8,
  capabilities: 7,
  config: 8,
  runtime: 9,
  protocol: 10,
  // assembleRuntime: the store, the queue and the protocol door, one way for bermd and berm worker
  assembly: 10.5,
  cli: 11,
  // the library entry (`import ... from 'berm'`): re-exports the engine and harness layers
  'index.ts': 15,
  // the top: nothing imports the daemon, and the daemon never imports the CLI (checked below)
  daemon: 20,
};

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}

const importRe = /(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;

t.test('every src folder has a layer', async (t) => {
  for (const n of readdirSync(SRC)) t.ok(n in LAYER, `src/${n} is in the layer table`);
});

t.test('imports point down the layer table', async (t) => {
  let checked = 0;
  for (const file of files(SRC)) {
    const rel = relative(SRC, file);
    const [folder, sub] = rel.split('/');
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(importRe)) {
      const spec = m[1] ?? m[2];
      if (folder === 'runtime') {
        t.notOk(
          /^(node:)?(http|https|http2|net)$|^@modelcontextprotocol\/|^protobufjs|^undici|^pg$/.test(spec),
          `${rel}: the runtime knows nothing of HTTP, MCP, protobuf or a database server (imports ${spec})`,
        );
      }
      if (spec === 'binaryen') {
        t.equal(folder, 'translate', `${rel}: only src/translate may import binaryen`);
        continue;
      }
      if (spec === 'protobufjs' || spec.startsWith('protobufjs/')) {
        t.equal(folder, 'protocol', `${rel}: only src/protocol may import protobufjs`);
        continue;
      }
      if (!spec.startsWith('.')) continue;
      const target = relative(SRC, resolve(dirname(file), spec));
      const [tFolder, tSub] = target.split('/');
      checked++;
      t.ok(
        LAYER[tFolder] <= LAYER[folder],
        `${rel} imports ${target}: layer ${tFolder} (${LAYER[tFolder]}) is above ${folder} (${LAYER[folder]})`,
      );
      if (
        folder === 'capabilities' &&
        tFolder === 'capabilities' &&
        sub !== undefined &&
        tSub !== undefined
      ) {
        const own = sub.replace(/\.ts$/, '');
        const other = tSub.replace(/\.(ts|js)$/, '');
        const shared = ['types', 'common', 'index', 'registry', 'limits'];
        t.ok(
          own === other || shared.includes(other) || shared.includes(own),
          `${rel} imports capability ${target}`,
        );
      }
    }
  }
  t.ok(checked > 0, 'some relative imports were checked');
});

t.test('the contract imports nothing of ours; its types are declared nowhere else', async (t) => {
  const names = new Set<string>();
  for (const file of files(join(SRC, 'contract'))) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(importRe)) {
      const spec = m[1] ?? m[2];
      t.ok(
        spec.startsWith('./') && !spec.includes('/', 2),
        `${relative(SRC, file)} imports ${spec}: the contract imports only its own modules`,
      );
    }
    for (const m of text.matchAll(
      /^export\s+(?:declare\s+)?(?:interface|type|class|const|function|enum)\s+(\w+)/gm,
    ))
      names.add(m[1]!);
  }
  t.ok(names.has('Authority') && names.has('WakeInfo') && names.has('RuntimeStats'), 'the contract is read');
  const declared = new RegExp(
    `^\\s*(?:export\\s+)?(?:declare\\s+)?(?:interface|type|class|const|let|function|enum)\\s+(${[...names].join('|')})\\b`,
    'gm',
  );
  for (const file of files(SRC)) {
    const rel = relative(SRC, file);
    if (rel.startsWith('contract/')) continue;
    for (const m of readFileSync(file, 'utf8').matchAll(declared))
      t.fail(`${rel} declares ${m[1]}, a type of src/contract: import it from there`);
  }
});

t.test('only the store modules load a database driver (better-sqlite3, pg)', async (t) => {
  const driver = /^(better-sqlite3|pg)$/;
  // createRequire(import.meta.url)('better-sqlite3') loads a driver as surely as an import does
  const required = /\(\s*['"](better-sqlite3|pg)['"]\s*\)/g;
  const loaders = new Set<string>();
  for (const file of files(SRC)) {
    const rel = relative(SRC, file);
    const text = readFileSync(file, 'utf8');
    const specs = [
      ...[...text.matchAll(importRe)].map((m) => m[1] ?? m[2]),
      ...[...text.matchAll(required)].map((m) => m[1]),
    ];
    for (const spec of specs) {
      if (!driver.test(spec)) continue;
      loaders.add(rel);
      t.ok(rel.startsWith('store/'), `${rel} loads ${spec}: only src/store may (go through its modules)`);
    }
  }
  t.ok(loaders.has('store/sqlite-driver.ts') && loaders.has('store/pg-sql.ts'), 'the drivers are found');
});

t.test('every CREATE TABLE is in the schema module of its backend, each table declared once', async (t) => {
  const SCHEMA = ['store/sqlite-schema.ts', 'store/pg-schema.ts'];
  const tables = new Map<string, string[]>(SCHEMA.map((f) => [f, []]));
  for (const file of files(SRC)) {
    const rel = relative(SRC, file);
    for (const m of readFileSync(file, 'utf8').matchAll(
      /CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)/gi,
    )) {
      if (!tables.has(rel)) t.fail(`${rel} creates table ${m[1]}: declare it in ${SCHEMA.join(' or ')}`);
      else tables.get(rel)!.push(m[1]!);
    }
  }
  for (const [rel, names] of tables) {
    const twice = names.filter((n, i) => names.indexOf(n) !== i);
    t.same(twice, [], `${rel} declares each of its ${names.length} tables once`);
  }
  t.ok(tables.get(SCHEMA[0]!)!.includes('berm_kv') && tables.get(SCHEMA[1]!)!.includes('berm_kv'), 'read');
});

t.test('the OCI client imports only src/util; the CLI never imports the daemon', async (t) => {
  let checked = 0;
  for (const file of files(SRC)) {
    const rel = relative(SRC, file);
    const folder = rel.split('/')[0];
    if (folder !== 'oci' && folder !== 'cli') continue;
    for (const m of readFileSync(file, 'utf8').matchAll(importRe)) {
      const spec = m[1] ?? m[2];
      if (!spec.startsWith('.')) continue;
      const tFolder = relative(SRC, resolve(dirname(file), spec)).split('/')[0];
      checked++;
      if (folder === 'oci') t.ok(tFolder === 'oci' || tFolder === 'util', `${rel} imports src/${tFolder}`);
      else t.not(tFolder, 'daemon', `${rel} imports src/daemon (client verbs reach bermd over HTTP only)`);
    }
  }
  t.ok(checked > 0);
});

t.test('nothing imports src/daemon; the daemon never imports the CLI', async (t) => {
  for (const file of files(SRC)) {
    const rel = relative(SRC, file);
    const folder = rel.split('/')[0];
    for (const m of readFileSync(file, 'utf8').matchAll(importRe)) {
      const spec = m[1] ?? m[2];
      if (!spec.startsWith('.')) continue;
      const target = relative(SRC, resolve(dirname(file), spec)).split('/')[0];
      if (folder !== 'daemon')
        t.not(target, 'daemon', `${rel} imports ${spec}: only bin/bermd.js enters src/daemon`);
      else t.not(target, 'cli', `${rel} imports ${spec}: the daemon does not use the CLI`);
    }
  }
});

/**
 * The "knows about" column of docs/architecture.md's layer table, read from the doc itself: for
 * each folder, the folders it may import (besides its own). Parenthesised remarks are left out;
 * "everything except the X" allows every folder but X; "... and below" allows every folder at or
 * below the highest one named.
 */
function knowsAbout(): Map<string, Set<string>> {
  const doc = readFileSync(resolve(SRC, '..', 'docs', 'architecture.md'), 'utf8');
  const folders = Object.keys(LAYER);
  const out = new Map<string, Set<string>>();
  for (const line of doc.split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    if (cells.length < 5 || !cells[2]!.startsWith('src/')) continue;
    const owners = cells[2]!.split(',').map((c) => c.trim().replace(/^src\//, ''));
    let text = cells[3]!;
    while (/\([^()]*\)/.test(text)) text = text.replace(/\([^()]*\)/g, '');
    const named = folders.filter((f) =>
      new RegExp(`(^|[\\s,;:])${f.replace('.', '\\.')}(?=$|[\\s,;:])`).test(text),
    );
    let allowed: string[];
    const except = /everything except the (\w+)/.exec(text);
    if (except) allowed = folders.filter((f) => f !== except[1]);
    else if (/and below/.test(text)) {
      const top = Math.max(...named.map((f) => LAYER[f]!));
      allowed = folders.filter((f) => LAYER[f]! <= top);
    } else allowed = named;
    for (const o of owners) out.set(o, new Set([o, ...allowed, 'types']));
  }
  return out;
}

t.test('imports stay within the "knows about" column of docs/architecture.md', async (t) => {
  const knows = knowsAbout();
  t.same(
    Object.keys(LAYER).filter((f) => f !== 'types' && !knows.has(f)),
    [],
    'every folder has a row in the doc',
  );
  t.same([...knows.get('cache')!].sort(), ['cache', 'types', 'util'], 'the doc is read as meant');
  let checked = 0;
  for (const file of files(SRC)) {
    const rel = relative(SRC, file);
    const folder = rel.split('/')[0]!;
    const allowed = knows.get(folder);
    if (!allowed) continue;
    for (const m of readFileSync(file, 'utf8').matchAll(importRe)) {
      const spec = m[1] ?? m[2];
      if (!spec || !spec.startsWith('.')) continue;
      const target = relative(SRC, resolve(dirname(file), spec)).split('/')[0]!;
      checked++;
      t.ok(
        allowed.has(target),
        `${rel} imports src/${target}, which the doc does not list for src/${folder}`,
      );
    }
  }
  t.ok(checked > 100, `${checked} imports checked`);
});

t.test('the workbench page imports nothing of the server: only its own folder and preact', async (t) => {
  const dir = join(SRC, 'workbench');
  const all = (d: string): string[] =>
    readdirSync(d).flatMap((n) => {
      const p = join(d, n);
      return statSync(p).isDirectory() ? all(p) : /\.tsx?$/.test(p) ? [p] : [];
    });
  let checked = 0;
  for (const file of all(dir)) {
    for (const m of readFileSync(file, 'utf8').matchAll(importRe)) {
      const spec = m[1] ?? m[2];
      checked++;
      if (spec.startsWith('.')) {
        const target = resolve(dirname(file), spec);
        t.ok(target.startsWith(dir + '/'), `${relative(SRC, file)} imports ${spec}, outside src/workbench`);
      } else t.match(spec, /^preact(\/hooks)?$/, `${relative(SRC, file)} imports the package ${spec}`);
    }
  }
  t.ok(checked > 10, `${checked} imports checked`);
});

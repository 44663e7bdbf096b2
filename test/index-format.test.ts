// The index format (src/index): a directory written by hand in the reference implementation's
// layout ({registry}/{repository}.json, JSON Lines, one garbage line) is read whole, searched by
// the reference's rule (case-insensitive substring over reference, usage, tool names and
// descriptions), and what berm writes reads back with a plain line-by-line JSON.parse.
import t from 'tap';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Catalog } from '../src/index/catalog.js';
import { entryKey, formatEntryLine, parseIndexLine, type IndexEntry } from '../src/index/entry.js';
import { appendEntry, appendTakedown, loadIndexDirectory } from '../src/index/files.js';

const D1 = 'sha256:' + '1'.repeat(64);
const D2 = 'sha256:' + '2'.repeat(64);
const D3 = 'sha256:' + '3'.repeat(64);

// Lines as serde_json writes the reference's Entry (field order reference, digest, publisher when
// set, usage, tools), typed out by hand.
const FS_V1 =
  '{"reference":"ghcr.io/clearloop/fs:v1","digest":"' +
  D1 +
  '","usage":"Files under a granted root.","tools":[{"name":"read","description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}]}';
const FS_V2 =
  '{"reference":"ghcr.io/clearloop/fs:v2","digest":"' +
  D2 +
  '","publisher":"clearloop","usage":"Files under a granted root.","tools":[{"name":"read","description":"Read a file","parameters":{"type":"object"}},{"name":"write","description":"Write a file","parameters":{"type":"object"}}]}';
const CLOCK =
  '{"reference":"127.0.0.1:5000/berm/clock:dev","digest":"' +
  D3 +
  '","usage":"What time it is.","tools":[{"name":"now","description":"The current UNIX time in ms","parameters":{"type":"object"}}]}';

function handWritten(): string {
  const root = mkdtempSync(join(tmpdir(), 'berm-index-'));
  mkdirSync(join(root, 'ghcr.io', 'clearloop'), { recursive: true });
  writeFileSync(join(root, 'ghcr.io', 'clearloop', 'fs.json'), `${FS_V1}\n{"reference": broken\n${FS_V2}\n`);
  mkdirSync(join(root, '127.0.0.1:5000', 'berm'), { recursive: true });
  writeFileSync(join(root, '127.0.0.1:5000', 'berm', 'clock.json'), CLOCK + '\n');
  writeFileSync(join(root, 'README.md'), 'not an index file\n');
  return root;
}

t.test(
  'a hand-written reference-format directory is read, the garbage line skipped and counted',
  async (t) => {
    const root = handWritten();
    const l = loadIndexDirectory(root);
    t.equal(l.files, 2);
    t.equal(l.skipped, 1);
    t.same(l.skippedAt, ['ghcr.io/clearloop/fs.json:2']);
    t.equal(l.catalog.size, 3);
    t.equal(l.catalog.keys, 2);
    t.same(
      l.catalog.versions('ghcr.io/clearloop/fs').map((e) => e.reference),
      ['ghcr.io/clearloop/fs:v1', 'ghcr.io/clearloop/fs:v2'],
    );
    t.same(l.catalog.versions('ghcr.io/clearloop/fs')[1], JSON.parse(FS_V2), 'an entry is its line');
    t.same(l.catalog.versions('nothing/here'), []);
    // the reference's rule: substring, case-insensitive, over reference, usage, tool names, descriptions
    const refs = (q: string): string[] => l.catalog.search(q).entries.map((e) => e.reference);
    t.same(refs('READ A FILE'), ['ghcr.io/clearloop/fs:v1', 'ghcr.io/clearloop/fs:v2'], 'a tool description');
    t.same(refs('write'), ['ghcr.io/clearloop/fs:v2'], 'a tool name');
    t.same(refs('what time'), ['127.0.0.1:5000/berm/clock:dev'], 'the usage');
    t.same(refs('5000/berm'), ['127.0.0.1:5000/berm/clock:dev'], 'the reference');
    t.same(refs('unix time'), ['127.0.0.1:5000/berm/clock:dev']);
    t.same(refs('granted root. read'), [], 'a term never spans two fields');
    t.same(refs('zzz'), []);
    t.equal(refs('').length, 3, 'the empty term lists everything');
  },
);

t.test('keys are the reference without tag or digest', async (t) => {
  t.equal(entryKey('ghcr.io/org/name:v1'), 'ghcr.io/org/name');
  t.equal(entryKey('127.0.0.1:5000/a/b/c:dev'), '127.0.0.1:5000/a/b/c');
  t.equal(entryKey(`ghcr.io/org/name@${D1}`), 'ghcr.io/org/name');
  t.equal(entryKey('ghcr.io/org/name'), 'ghcr.io/org/name');
});

t.test('what berm writes is JSON Lines a plain parser reads, fields in the reference order', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'berm-index-'));
  const e1: IndexEntry = {
    reference: 'ghcr.io/org/tool:v1',
    digest: D1,
    usage: 'u',
    tools: [{ name: 'a', description: 'b', parameters: { type: 'object' } }],
  };
  const e2: IndexEntry = { ...e1, reference: 'ghcr.io/org/tool:v2', digest: D2, publisher: 'alice' };
  const file = appendEntry(root, e1);
  t.equal(file, join(root, 'ghcr.io', 'org', 'tool.json'));
  appendEntry(root, e2);
  appendTakedown(root, { takedown: D1, reference: e1.reference, by: 'op', at: '2026-12-06T00:00:00.000Z' });
  const lines = readFileSync(file, 'utf8').split('\n');
  t.equal(lines.pop(), '', 'every line ends with a newline');
  const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  t.same(Object.keys(parsed[0]!), ['reference', 'digest', 'usage', 'tools'], 'no publisher when unknown');
  t.same(Object.keys(parsed[1]!), ['reference', 'digest', 'publisher', 'usage', 'tools']);
  t.same(parsed[1], {
    reference: 'ghcr.io/org/tool:v2',
    digest: D2,
    publisher: 'alice',
    usage: 'u',
    tools: e1.tools,
  });
  t.same(Object.keys((parsed[0]!.tools as object[])[0]!), ['name', 'description', 'parameters']);
  t.equal(parsed[2]!.takedown, D1, 'a takedown is a line of its own');
  t.equal(parsed[2]!.usage, undefined, 'which a reader of entries alone cannot take for an entry');
  const l = loadIndexDirectory(root);
  t.same(l.catalog.versions('ghcr.io/org/tool'), [e2], 'the taken-down version is hidden');
  t.same(l.catalog.search('').entries, [e2]);
  t.equal(l.takedowns, 1);
  // a file whose last line lost its newline does not swallow the next line
  writeFileSync(file, formatEntryLine(e1));
  appendEntry(root, e2);
  t.same(readFileSync(file, 'utf8'), `${formatEntryLine(e1)}\n${formatEntryLine(e2)}\n`);
});

t.test('lines that are not entries are refused, not half-read', async (t) => {
  for (const bad of [
    '[]',
    '{"reference":"a/b:c","digest":"x","usage":"u"}',
    '{"reference":"a/b:c","digest":"x","usage":"u","tools":[{"name":"n"}]}',
    '{"reference":1,"digest":"x","usage":"u","tools":[]}',
    '{"takedown":"sha256:nothex","reference":"a","by":"b"}',
    'null',
  ]) {
    t.equal(parseIndexLine(bad), null, bad);
  }
  t.equal(parseIndexLine('   '), null);
});

t.test('search: pages, cursors, and the n-gram filter never loses a match', async (t) => {
  const c = new Catalog();
  const words = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta', 'theta'];
  const all: IndexEntry[] = [];
  for (let i = 0; i < 500; i++) {
    const e: IndexEntry = {
      reference: `ghcr.io/o${i % 7}/h${i}:v${i % 3}`,
      digest: 'sha256:' + i.toString(16).padStart(64, '0'),
      usage: `${words[i % 8]} ${words[(i * 3) % 8]} Ünïcode ${i}`,
      tools: [
        { name: `t_${words[(i * 5) % 8]}`, description: `Does ${words[(i * 7) % 8]} things`, parameters: {} },
      ],
    };
    all.push(e);
    t.equal(c.add(e), true);
  }
  t.equal(c.add(all[0]!), false, 'the same reference at the same digest is held once');
  // every term checked against a plain scan of the same rule (an independent implementation)
  const plain = (q: string): IndexEntry[] => {
    const l = q.toLowerCase();
    return all.filter(
      (e) =>
        e.reference.toLowerCase().includes(l) ||
        e.usage.toLowerCase().includes(l) ||
        e.tools.some((x) => x.name.toLowerCase().includes(l) || x.description.toLowerCase().includes(l)),
    );
  };
  for (const q of [
    'a',
    'ET',
    'eta',
    'theta things',
    'o3/h1',
    'ünï',
    'h49',
    'v2',
    'zeta zeta',
    'gamma beta',
    'T_',
    'nothing',
    '',
  ]) {
    t.same(c.search(q).entries, plain(q), `term ${JSON.stringify(q)}`);
  }
  const pages: IndexEntry[] = [];
  let cursor: string | undefined;
  do {
    const p = c.search('eta', { limit: 37, cursor });
    t.ok(p.entries.length <= 37);
    pages.push(...p.entries);
    cursor = p.next;
  } while (cursor !== undefined);
  t.same(pages, plain('eta'), 'pages cover the result once, in order');
  t.throws(() => c.search('x', { cursor: 'abc' }), { name: 'CursorError' });
  t.throws(() => c.search('x', { cursor: '99999' }), { name: 'CursorError' });
  t.equal(c.hide(all[3]!.reference, all[3]!.digest), true);
  t.notOk(c.search('').entries.includes(all[3]!), 'hidden from search');
  t.equal(c.latest(all[4]!.reference), all[4]);
});

// The start-up snapshot of an index directory (src/index/snapshot.ts): a start through a snapshot
// serves what a plain load of the JSON Lines files serves (the files are the truth), after each
// kind of change made between two starts: none, lines appended (entries, a takedown, a garbage
// line), a new file, a file rewritten, a file removed, a damaged snapshot. The comparison is with
// a plain line-by-line JSON parse of the files (entries as sets, since a start through the
// snapshot lists appended lines after the snapshot's).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t from 'tap';
import { formatEntryLine, type IndexEntry } from '../src/index/entry.js';
import { loadIndexDirectory } from '../src/index/files.js';
import { startIndexService, type RunningIndexService } from '../src/index/service.js';
import { loadWithSnapshot, noteAppend, writeSnapshot, type SnapshotLoad } from '../src/index/snapshot.js';
import { tokenHash, type Publisher } from '../src/index/tokens.js';

function entry(repo: string, tag: string, n: number, words: string): IndexEntry {
  return {
    reference: `r.example/${repo}:${tag}`,
    digest: 'sha256:' + n.toString(16).padStart(64, '0'),
    usage: `Usage ${words}`,
    tools: [{ name: `tool_${n}`, description: `Does ${words}`, parameters: { type: 'object' } }],
  };
}

/** What a plain reader of the format lists: every entry line, minus the digests taken down. */
function plainRead(root: string): { refs: string[]; garbage: number } {
  const refs: string[] = [];
  const down = new Set<string>();
  let garbage = 0;
  const walk = (d: string): void => {
    for (const n of fs.readdirSync(d).sort()) {
      const p = path.join(d, n);
      if (fs.statSync(p).isDirectory()) walk(p);
      else if (n.endsWith('.json'))
        for (const line of fs.readFileSync(p, 'utf8').split('\n')) {
          if (line.trim() === '') continue;
          let v: Record<string, unknown>;
          try {
            v = JSON.parse(line) as Record<string, unknown>;
          } catch {
            garbage++;
            continue;
          }
          if (typeof v.takedown === 'string') down.add(v.takedown);
          else refs.push(`${v.reference as string} ${v.digest as string}`);
        }
    }
  };
  walk(root);
  return { refs: refs.filter((r) => !down.has(r.split(' ')[1]!)).sort(), garbage };
}

function listed(l: SnapshotLoad): string[] {
  return l.catalog
    .search('')
    .entries.map((e) => `${e.reference} ${e.digest}`)
    .sort();
}

t.test('a start through the snapshot serves what the files hold', async (t) => {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-snapshot-'));
  t.teardown(() => fs.rmSync(work, { recursive: true, force: true }));
  const root = path.join(work, 'index');
  const snap = path.join(work, 'cache', 'index.snapshot');
  const file = (repo: string): string => path.join(root, 'r.example', `${repo}.json`);
  fs.mkdirSync(path.join(root, 'r.example'), { recursive: true });
  for (let i = 0; i < 40; i++) {
    const lines = [formatEntryLine(entry(`h${i}`, 'v1', i, `alpha${i} words`))];
    if (i === 7) lines.push('{not json');
    fs.writeFileSync(file(`h${i}`), lines.join('\n') + '\n');
  }
  const releases: (() => void)[] = [];
  t.teardown(() => releases.forEach((r) => r()));
  const start = (): SnapshotLoad => {
    const l = loadWithSnapshot(root, snap, loadIndexDirectory);
    if (l.release) releases.push(l.release);
    if (l.stale) writeSnapshot(snap, root, l);
    return l;
  };
  const check = (l: SnapshotLoad, what: string): void => {
    const plain = plainRead(root);
    t.same(listed(l), plain.refs, `${what}: the same entries as a plain read`);
    t.equal(l.skipped, plain.garbage, `${what}: garbage lines counted`);
  };

  let l = start();
  t.equal(l.how, 'reloaded', 'no snapshot yet: read from the files');
  check(l, 'first start');
  t.ok(fs.existsSync(snap), 'the snapshot is written');

  l = start();
  t.equal(l.how, 'used', 'nothing changed: the snapshot is used');
  t.equal(l.stale, false);
  check(l, 'unchanged');
  t.same(
    l.catalog.search('ALPHA12').entries.map((e) => e.reference),
    ['r.example/h12:v1'],
    'an entry from the snapshot is parsed from its line',
  );
  t.equal(l.catalog.versions('r.example/h3').length, 1, 'versions by key');
  t.same(l.skippedAt, ['r.example/h7.json:2'], 'where the garbage line is, kept');

  // appended lines: a new version, a takedown of another file's entry, a garbage line
  fs.appendFileSync(file('h3'), formatEntryLine(entry('h3', 'v2', 1003, 'beta new')) + '\n');
  fs.appendFileSync(
    file('h5'),
    JSON.stringify({
      takedown: entry('h5', 'v1', 5, '').digest,
      reference: 'r.example/h5:v1',
      by: 'op',
      at: '',
    }) + '\n',
  );
  fs.appendFileSync(file('h9'), 'garbage\n');
  fs.writeFileSync(file('h40'), formatEntryLine(entry('h40', 'v1', 40, 'gamma fresh')) + '\n');
  l = start();
  t.equal(l.how, 'used', 'appended and new files: the snapshot is used, new lines read');
  t.equal(l.stale, true);
  check(l, 'appended');
  t.same(
    l.catalog.search('beta new').entries.map((e) => e.reference),
    ['r.example/h3:v2'],
  );
  t.same(
    l.catalog.search('gamma').entries.map((e) => e.reference),
    ['r.example/h40:v1'],
  );
  t.same(l.catalog.search('alpha5 ').entries, [], 'taken down by an appended line');
  t.ok(l.skippedAt.includes('r.example/h9.json:2'), 'the appended garbage line is placed');
  t.equal(l.catalog.add(entry('h3', 'v2', 1003, 'beta new')), false, 'a version from a tail is known');

  l = start();
  t.equal(l.how, 'used');
  t.equal(l.stale, false, 'the snapshot written after the tails covers them');
  check(l, 'after the rewrite of the snapshot');

  // a rewritten file: the files are read again
  fs.writeFileSync(file('h11'), formatEntryLine(entry('h11', 'v9', 911, 'delta other')) + '\n');
  l = start();
  t.equal(l.how, 'reloaded');
  t.match(l.why, /h11\.json was rewritten/);
  check(l, 'rewritten');

  // a removed file
  fs.rmSync(file('h20'));
  l = start();
  t.equal(l.how, 'reloaded');
  t.match(l.why, /h20\.json was removed/);
  check(l, 'removed');

  // a damaged snapshot: cut short
  const bytes = fs.readFileSync(snap);
  fs.writeFileSync(snap, bytes.subarray(0, bytes.length - 100));
  l = start();
  t.equal(l.how, 'reloaded');
  t.match(l.why, /cut short/);
  check(l, 'damaged');
  fs.writeFileSync(snap, 'not a snapshot at all');
  l = start();
  t.equal(l.how, 'reloaded');
  check(l, 'not a snapshot');

  // a snapshot of another directory is not used
  const other = path.join(work, 'other');
  fs.cpSync(root, other, { recursive: true });
  const lo = loadWithSnapshot(other, snap, loadIndexDirectory);
  t.equal(lo.how, 'reloaded');
  t.match(lo.why, /the snapshot is of/);
});

t.test('berm-indexd listens from the snapshot and checks the files behind it', async (t) => {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-snapshot-svc-'));
  t.teardown(() => fs.rmSync(work, { recursive: true, force: true }));
  const root = path.join(work, 'index');
  const snap = path.join(work, 'cache', 'index.snapshot');
  const file = (repo: string): string => path.join(root, 'r.example', `${repo}.json`);
  fs.mkdirSync(path.join(root, 'r.example'), { recursive: true });
  for (let i = 0; i < 300; i++)
    fs.writeFileSync(file(`h${i}`), formatEntryLine(entry(`h${i}`, 'v1', i, `alpha${i} words`)) + '\n');
  const logs: string[] = [];
  const start = (tokens?: Map<string, Publisher>): Promise<RunningIndexService> =>
    startIndexService({ root, addr: '127.0.0.1:0', snapshot: snap, tokens, log: (l) => logs.push(l) });
  const refs = (svc: RunningIndexService, term = ''): string[] =>
    svc.catalog
      .search(term)
      .entries.map((e) => `${e.reference} ${e.digest}`)
      .sort();

  let svc = await start();
  await svc.checked;
  await svc.close();
  t.ok(fs.existsSync(snap), 'the first start writes the snapshot once it listens');

  // changes by another writer while the service is down, and one by the service itself (noted)
  fs.appendFileSync(file('h3'), formatEntryLine(entry('h3', 'v2', 1003, 'beta other writer')) + '\n');
  fs.writeFileSync(file('h300'), formatEntryLine(entry('h300', 'v1', 300, 'gamma new file')) + '\n');
  noteAppend(snap, 'r.example/h4.json');
  fs.appendFileSync(file('h4'), formatEntryLine(entry('h4', 'v2', 1004, 'delta own publish')) + '\n');
  logs.length = 0;
  svc = await start();
  t.match(logs[0], /from the snapshot \(300 files, 1 read again since it\)/, 'a start reads the snapshot');
  t.same(
    svc.catalog.search('delta own').entries.map((e) => e.reference),
    ['r.example/h4:v2'],
    "the service's own appends are served as soon as it listens",
  );
  await svc.checked;
  t.same(refs(svc), plainRead(root).refs, 'after the check: what a plain read of the files lists');
  t.ok(
    logs.some((l) => /checked 301 files against the snapshot in \d+ ms: 1 appended to, 1 new/.test(l)),
    'the check says what it found',
  );
  t.ok(
    logs.some((l) => /wrote the snapshot/.test(l)),
    'a snapshot is written again',
  );
  t.notOk(fs.existsSync(`${snap}.appended`), 'the notes end with the snapshot that covers them');
  await svc.close();

  // the next start finds nothing to read and nothing to write
  logs.length = 0;
  svc = await start();
  await svc.checked;
  t.same(refs(svc), plainRead(root).refs, 'unchanged: the same entries');
  t.ok(logs.some((l) => /0 appended to, 0 new/.test(l)));
  t.notOk(
    logs.some((l) => /wrote the snapshot/.test(l)),
    'an unchanged snapshot is not written again',
  );
  await svc.close();

  // a takedown made by the service while its check runs is applied once, not read again
  const op = 'operator-token-for-the-test';
  const tokens = new Map<string, Publisher>([[tokenHash(op), { name: 'op', operator: true }]]);
  fs.appendFileSync(file('h250'), 'garbage\n');
  svc = await start(tokens);
  const down = await fetch(`${svc.url}/harnesses/r.example/h7`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${op}`, 'content-type': 'application/json' },
    body: JSON.stringify({ digest: entry('h7', 'v1', 7, '').digest }),
  });
  t.equal(down.status, 200, 'a takedown while the check runs');
  await svc.checked;
  const plain = plainRead(root);
  t.same(refs(svc), plain.refs, 'the takedown and the appended garbage line, as a plain read has them');
  t.equal(plain.refs.filter((r) => r.startsWith('r.example/h7:')).length, 0);
  await svc.close();

  // a noted name that is a link (to a file outside the index), a missing file, or a path leaving
  // the index: none is read; a link is not an index file, as the walk has it
  const outside = path.join(work, 'outside.json');
  fs.writeFileSync(outside, formatEntryLine(entry('zz', 'v1', 999, 'zeta from outside')) + '\n');
  fs.symlinkSync(outside, file('link'));
  fs.writeFileSync(
    `${snap}.appended`,
    ['r.example/link.json', 'r.example/none.json', '../outside.json', '/abs.json', ''].join('\n'),
  );
  svc = await start();
  t.same(svc.catalog.search('zeta').entries, [], 'a noted link is not read');
  await svc.checked;
  t.same(svc.catalog.search('zeta').entries, [], 'nor by the check');
  t.same(
    refs(svc),
    plainRead(root).refs.filter((r) => !r.startsWith('r.example/zz')),
  );
  await svc.close();
  fs.rmSync(file('link'));

  // a file rewritten while the service was down: the check reads every file again
  fs.writeFileSync(file('h11'), formatEntryLine(entry('h11', 'v9', 911, 'epsilon rewritten')) + '\n');
  logs.length = 0;
  svc = await start();
  await svc.checked;
  t.ok(
    logs.some((l) => /h11\.json was rewritten: read all 301 files again/.test(l)),
    'rewritten: read again',
  );
  t.same(refs(svc), plainRead(root).refs, 'rewritten: what a plain read lists');
  await svc.close();

  // a removed file
  fs.rmSync(file('h20'));
  logs.length = 0;
  svc = await start();
  await svc.checked;
  t.ok(
    logs.some((l) => /h20\.json was removed: read all 300 files again/.test(l)),
    'removed: read again',
  );
  t.same(refs(svc), plainRead(root).refs, 'removed: what a plain read lists');
  await svc.close();
});

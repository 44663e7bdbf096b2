// `bermd --help` against docs/daemon.md's settings table: every flag the table documents is an
// option, and the help names the flag's environment variable (the table's env column), so an
// operator reading either finds the same knobs.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { ROOT } from './helpers/fixtures.js';

t.test('bermd --help names every flag and environment variable of docs/daemon.md', async (t) => {
  const r = spawnSync(process.execPath, [join(ROOT, 'bin', 'bermd.js'), '--help'], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  t.equal(r.status, 0, r.stderr);
  const help = r.stdout.replace(/\s+/g, ' ');
  const doc = readFileSync(join(ROOT, 'docs', 'daemon.md'), 'utf8');
  const rows = [...doc.matchAll(/^\| `(--[a-z-]+)[^`]*` \| `([A-Z_]+)[^`]*` \|/gm)];
  t.ok(rows.length >= 14, `${rows.length} settings rows`);
  for (const [, flag, env] of rows) {
    t.match(help, `${flag} `, `${flag} is an option`);
    t.match(help, env!, `${flag}: its env ${env} is named`);
  }
  t.notMatch(help, '(default: [])', 'no empty-list default shown');
});

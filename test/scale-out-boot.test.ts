// bermd with --store postgres://... refuses to boot, with the fix and a non-zero exit status, when
// the database cannot be reached (the password is never printed) and when the database holds a
// schema written by a newer berm. Real bermd processes, the real test cluster (BERM_TEST_PG_URL).
import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { TEST_CACHE } from './helpers/fixtures.js';
import { freshDatabase } from './helpers/pg.js';
import { TcpProxy, runBermd, startBermd, stopBermd, viaPort } from './helpers/cluster.js';

t.test('an unreachable database and a newer schema refuse the boot with the fix', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const root = mkdtempSync(join(tmpdir(), 'bermd-bad-'));
  const proxy = new TcpProxy('127.0.0.1', 1);
  const port = await proxy.listen();
  await proxy.cut(); // a port nothing listens on any more
  const dead = await runBermd({ root, store: viaPort(url, port).replace('postgres@', 'postgres:hunter2@') });
  t.not(dead.code, 0, 'exit status non-zero');
  t.match(dead.stderr, /cannot use PostgreSQL at postgres:\/\/postgres:\*\*\*@127\.0\.0\.1/);
  t.match(dead.stderr, /fix: start the database or correct --store/);
  t.notMatch(dead.stderr, 'hunter2', 'the password is not printed');

  const b = await startBermd({ root, store: url, cacheDir: TEST_CACHE });
  t.match(
    b.log(),
    /store +postgres:\/\/postgres@127\.0\.0\.1:\d+\/berm_t_\w+ \(shared/,
    'the boot log names the store',
  );
  await stopBermd(b, 'SIGTERM');
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query('UPDATE berm_schema SET version = version + 1');
  await c.end();
  const newer = await runBermd({ root, store: url, cacheDir: TEST_CACHE });
  t.not(newer.code, 0, 'exit status non-zero');
  t.match(newer.stderr, /newer than this berm's \d+.*Fix: run a berm that knows schema/);
});

t.test('a --store that is not a postgres:// URL is refused with the fix', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'bermd-bad-'));
  const r = await runBermd({ root, store: 'mysql://x:secret@h/db' });
  t.equal(r.code, 2, 'a refused boot');
  t.match(r.stderr, /--store: "mysql:\/\/x:\*\*\*@h\/db" is not a postgres:\/\/ URL/);
});

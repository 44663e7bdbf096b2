// The record of upstream images bermd imported (src/daemon/reference-root.ts) is kept in the
// runtime's store, SQLite under --root or the shared PostgreSQL (BERM_TEST_PG_URL): a root of an
// earlier version, whose record was <root>/deployments/reference-imports.json, has it moved into
// the store at boot (the file deleted) on a database of the previous schema, and the moved record
// decides what is imported; a damaged file refuses the boot, naming it, and is left as it is.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import * as sql from '../src/store/pg-sql.js';
import { PgStore } from '../src/store/pg-store.js';
import { openSqlite } from '../src/store/sqlite-driver.js';
import { STATE_SCHEMA_VERSION } from '../src/store/sqlite-schema.js';
import { SqliteStore } from '../src/store/sqlite-store.js';
import { elf, testDaemon } from './helpers/daemon.js';
import { freshDatabase, testPool } from './helpers/pg.js';

const ECHO = elf('fixtures/build/echo-gcc-O2.elf');
const TEXT = elf('fixtures/build/text-gcc-O2.elf');
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

/** A fresh root; `record` (when given) is written as the earlier versions' reference-imports.json. */
function oldRoot(t: Test, record?: string): { root: string; file: string } {
  const root = mkdtempSync(join(tmpdir(), 'bermd-ref-imports-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  mkdirSync(join(root, 'deployments'), { recursive: true });
  const file = join(root, 'deployments', 'reference-imports.json');
  if (record !== undefined) writeFileSync(file, record);
  return { root, file };
}

const served = async (d: { req(p: string): Promise<Response> }): Promise<[string, string][]> =>
  ((await (await d.req('/harnesses')).json()) as { name: string; digest: string }[]).map((h) => [
    h.name,
    h.digest,
  ]);

t.test(
  'SQLite: an old record of imports is moved into a schema-4 store and decides the imports',
  async (t) => {
    // upstream's root: echo and text, both imported by an earlier bermd, echo since undeployed from
    // bermd; upstream deployed `other` again since its import (other bytes than recorded)
    const { root, file } = oldRoot(
      t,
      JSON.stringify({ version: 1, imported: { echo: sha(ECHO), text: sha(TEXT), other: sha(ECHO) } }),
    );
    mkdirSync(join(root, 'harnesses'));
    writeFileSync(join(root, 'harnesses', 'echo.elf'), ECHO);
    writeFileSync(join(root, 'harnesses', 'text.elf'), TEXT);
    writeFileSync(join(root, 'harnesses', 'other.elf'), TEXT);
    // what that bermd's store held: text deployed (its image a file), on schema 4 (no record table)
    mkdirSync(join(root, 'deployments', 'images'));
    writeFileSync(join(root, 'deployments', 'images', `${sha(TEXT)}.elf`), TEXT);
    const store = SqliteStore.open(root);
    store.deployments.put({
      name: 'text',
      sha256: sha(TEXT),
      elf: null,
      capabilities: [],
      grant: {},
      deployedAt: 7,
    });
    store.close();
    const db = openSqlite(join(root, 'state.sqlite'));
    db.exec('DROP TABLE reference_imports');
    db.pragma('user_version = 4');
    db.close();

    const d = await testDaemon({}, {}, root);
    t.same(
      await served(d),
      [
        ['other', sha(TEXT)],
        ['text', sha(TEXT)],
      ],
      'echo, recorded as imported, is not imported again; other, changed since, is',
    );
    t.notOk(existsSync(file), 'the file is deleted');
    t.ok(
      d.logs.some((l) =>
        /moved 3 records of upstream imports from deployments\/reference-imports\.json into the store/.test(
          l,
        ),
      ),
      'the boot log says so',
    );
    t.ok(
      d.logs.some((l) => /imported 1 upstream deployments from .*harnesses: other /.test(l)),
      'the boot log names the one import',
    );
    await d.stop();
    const after = SqliteStore.open(root);
    t.same(
      Object.fromEntries(after.deployments.referenceImports()),
      { echo: sha(ECHO), text: sha(TEXT), other: sha(TEXT) },
      'the store holds the record, with the new import',
    );
    after.close();
    const v = openSqlite(join(root, 'state.sqlite'));
    t.equal(
      (v.pragma('user_version') as { user_version: number }[])[0]!.user_version,
      STATE_SCHEMA_VERSION,
      'migrated to the current schema',
    );
    v.close();

    // the next boot reads the record from the store alone: nothing moved, nothing imported
    const again = await testDaemon({}, {}, root);
    t.teardown(() => again.stop());
    t.same(await served(again), [
      ['other', sha(TEXT)],
      ['text', sha(TEXT)],
    ]);
    t.notOk(
      again.logs.some((l) => /records of upstream imports|imported \d+ upstream/.test(l)),
      'nothing to move or import the second time',
    );
    t.notOk(existsSync(file), 'no file is written again');
  },
);

t.test('SQLite: a damaged record of imports refuses the boot, naming the file', async (t) => {
  for (const [text, why] of [
    ['{"version":1,"imported":', /reference-imports\.json is not valid JSON .*restore it or move it away/],
    [
      '{"version":2,"imported":{}}',
      /reference-imports\.json is not a version 1 record of upstream imports; restore it or move it away/,
    ],
  ] as const) {
    const { root, file } = oldRoot(t, text);
    await t.rejects(testDaemon({}, {}, root), { name: 'BootError', message: why });
    t.equal(readFileSync(file, 'utf8'), text, 'the file is left as it is');
  }
});

t.test('PostgreSQL: an old record of imports is moved into a schema-6 store', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  // the database as berm with schema 6 left it: no record table
  const pool = testPool(t, url);
  await sql.migrate(pool, 'setup', 'test');
  await pool.query('DROP TABLE berm_reference_imports; UPDATE berm_schema SET version = 6');
  const { root, file } = oldRoot(
    t,
    JSON.stringify({ version: 1, imported: { echo: sha(ECHO), text: sha(TEXT) } }),
  );

  const d = await testDaemon({ store: url }, {}, root);
  t.notOk(existsSync(file), 'the file is deleted');
  t.ok(
    d.logs.some((l) =>
      /moved 2 records of upstream imports from deployments\/reference-imports\.json into the store/.test(l),
    ),
    'the boot log says so',
  );
  await d.stop();
  t.same((await pool.query('SELECT version FROM berm_schema')).rows, [{ version: sql.SCHEMA_VERSION }]);
  const store = await PgStore.open(url);
  t.teardown(() => store.close());
  t.same(
    Object.fromEntries(store.deployments.referenceImports()),
    { echo: sha(ECHO), text: sha(TEXT) },
    'the shared store holds the record',
  );
  store.deployments.recordReferenceImports(new Map([['echo', sha(TEXT)]]));
  t.same(
    Object.fromEntries(store.deployments.referenceImports()),
    { echo: sha(TEXT), text: sha(TEXT) },
    'a later import replaces the record of its name',
  );
});

t.test('PostgreSQL: a damaged record of imports refuses the boot, naming the file', async (t) => {
  const url = await freshDatabase(t);
  if (url === null) return;
  const text = '{"version":1,"imported":{"echo":';
  const { root, file } = oldRoot(t, text);
  await t.rejects(testDaemon({ store: url }, {}, root), {
    name: 'BootError',
    message: /reference-imports\.json is not valid JSON .*restore it or move it away/,
  });
  t.equal(readFileSync(file, 'utf8'), text, 'the file is left as it is');
});

// bench/run.ts's command line (no timing): `section NAME` runs one group of figures alone; a name
// that is not a section is refused with the list of names, before any benchmark runs.
import { spawnSync } from 'node:child_process';
import t from 'tap';
import { ROOT } from './helpers/fixtures.js';

t.test('bench/run.ts section with an unknown name lists the sections and exits 2', async (t) => {
  for (const args of [['section', 'invocation'], ['section'], ['section', 'constructor']]) {
    const r = spawnSync(
      process.execPath,
      ['--import', './scripts/ts/register.mjs', 'bench/run.ts', ...args],
      {
        cwd: ROOT,
        encoding: 'utf8',
        timeout: 120_000,
      },
    );
    t.equal(r.status, 2, args.join(' '));
    t.equal(r.stdout, '', 'no figures');
    t.match(r.stderr, `bench/run.ts section: no section ${JSON.stringify(args[1] ?? '')}; the sections are `);
    // the names bench/README.md tells a reader to run alone are among them
    for (const name of ['invoke64', 'invoke1', 'hostcall', 'startup', 'speed', 'queue', 'compile']) {
      t.match(r.stderr, new RegExp(`\\b${name}\\b`), name);
    }
    t.notMatch(r.stderr, /TypeError/);
  }
});

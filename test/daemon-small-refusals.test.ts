// Small refusals of bermd: a token that could never match is refused at boot (whitespace or a
// non-printable character inside it), and the 404 of an unknown harness names only that harness,
// never the others deployed.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t from 'tap';
import { loadToken } from '../src/daemon/auth.js';
import { elf, testDaemon } from './helpers/daemon.js';

t.test('a token with whitespace or a control character inside is refused at boot', async (t) => {
  t.throws(() => loadToken(undefined, { BERMD_TOKEN: 'abc def' }), /BERMD_TOKEN contains whitespace/);
  t.throws(() => loadToken(undefined, { BERMD_TOKEN: 'abc\tdef' }), /BERMD_TOKEN contains whitespace/);
  t.throws(() => loadToken(undefined, { BERMD_TOKEN: 'abc\u0001def' }), /non-printable/);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berm-token-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'token');
  fs.writeFileSync(file, '  s3cret token  \nsecond line\n');
  t.throws(() => loadToken(file, {}), new RegExp(`file ${file} contains whitespace`));
  // surrounding whitespace and the lines after the first are still not part of it
  fs.writeFileSync(file, '  s3cret-token_+/=~.  \nsecond line\n');
  t.same(loadToken(file, {}), { token: 's3cret-token_+/=~.', source: `file ${file}` });
  t.same(loadToken(undefined, { BERMD_TOKEN: ' tok \n' }), { token: 'tok', source: 'env BERMD_TOKEN' });
  // and bermd itself does not start with one
  await t.rejects(testDaemon({}, { BERMD_TOKEN: 'two words' }), /contains whitespace/);
});

t.test('the 404 of an unknown harness does not list the deployed ones', async (t) => {
  const d = await testDaemon();
  t.teardown(() => d.stop());
  const put = await d.req('/harnesses/secret_internal_tool', {
    method: 'PUT',
    body: elf('fixtures/build/echo-gcc-O2.elf'),
  });
  t.equal(put.status, 200, await put.text());
  for (const [method, p] of [
    ['GET', '/harnesses/ghost'],
    ['POST', '/harnesses/ghost/tools/echo'],
  ] as const) {
    const r = await d.req(p, { method, ...(method === 'POST' ? { body: '{}' } : {}) });
    const text = await r.text();
    t.equal(r.status, 404, `${method} ${p}`);
    t.match(text, /no harness named ghost is deployed/);
    t.notMatch(text, /secret_internal_tool/, `${method} ${p} names no other harness`);
  }
});

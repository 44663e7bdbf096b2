// A parameters schema's `pattern` is matched in linear time without refusing ordinary patterns:
// patterns taken from real JSON Schemas and API specifications, whose counted repetitions V8's
// linear-time engine refuses, compile and match exactly as ECMAScript's own (backtracking) RegExp
// matches them, the independent judge; a catastrophic pattern still cannot hang the host.
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import t from 'tap';
import { Harness } from '../src/harness/harness.js';
import { schemaRegExp } from '../src/harness/pattern.js';

const REPO = path.resolve(import.meta.dirname, '..');
const REGISTER = path.join(REPO, 'scripts', 'ts', 'register.mjs');

/** Patterns from real schemas, each with where it comes from. */
const REAL: Array<[string, string]> = [
  ['^[a-zA-Z0-9_-]{1,64}$', 'tool / function names of LLM tool-use APIs'],
  ['^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$', 'Kubernetes DNS-1123 label'],
  ['^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$', 'Kubernetes DNS-1123 subdomain'],
  ['^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$', 'S3 bucket name'],
  ['^[0-9a-f]{40}$', 'git commit id'],
  ['^sha256:[a-f0-9]{64}$', 'OCI descriptor digest'],
  ['^[a-z0-9]+(?:[._-][a-z0-9]+)*$', 'OCI repository path component'],
  ['^[\\w][\\w.-]{0,127}$', 'OCI tag'],
  [
    '^(0|[1-9]\\d*)\\.(0|[1-9]\\d*)\\.(0|[1-9]\\d*)(?:-((?:0|[1-9]\\d*|\\d*[a-zA-Z-][a-zA-Z0-9-]*)(?:\\.(?:0|[1-9]\\d*|\\d*[a-zA-Z-][a-zA-Z0-9-]*))*))?(?:\\+([0-9a-zA-Z-]+(?:\\.[0-9a-zA-Z-]+)*))?$',
    'semver.org',
  ],
  ['^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$', 'IBAN'],
  ['^\\+[1-9]\\d{1,14}$', 'E.164 phone number'],
  ['^.{1,256}$', 'a bounded free-text field'],
  ['^\\S{1,100}$', 'a bounded token without white space'],
  ['^\\s{0,20}[^\\s]{1,20}\\s{0,20}$', 'a trimmed word'],
];

const INPUTS = [
  '',
  'a',
  'get_weather',
  'A'.repeat(64),
  'A'.repeat(65),
  'my-service',
  '-bad',
  'x'.repeat(63),
  'x'.repeat(64),
  'a.b-c.d',
  'my.bucket.name',
  'sha256:' + 'ab'.repeat(32),
  'sha256:' + 'ab'.repeat(33),
  '0123456789abcdef0123456789abcdef01234567',
  'library/ubuntu',
  'v1.2.3',
  '1.0.0-alpha.1+build.5',
  '01.2.3',
  'GB82WEST12345698765432',
  '+14155552671',
  '+0123',
  'tab\there',
  'line\nbreak',
  'carriage\rreturn',
  'nbsp\u00a0inside',
  '\u2028',
  '  word  ',
  ' \u3000word\ufeff',
  'é'.repeat(10),
  'z'.repeat(300),
];

t.test('patterns from real schemas compile and match as ECMAScript RegExp does', async (t) => {
  let viaRe2 = 0;
  for (const [pattern, from] of REAL) {
    const m = schemaRegExp(pattern, '');
    if (!(m instanceof RegExp)) viaRe2++;
    const judge = new RegExp(pattern);
    const wrong = INPUTS.filter((s) => m.test(s) !== judge.test(s));
    t.same(wrong, [], `${from}: ${pattern}`);
  }
  // the ordinary case that was refused: a repetition count over 16 goes to the second engine
  t.ok(viaRe2 >= 8, `${viaRe2} of ${REAL.length} need the second engine`);
});

t.test('a tool whose schema holds such a pattern loads and validates its arguments', async (t) => {
  const validate = Harness.compileSchema({
    name: 'lookup',
    description: '',
    parameters: {
      type: 'object',
      properties: { id: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,64}$' } },
      required: ['id'],
    },
  });
  t.equal(validate({ id: 'user_42-x' }), true);
  t.equal(validate({ id: 'x'.repeat(65) }), false);
  t.match(validate.errors?.[0]?.message, /must match pattern/);
  t.equal(validate({ id: 'no spaces' }), false);
});

t.test('patterns no linear-time engine can run are refused, naming the construct', async (t) => {
  const refuse = (pattern: string, why: RegExp) =>
    t.throws(
      () =>
        Harness.compileSchema({
          name: 'bad',
          description: '',
          parameters: { type: 'object', properties: { s: { type: 'string', pattern } } },
        }),
      {
        name: 'HarnessError',
        message: new RegExp(
          `tool bad declares an invalid parameters schema: .*linear time.*${why.source}.*; fix: write its patterns without backreferences`,
        ),
      },
      pattern,
    );
  refuse('^(a{1,20})\\1$', /escape/);
  refuse('^(?=a{1,20})a+$', /Perl syntax/);
  refuse('^[a-z]{1,2000}$', /repeat count/);
  refuse('^((a{1,1000}){1,1000}){1,1000}$', /too large/);
  // not a valid ECMAScript pattern at all: ECMAScript's own message, and the other fix
  t.throws(
    () =>
      Harness.compileSchema({
        name: 'bad',
        description: '',
        parameters: { type: 'object', properties: { s: { type: 'string', pattern: '(a' } } },
      }),
    { message: /Invalid regular expression.*; fix: correct the schema/ },
  );
});

t.test('catastrophic patterns cannot hang validation, in either engine', async (t) => {
  // ^(a+)+$ runs in V8's linear engine; ^(a|aa){1,40}$ and ^(a+){2,30}$ only in RE2. Each
  // backtracks exponentially in an ordinary RegExp on "aaa...a!". Run in a child bounded by a
  // timeout, so that a hang fails the test instead of stalling it.
  const code = `
    const { Harness } = await import(${JSON.stringify(path.join(REPO, 'src/harness/harness.ts'))});
    const out = [];
    for (const pattern of ['^(a+)+$', '^(a|aa){1,40}$', '^(a+){2,30}$']) {
      const v = Harness.compileSchema({ name: 't', description: '', parameters: {
        type: 'object', properties: { s: { type: 'string', pattern } } } });
      out.push([v({ s: 'a'.repeat(5000) + '!' }), v({ s: 'a'.repeat(30) })]);
    }
    process.stdout.write(JSON.stringify(out));`;
  const r = spawnSync(process.execPath, [`--import=${REGISTER}`, '--input-type=module', '-e', code], {
    encoding: 'utf8',
    timeout: 30_000,
    killSignal: 'SIGKILL',
  });
  t.equal(r.error, undefined, 'finished within 30 s');
  t.equal(r.status, 0, r.stderr);
  t.same(JSON.parse(r.stdout || 'null'), [
    [false, true],
    [false, true],
    [false, true],
  ]);
});

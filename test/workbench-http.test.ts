// The workbench's HTTP side, from a plain client that sends exactly the headers a browser would:
// the page and its strict headers, the session exchange (HttpOnly SameSite=Strict cookie, CSRF
// proof on every mutating request, logout server side), the refusal of other origins, and the
// change feed GET /events (a deploy arrives as an SSE event within a second).
import { request } from 'node:http';
import t from 'tap';
import { elf, testDaemon } from './helpers/daemon.js';

const ECHO = elf('fixtures/build/echo-gcc-O2.elf');
const TOKEN = 'wb-http-token-7f3a';

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request with raw headers (node:http: Origin, Cookie, Sec-Fetch-Site exactly as given). */
function raw(
  url: string,
  path: string,
  method: string,
  headers: Record<string, string>,
  body = '',
): Promise<Reply> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path,
        method,
        headers: { ...headers, 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

t.test('the page, its headers, sessions and CSRF with a token', async (t) => {
  const d = await testDaemon({}, { BERMD_TOKEN: TOKEN });
  t.teardown(() => d.stop());
  const origin = d.url;
  const host = new URL(d.url).host;
  const page = { host, origin, 'sec-fetch-site': 'same-origin' };
  const replies: Reply[] = [];
  const send = async (
    path: string,
    method: string,
    headers: Record<string, string>,
    body = '',
  ): Promise<Reply> => {
    const r = await raw(d.url, path, method, headers, body);
    replies.push(r);
    return r;
  };

  // the page itself needs no session; its CSP forbids inline script and framing
  const index = await send('/', 'GET', { host, 'sec-fetch-site': 'none' });
  t.equal(index.status, 200);
  t.match(index.headers['content-type'], /^text\/html/);
  const csp = String(index.headers['content-security-policy']);
  t.match(csp, /default-src 'self'/);
  t.match(csp, /script-src 'self'(;|$)/, 'script only from the origin: no unsafe-inline');
  t.notMatch(csp, /unsafe-inline|unsafe-eval/);
  t.match(csp, /frame-ancestors 'none'/);
  t.equal(index.headers['x-content-type-options'], 'nosniff');
  t.equal(index.headers['referrer-policy'], 'no-referrer');
  t.notMatch(index.body, /<script>/, 'no inline script in the page');
  const js = await send('/assets/app.js', 'GET', { host, 'sec-fetch-site': 'same-origin' });
  t.equal(js.status, 200);
  t.match(js.headers['content-type'], /^text\/javascript/);
  const again = await send('/assets/app.js', 'GET', { host, 'if-none-match': String(js.headers.etag) });
  t.equal(again.status, 304, 'revalidation by ETag');
  const api = await send('/harnesses', 'GET', { host, authorization: `Bearer ${TOKEN}` });
  t.equal(api.status, 200);
  t.equal(api.headers['x-content-type-options'], 'nosniff', 'API replies carry the strict headers too');
  t.match(String(api.headers['content-security-policy']), /default-src 'none'/);

  // the page without a session: not logged in
  const before = await send('/session', 'GET', page);
  t.same(JSON.parse(before.body), { auth: 'token', session: false });
  t.equal((await send('/harnesses', 'GET', page)).status, 401);

  // a wrong token is refused; the right one gives the cookie and the CSRF proof
  t.equal(
    (await send('/session', 'POST', { ...page, 'content-type': 'application/json' }, '{"token":"nope"}'))
      .status,
    401,
  );
  const login = await send(
    '/session',
    'POST',
    { ...page, 'content-type': 'application/json' },
    JSON.stringify({ token: TOKEN }),
  );
  t.equal(login.status, 200);
  const setCookie = String(login.headers['set-cookie']);
  t.match(setCookie, /^berm_session=[A-Za-z0-9_-]{43}; /);
  t.match(setCookie, /HttpOnly/);
  t.match(setCookie, /SameSite=Strict/);
  const cookie = setCookie.split(';')[0]!;
  const { csrf } = JSON.parse(login.body) as { csrf: string };
  t.match(csrf, /^[A-Za-z0-9_-]{43}$/);
  const session = await send('/session', 'GET', { ...page, cookie });
  t.same(JSON.parse(session.body), { auth: 'token', session: true, csrf });

  // reads need the session; writes need the CSRF proof as well
  t.equal((await send('/harnesses', 'GET', { ...page, cookie })).status, 200);
  const noProof = await send('/harnesses/echo', 'DELETE', { ...page, cookie });
  t.equal(noProof.status, 403);
  t.match(JSON.parse(noProof.body), { error: /X-Berm-CSRF/ });
  const wrongProof = await send('/harnesses/echo', 'DELETE', {
    ...page,
    cookie,
    'x-berm-csrf': csrf.slice(1) + 'A',
  });
  t.equal(wrongProof.status, 403);
  const put = await d.req('/harnesses/echo', { method: 'PUT', body: ECHO });
  t.equal(put.status, 200);
  const call = await send(
    '/harnesses/echo/tools/echo',
    'POST',
    { ...page, cookie, 'x-berm-csrf': csrf },
    '{"a":1}',
  );
  t.equal(call.status, 200);
  t.same(JSON.parse(call.body), { done: '{"a":1}' });

  // another origin with the same cookie (another port of 127.0.0.1 is the same site to a browser,
  // so SameSite=Strict does not keep the cookie back): refused, whatever it carries
  const otherPort = `http://127.0.0.1:${Number(new URL(d.url).port) === 1 ? 2 : 1}`;
  for (const [o, site] of [
    [otherPort, 'same-site'],
    ['http://localhost:' + new URL(d.url).port, 'cross-site'],
    ['null', 'cross-site'],
  ] as const) {
    const r = await send('/harnesses/echo', 'DELETE', {
      host,
      origin: o,
      'sec-fetch-site': site,
      cookie,
      'x-berm-csrf': csrf,
    });
    t.equal(r.status, 403, `${o} is refused`);
    t.notOk(r.headers['access-control-allow-origin'], 'no CORS grant');
  }
  t.equal((await d.req('/harnesses/echo')).status, 200, 'nothing was removed');

  // logout ends the session server side: the old cookie no longer works
  t.equal((await send('/session', 'DELETE', { ...page, cookie })).status, 403, 'logout needs the proof too');
  const out = await send('/session', 'DELETE', { ...page, cookie, 'x-berm-csrf': csrf });
  t.equal(out.status, 204);
  t.match(String(out.headers['set-cookie']), /Max-Age=0/);
  t.equal((await send('/harnesses', 'GET', { ...page, cookie })).status, 401);
  t.equal(
    (await send('/harnesses/echo/tools/echo', 'POST', { ...page, cookie, 'x-berm-csrf': csrf }, '{}')).status,
    401,
  );

  // the token never comes back in a reply or goes to the log
  for (const r of replies) t.notOk(r.body.includes(TOKEN) || JSON.stringify(r.headers).includes(TOKEN));
  t.notOk(
    d.logs.some((l) => l.includes(TOKEN)),
    'not in the log',
  );
});

t.test('without a token: the page opens a session for its CSRF proof', async (t) => {
  const d = await testDaemon();
  t.teardown(() => d.stop());
  const host = new URL(d.url).host;
  const page = { host, origin: d.url, 'sec-fetch-site': 'same-origin' };
  t.same(JSON.parse((await raw(d.url, '/session', 'GET', page)).body), { auth: 'open', session: false });
  t.equal(
    (await raw(d.url, '/harnesses', 'GET', page)).status,
    200,
    'reads are open on loopback, as for the API',
  );
  t.equal((await d.req('/harnesses/echo', { method: 'PUT', body: ECHO })).status, 200);
  const forged = await raw(d.url, '/harnesses/echo', 'DELETE', page);
  t.equal(forged.status, 403, 'a write without a session and proof is refused');
  const login = await raw(d.url, '/session', 'POST', { ...page, 'content-type': 'application/json' }, '{}');
  t.equal(login.status, 200);
  const cookie = String(login.headers['set-cookie']).split(';')[0]!;
  const { csrf } = JSON.parse(login.body) as { csrf: string };
  t.equal(
    (await raw(d.url, '/harnesses/echo', 'DELETE', { ...page, cookie, 'x-berm-csrf': csrf })).status,
    204,
  );
  // a rebound name still reaches nothing, the page included
  t.equal((await raw(d.url, '/', 'GET', { host: 'evil.example' })).status, 403);
});

t.test('GET /events streams deploys, undeploys, wakes and invocations', async (t) => {
  const d = await testDaemon();
  t.teardown(() => d.stop());
  const ctl = new AbortController();
  const res = await d.req('/events', { signal: ctl.signal });
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /^text\/event-stream/);
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  const next = async (
    type: string,
    ms = 1000,
  ): Promise<{ data: Record<string, unknown>; waited: number }> => {
    const t0 = Date.now();
    for (;;) {
      const m = new RegExp(`event: ${type.replace('.', '\\.')}\\ndata: (.*)\\n\\n`).exec(buf);
      if (m) {
        buf = buf.slice(m.index + m[0].length);
        return { data: JSON.parse(m[1]!) as Record<string, unknown>, waited: Date.now() - t0 };
      }
      const left = ms - (Date.now() - t0);
      if (left <= 0) throw new Error(`no ${type} event within ${ms} ms; got ${JSON.stringify(buf)}`);
      const r = await Promise.race([
        reader.read(),
        new Promise<null>((r) => setTimeout(() => r(null), left)),
      ]);
      if (r === null) continue;
      if (r.done) throw new Error('stream ended');
      buf += r.value;
    }
  };
  const put = await d.req('/harnesses/echo', { method: 'PUT', body: ECHO });
  t.equal(put.status, 200);
  const dep = await next('deploy');
  t.match(dep.data, {
    name: 'echo',
    digest: /^[0-9a-f]{64}$/,
    tools: [{ name: 'echo' }, { name: 'echo_len' }],
  });
  t.ok(dep.waited < 1000, `deploy event within a second (${dep.waited} ms after the reply)`);
  await d.req('/harnesses/echo/tools/echo', { method: 'POST', body: '{}' });
  t.match((await next('invocation')).data, { harness: 'echo', trigger: 'call', outcome: 'ok', ms: Number });
  t.equal((await d.req('/harnesses/echo', { method: 'DELETE' })).status, 204);
  t.same((await next('undeploy')).data, { name: 'echo' });
  ctl.abort();
});

// A web page the operator visits must not drive bermd: a cross-origin form POST (a CORS "simple
// request", sent without preflight) once invoked a tool of a loopback daemon without a token, and a
// DNS name rebound to 127.0.0.1 reached the whole API. Requests are sent with node:http so that the
// Origin, Sec-Fetch-Site and Host headers are exactly what a browser would send.
import { request } from 'node:http';
import t from 'tap';
import { elf, testDaemon } from './helpers/daemon.js';

const ECHO = elf('fixtures/build/echo-gcc-O2.elf');

/** One request to `url` + `path` with raw headers; resolves to the status and body text. */
function raw(
  url: string,
  path: string,
  method: string,
  headers: Record<string, string>,
  body = '',
): Promise<{ status: number; body: string }> {
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
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

t.test('without a token: pages and rebound names are refused, API clients served', async (t) => {
  const d = await testDaemon();
  t.teardown(() => d.stop());
  t.equal((await d.req('/harnesses/echo', { method: 'PUT', body: ECHO })).status, 200);
  const host = new URL(d.url).host;
  const call = '/harnesses/echo/tools/echo';
  const form = { 'content-type': 'text/plain', host };

  // a plain API client: served
  const ok = await raw(d.url, call, 'POST', form, '{"text":"hi"}');
  t.equal(ok.status, 200, ok.body);

  // what a browser sends for a page on another site: refused before anything runs
  const page = await raw(d.url, call, 'POST', { ...form, origin: 'http://evil.example' }, '{"text":"hi"}');
  t.equal(page.status, 403);
  t.match(JSON.parse(page.body), {
    error: /requests from web pages are refused \(Origin: http:\/\/evil\.example\)/,
  });
  const site = await raw(d.url, '/harnesses', 'GET', { host, 'sec-fetch-site': 'cross-site' });
  t.equal(site.status, 403);
  t.equal((await raw(d.url, '/harnesses', 'GET', { host, 'sec-fetch-site': 'none' })).status, 200);

  // a DNS name rebound to 127.0.0.1: the page is same-origin, but the Host is not loopback
  const rebound = await raw(d.url, '/harnesses/echo', 'DELETE', { host: 'evil.example:80' });
  t.equal(rebound.status, 403);
  t.match(JSON.parse(rebound.body), { error: /Host evil\.example:80 is not a loopback name/ });
  const mcp = await raw(
    d.url,
    '/mcp',
    'POST',
    { host: 'evil.example', 'content-type': 'application/json' },
    '{}',
  );
  t.equal(mcp.status, 403);
  t.equal((await d.req('/harnesses/echo')).status, 200, 'nothing was undeployed');

  // loopback names in every spelling pass
  for (const h of ['localhost', `localhost:${new URL(d.url).port}`, '127.0.0.2', '[::1]:1']) {
    t.equal((await raw(d.url, '/harnesses', 'GET', { host: h })).status, 200, h);
  }
  t.equal((await raw(d.url, '/health', 'GET', { host: 'evil.example' })).status, 200, '/health stays open');
});

t.test('with a token: any Host, but still no pages', async (t) => {
  const d = await testDaemon({}, { BERMD_TOKEN: 's3cret-token' });
  t.teardown(() => d.stop());
  const auth = { authorization: 'Bearer s3cret-token' };
  t.equal((await raw(d.url, '/harnesses', 'GET', { ...auth, host: 'bermd.internal:7777' })).status, 200);
  const page = await raw(d.url, '/harnesses', 'GET', { ...auth, origin: 'https://bermd.internal' });
  t.equal(page.status, 403);
});

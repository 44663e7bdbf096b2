// The workbench's security in a real browser: a page of another loopback origin, opened in the
// same browser right after the operator logged in to the workbench (so the session cookie exists,
// and another port of 127.0.0.1 is the same site, so SameSite=Strict sends it), can neither read
// the API nor make a mutating request succeed (fetch with credentials, a no-cors POST, a form
// POST, a DELETE); the page's CSP blocks an inline script injected into it.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { browserMissing, launch } from './helpers/browser.js';
import { elf, testDaemon } from './helpers/daemon.js';

const TOKEN = 'wb-sec-token-0d41';
const missing = browserMissing();

/** The attacker's page: tries every way to read or change bermd at `?d=`, reports in window.__done. */
const EVIL = `<!doctype html><html><body><iframe name="sink"></iframe><script>
const D = new URLSearchParams(location.search).get('d');
const out = {};
(async () => {
  try { const r = await fetch(D + '/harnesses', { credentials: 'include' }); out.read = 'read ' + r.status + ' ' + (await r.text()); }
  catch (e) { out.read = 'blocked'; }
  try { await fetch(D + '/wakes', { method: 'POST', mode: 'no-cors', credentials: 'include',
      headers: { 'content-type': 'text/plain' }, body: JSON.stringify({ harness: 'wakes', delay_ms: 600000, id: 'evil-fetch' }) });
    out.post = 'sent'; } catch (e) { out.post = 'blocked'; }
  try { const r = await fetch(D + '/harnesses/wakes', { method: 'DELETE', credentials: 'include' }); out.del = 'status ' + r.status; }
  catch (e) { out.del = 'blocked'; }
  const f = document.createElement('form');
  f.method = 'POST'; f.action = D + '/wakes'; f.enctype = 'text/plain'; f.target = 'sink';
  const i = document.createElement('input');
  i.name = '{"harness":"wakes","delay_ms":600000,"id":"evil-form","x":"'; i.value = '"}';
  f.append(i); document.body.append(f);
  document.querySelector('iframe').onload = () => { out.form = 'submitted'; window.__done = out; };
  f.submit();
})();
</script></body></html>`;

if (missing !== null) {
  if (process.env.CI) t.fail(missing);
  else t.test('workbench security', { skip: missing }, async () => {});
} else {
  t.test('another origin cannot use the session; the CSP blocks injected script', async (t) => {
    const d = await testDaemon({}, { BERMD_TOKEN: TOKEN });
    t.teardown(() => d.stop());
    t.equal(
      (await d.req('/harnesses/wakes', { method: 'PUT', body: elf('examples/wakes.elf') })).status,
      200,
    );
    const evil = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(EVIL));
    await new Promise<void>((r) => evil.listen(0, '127.0.0.1', r));
    t.teardown(() => new Promise<void>((r) => evil.close(() => r())));
    const evilPort = (evil.address() as AddressInfo).port;

    const browser = await launch();
    t.teardown(() => browser.close());
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(d.url + '/');
    await page.getByLabel('Token').fill(TOKEN);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Harnesses' }).waitFor();
    t.ok(
      (await context.cookies()).some((c) => c.name === 'berm_session'),
      'logged in: the cookie is there',
    );

    for (const origin of [`http://127.0.0.1:${evilPort}`, `http://localhost:${evilPort}`]) {
      const attacker = await context.newPage();
      await attacker.goto(`${origin}/?d=${encodeURIComponent(d.url)}`);
      await attacker.waitForFunction('window.__done', undefined, { timeout: 20_000 });
      const out = (await attacker.evaluate('window.__done')) as Record<string, string>;
      t.equal(out.read, 'blocked', `${origin}: the API cannot be read`);
      t.equal(out.del, 'blocked', `${origin}: a DELETE is stopped (no CORS grant)`);
      await attacker.close();
    }
    const wakes = (await (await d.req('/wakes')).json()) as { wakes: { id: string }[]; pending: number };
    t.same(
      wakes.wakes.map((w) => w.id),
      [],
      'neither the no-cors POST nor the form POST armed a wake',
    );
    t.equal((await d.req('/harnesses/wakes')).status, 200, 'nothing was removed');
    const metrics = await (await d.req('/metrics')).text();
    t.match(
      metrics,
      /berm_http_requests_total\{route="unknown",status="403"\} [1-9]/,
      'bermd answered them 403',
    );

    // an inline script injected into the workbench page does not run: the CSP refuses it
    const violated = await page.evaluate(
      `new Promise((resolve) => {
        document.addEventListener('securitypolicyviolation', (e) => resolve(e.violatedDirective), { once: true });
        const s = document.createElement('script');
        s.textContent = 'window.__pwned = 1';
        document.body.append(s);
      })`,
    );
    t.match(violated, /^script-src/, 'a CSP violation of script-src');
    t.equal(await page.evaluate('window.__pwned'), undefined, 'the injected script did not run');
  });
}

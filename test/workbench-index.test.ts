// The workbench's Index view in a real browser: bermd configured with a real berm-indexd (the index
// service, on loopback) that published a harness pushed to a real local registry (Debian's
// docker-registry); the page searches through bermd, shows the result's tools and publisher,
// installs it (bermd pulls, verifies and deploys), and then shows it "installed" by digest. The
// Deploy view's OCI reference deploys through the same install. axe-core checks the view.
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { readElf } from '../src/elf/reader.js';
import { startIndexService } from '../src/index/service.js';
import { tokenHash } from '../src/index/tokens.js';
import { parseReference, pushHarness } from '../src/oci/index.js';
import { axeSerious, browserMissing, launch } from './helpers/browser.js';
import { REPO, testDaemon } from './helpers/daemon.js';
import { startRegistry } from './helpers/oci-registry.js';

const ECHO = new Uint8Array(readFileSync(join(REPO, 'fixtures', 'build', 'echo-gcc-O2.elf')));
const missing = browserMissing();

if (missing !== null) {
  if (process.env.CI) t.fail(missing);
  else t.test('the Index view', { skip: missing }, async () => {});
} else {
  t.test('the Index view searches berm-indexd and installs from a registry', async (t) => {
    const reg = await startRegistry();
    t.teardown(() => reg.stop());
    const ref = `${reg.host}/tools/echo:v1`;
    await pushHarness(parseReference(ref), ECHO, readElf(ECHO).manifest!, { env: {} });
    const svc = await startIndexService({
      root: mkdtempSync(join(tmpdir(), 'wb-indexd-')),
      addr: '127.0.0.1:0',
      tokens: new Map([[tokenHash('pub-token'), { name: 'ada', operator: false }]]),
    });
    t.teardown(() => svc.close());
    const pub = await fetch(`${svc.url}/harnesses`, {
      method: 'POST',
      headers: { authorization: 'Bearer pub-token', 'content-type': 'application/json' },
      body: JSON.stringify({ reference: ref }),
    });
    t.equal(pub.status, 200, 'published to berm-indexd');
    const d = await testDaemon({ index: svc.url });
    t.teardown(() => d.stop());

    const browser = await launch();
    t.teardown(() => browser.close());
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('console', (m) => void (m.type() === 'error' && errors.push(m.text())));
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(d.url + '/#/index');
    await page.getByRole('heading', { name: 'Index' }).waitFor();
    await page.getByLabel('Search the index').fill('echo');
    await page.getByRole('button', { name: 'Search' }).click();
    const card = page.locator(`[data-reference="${ref}"]`);
    await card.waitFor();
    t.match(await card.textContent(), /by ada/, 'the publisher');
    t.same(await card.locator('.tool-names code').allTextContents(), ['echo', 'echo_len'], 'the tools');
    const digest = createHash('sha256').update(ECHO).digest('hex');
    t.equal(await card.locator('.digest').getAttribute('title'), digest, 'the digest: sha256 of the ELF');
    t.same(await axeSerious(page), [], 'axe: no serious or critical violation on Index');
    await card.getByRole('button', { name: 'Install' }).click();
    await card
      .locator('[data-installed="true"]', { hasText: 'installed as echo' })
      .waitFor({ timeout: 30_000 });
    const h = (await (await d.req('/harnesses/echo')).json()) as { digest: string };
    t.equal(h.digest, digest, 'deployed on the daemon with the published digest');
    // a new search says so too, from bermd's own "installed"
    await page.getByRole('button', { name: 'Search' }).click();
    await card.locator('[data-installed="true"]').waitFor();

    // the Deploy view's OCI reference: pulled, verified and deployed under the name given
    await page.goto(d.url + '/#/deploy');
    await page.getByLabel('Reference').fill(ref);
    t.equal(await page.getByLabel('Name').nth(1).inputValue(), 'echo', 'name from the reference');
    await page.getByLabel('Name').nth(1).fill('echo2');
    await page.getByRole('button', { name: 'Pull and deploy' }).click();
    await page.getByText('Deployed').waitFor({ timeout: 30_000 });
    t.equal((await d.req('/harnesses/echo2')).status, 200);
    t.same(errors, [], 'no console error');
  });
}

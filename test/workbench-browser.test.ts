// The workbench in a real browser (Debian's Chromium through playwright-core), against a real
// bermd with a token: log in, deploy through the page's file picker and see the harness appear
// live in a second page opened before (and a CLI deploy too), read a harness whose manifest holds
// HTML as text, run a tool through the generated form with its log line streamed before the
// result, follow a trap to its pc in the Code view, arm and cancel a wake, remove behind a
// confirmation, use the keyboard, fit 360 px, log out (the session ends server side). axe-core
// finds no serious or critical violation on any view; no page logs an unexpected console error.
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import t from 'tap';
import type { Page } from 'playwright-core';
import { axeSerious, browserMissing, buildProbe, launch } from './helpers/browser.js';
import { REPO, testDaemon } from './helpers/daemon.js';

const TOKEN = 'wb-browser-token-51c2e9';
const missing = browserMissing();
const probe = missing === null ? buildProbe() : null;

if (missing !== null || probe === null) {
  const why = missing ?? 'the RISC-V toolchain is missing (riscv64-unknown-elf-gcc)';
  if (process.env.CI) t.fail(why);
  else t.test('the workbench end to end', { skip: why }, async () => {});
} else {
  t.test('the workbench end to end', async (t) => {
    const d = await testDaemon({}, { BERMD_TOKEN: TOKEN });
    t.teardown(() => d.stop());
    const browser = await launch();
    t.teardown(() => browser.close());
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: d.url });
    let step = 'start';
    const errors: string[] = [];
    const urls: string[] = [];
    const bodies: string[] = [];
    const watch = (p: Page, name: string): Page => {
      p.on('console', (m) => {
        if (m.type() === 'error') errors.push(`${name} @${step}: ${m.text()}`);
      });
      p.on('pageerror', (e) => errors.push(`${name} @${step}: pageerror ${e.message}`));
      p.on('request', (r) => urls.push(r.url()));
      p.on('response', (r) => {
        if (!(r.headers()['content-type'] ?? '').includes('event-stream'))
          r.text().then(
            (b) => bodies.push(b),
            () => {},
          );
      });
      return p;
    };
    const page = watch(await context.newPage(), 'page1');
    const axe = async (view: string): Promise<void> => {
      const v = await axeSerious(page);
      t.same(v, [], `axe: no serious or critical violation on ${view}`);
    };

    // log in: a wrong token first (its 401 is the one expected console error of this step)
    step = 'login';
    await page.goto(d.url + '/');
    await page.getByLabel('Token').waitFor();
    await axe('the login form');
    await page.getByLabel('Token').fill('not-the-token');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('alert').filter({ hasText: 'wrong token' }).waitFor();
    const loginErrors = errors.splice(0);
    t.ok(
      loginErrors.every((e) => /status of 401/.test(e)),
      'only the refused login logged an error',
    );
    step = 'logged-in';
    await page.getByLabel('Token').fill(TOKEN);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Harnesses' }).waitFor();
    t.equal(await page.evaluate('document.cookie'), '', 'the session cookie is HttpOnly: script sees none');
    await axe('the empty harness list');

    // a second page, opened before the deploy, shares the session and listens to the feed
    const other = watch(await context.newPage(), 'page2');
    await other.goto(d.url + '/');
    await other.getByText('Live', { exact: true }).waitFor();

    // deploy through the file picker: name prefilled from the file name, progress, then live in page 2
    step = 'deploy';
    await page.getByRole('link', { name: 'Deploy', exact: true }).first().click();
    await page.getByRole('heading', { name: 'Deploy' }).waitFor();
    await axe('Deploy');
    // a file dropped on the drop zone is picked like a chosen one
    const dropped = await page.evaluateHandle(
      `(() => { const dt = new DataTransfer(); dt.items.add(new File([new Uint8Array([0x7f, 0x45, 0x4c, 0x46])], 'My Tool.elf')); return dt; })()`,
    );
    await page.dispatchEvent('[data-testid="drop"]', 'drop', { dataTransfer: dropped });
    t.equal(await page.getByLabel('Name').first().inputValue(), 'my-tool', 'name from the dropped file');
    t.match(await page.locator('[data-testid="drop"]').textContent(), /My Tool\.elf/);
    await page.setInputFiles('#elf', probe);
    t.equal(await page.getByLabel('Name').first().inputValue(), 'wbprobe', 'name prefilled from wbprobe.elf');
    const seen = other
      .locator('[data-harness="wbprobe"]')
      .waitFor({ timeout: 60_000 })
      .then(() => Date.now());
    await page.locator('form').first().getByRole('button', { name: 'Deploy' }).click();
    await page.getByText('Deployed').waitFor({ timeout: 60_000 });
    const deployedAt = Date.now();
    const shownAt = await seen;
    t.ok(
      shownAt - deployedAt < 1000,
      `the deploy appeared in the other page within a second (${shownAt - deployedAt} ms)`,
    );

    // a refused deploy shows the translator's message verbatim
    step = 'refused-deploy';
    await page.setInputFiles('#elf', {
      name: 'junk.elf',
      mimeType: 'application/octet-stream',
      buffer: Buffer.from('not an elf at all'),
    });
    await page.locator('form').first().getByRole('button', { name: 'Deploy' }).click();
    const refusal = await d.req('/harnesses/junk', { method: 'PUT', body: 'not an elf at all' });
    const expected = ((await refusal.json()) as { error: string }).error;
    await page.locator('.error-box').filter({ hasText: expected }).waitFor();
    t.equal((await page.locator('.error-box').textContent())?.trim(), expected, 'the refusal verbatim');
    errors.splice(0).forEach((e) => t.match(e, /status of 400/, 'only the refused upload logged an error'));

    // a deploy from the CLI appears in the open page within a second
    step = 'cli-deploy';
    const cliSeen = other
      .locator('[data-harness="echo"]')
      .waitFor({ timeout: 60_000 })
      .then(() => Date.now());
    const cli = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const p = spawn(
        process.execPath,
        [
          join(REPO, 'bin', 'berm.js'),
          'deploy',
          'echo',
          join(REPO, 'fixtures/build/echo-gcc-O2.elf'),
          '--host',
          d.url,
        ],
        {
          env: { ...process.env, BERM_TOKEN: TOKEN, BERMD_TOKEN: TOKEN },
        },
      );
      let out = '';
      p.stdout.on('data', (c: Buffer) => (out += c));
      p.stderr.on('data', (c: Buffer) => (out += c));
      p.on('close', (code) => resolve({ code, out }));
    });
    const cliDone = Date.now();
    t.equal(cli.code, 0, 'berm deploy succeeded');
    t.match(cli.out, /^deployed echo [0-9a-f]{64}/);
    const cliShown = await cliSeen;
    t.ok(cliShown - cliDone < 1000, `the CLI deploy appeared within a second (${cliShown - cliDone} ms)`);

    // the MCP endpoint URL goes to the clipboard
    await page.getByRole('button', { name: 'Copy MCP URL' }).click();
    await page.getByRole('button', { name: 'Copied' }).waitFor();
    t.equal(await page.evaluate('navigator.clipboard.readText()'), `${d.url}/mcp`, 'the MCP URL copied');

    // the list filters as you type; the keyboard reaches a row and opens it
    step = 'list';
    await page.getByRole('link', { name: 'Harnesses' }).click();
    await page.getByLabel('Filter harnesses').fill('wbp');
    await page.locator('[data-count="1"]').waitFor();
    t.equal(await page.locator('.hrow').count(), 1, 'one row left');
    await page.getByLabel('Filter harnesses').press('Tab');
    t.equal(
      await page.evaluate("document.activeElement?.getAttribute('href')"),
      '#/h/wbprobe',
      'Tab reaches the row',
    );
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'wbprobe' }).waitFor();

    // detail: HTML of the manifest shown as text, MCP names, schema, capabilities
    step = 'detail';
    const usage = await page.locator('.usage').textContent();
    t.equal(usage, 'Workbench probe <img src=x onerror="window.__xss=1"><b>not bold</b>', 'usage as text');
    t.equal(
      await page.locator('.usage img, .usage b, .description script').count(),
      0,
      'no element made from it',
    );
    t.match(
      await page.locator('[data-tool="greet"] .description').textContent(),
      /<script>window.__xss=2<\/script>/,
    );
    t.equal(await page.evaluate(() => (globalThis as { __xss?: unknown }).__xss), undefined, 'nothing ran');
    t.same(await page.locator('.mcp-name').allTextContents(), ['wbprobe.crash', 'wbprobe.greet']);
    await page.locator('[data-tool="greet"] summary').click();
    t.match(
      await page.locator('[data-tool="greet"] .schema').textContent(),
      /"enum": \[\s*"calm",\s*"glad"\s*\]/,
    );
    await axe('the harness detail');

    // run through the generated form: the log line streams before the result
    step = 'run';
    await page.locator('[data-tool="greet"]').getByRole('link', { name: 'Run' }).click();
    await page.getByRole('heading', { name: 'wbprobe.greet' }).waitFor();
    t.equal(await page.locator('.field').count(), 4, 'a field per property');
    t.equal(
      await page.locator('#' + (await page.getByLabel(/^name/).getAttribute('id'))).getAttribute('type'),
      'text',
    );
    t.equal(await page.getByLabel(/^times/).getAttribute('type'), 'number');
    t.equal(await page.getByLabel(/^loud/).getAttribute('type'), 'checkbox');
    t.same(
      await page.locator('select option').allTextContents(),
      ['(none)', 'calm', 'glad'],
      'the enum as a select',
    );
    t.equal(await page.locator('.field .req').count(), 1, 'one required mark (name)');
    await axe('the Run form');
    await page.getByLabel(/^name/).fill('ann');
    await page.getByLabel(/^mood/).selectOption({ label: 'glad' });
    await page.getByRole('button', { name: 'Raw JSON' }).click();
    t.same(
      JSON.parse(await page.locator('#raw-args').inputValue()),
      { name: 'ann', mood: 'glad' },
      'the raw JSON of the form',
    );
    await page.getByRole('button', { name: 'Raw JSON' }).click();
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('.live-log li', { hasText: 'greet: working for ann' }).waitFor({ timeout: 30_000 });
    t.equal(await page.locator('.transcript .entry').count(), 0, 'the log line is shown before the result');
    const done = page.locator('.entry[data-kind="done"]');
    await done.waitFor({ timeout: 30_000 });
    t.same(JSON.parse((await done.locator('.result').textContent()) ?? ''), {
      greeting: 'hello ann',
      times: 1,
    });
    t.match(await done.textContent(), /\d+ ms/, 'elapsed ms');

    // a trap: the transcript links to its pc, which lies in wb_fault (by the ELF's own symbol table)
    step = 'trap';
    await page.goto(d.url + '/#/h/wbprobe/run/crash');
    await page.getByRole('button', { name: 'Run' }).click();
    const trap = page.locator('.entry[data-kind="trap"]');
    await trap.waitFor({ timeout: 30_000 });
    t.equal(
      await page.locator('.transcript .entry').first().getAttribute('data-kind'),
      'trap',
      'newest first',
    );
    const link = trap.getByRole('link', { name: /pc 0x[0-9a-f]+ in Code/ });
    const pc = parseInt(/pc=0x([0-9a-f]+)$/.exec((await link.getAttribute('href')) ?? '')?.[1] ?? 'NaN', 16);
    const nm = spawnSync('riscv64-unknown-elf-nm', ['-S', probe], { encoding: 'utf8' }).stdout;
    const sym = /^([0-9a-f]+) ([0-9a-f]+) t wb_fault$/m.exec(nm);
    t.ok(sym, 'wb_fault in the symbol table');
    const [start, size] = [parseInt(sym![1]!, 16), parseInt(sym![2]!, 16)];
    t.ok(
      pc >= start && pc < start + size,
      `pc 0x${pc.toString(16)} lies in wb_fault [0x${start.toString(16)}, +${size})`,
    );
    await link.click();
    await page.waitForURL(/#\/code\/wbprobe\?pc=0x/);
    await page.getByRole('heading', { name: /Code of wbprobe/ }).waitFor();
    // the function holding the pc, each guest instruction beside its WAT, the trap's row focused
    const code = await d.req(`/harnesses/wbprobe/code?pc=0x${pc.toString(16)}`);
    t.equal(code.status, 200);
    const listing = (await code.json()) as { name: string; focus: string; rows: { pc: string }[] };
    t.equal(listing.name, 'wb_fault', 'the function holding the pc');
    const row = page.locator('tr.focus');
    await row.waitFor();
    t.equal(await row.getAttribute('data-pc'), `0x${pc.toString(16)}`, 'the trap pc row is focused');
    t.equal(
      await page.locator('table.asm tbody tr').count(),
      listing.rows.length,
      'a row per guest instruction',
    );
    t.ok(((await row.locator('pre.wat').textContent()) ?? '').trim().length > 0, 'its WAT beside it');
    t.match(await page.locator('.listing h2').textContent(), /wb_fault/);
    await axe('the Code view');

    // wakes: arm one, see it pending, cancel it; a short one fires and shows its lateness
    step = 'wakes';
    await page.getByRole('link', { name: 'Wakes' }).click();
    await page.getByRole('heading', { name: 'Arm a wake' }).waitFor();
    await page.getByLabel('Harness').selectOption('wbprobe');
    await page.getByLabel('Delay (ms)').fill('600000');
    await page.getByLabel('Id (optional)').fill('wb-long');
    await page.getByRole('button', { name: 'Arm' }).click();
    await page.locator('[data-wake="wb-long"]').waitFor();
    const pending = (await (await d.req('/wakes')).json()) as { wakes: { id: string; due_at: number }[] };
    t.ok(
      pending.wakes.some((w) => w.id === 'wb-long'),
      'armed on the daemon',
    );
    await axe('Wakes');
    await page.getByRole('button', { name: 'Cancel wake wb-long' }).click();
    await page.locator('[data-wake="wb-long"]').waitFor({ state: 'detached' });
    const after = (await (await d.req('/wakes')).json()) as { wakes: { id: string }[] };
    t.notOk(
      after.wakes.some((w) => w.id === 'wb-long'),
      'cancelled on the daemon',
    );
    await page.getByLabel('Delay (ms)').fill('50');
    await page.getByLabel('Id (optional)').fill('wb-soon');
    await page.getByRole('button', { name: 'Arm' }).click();
    const firing = page.locator('.fired tr', { hasText: 'wb-soon' });
    await firing.waitFor({ timeout: 30_000 });
    t.match(await firing.textContent(), /\d+ ms/, 'the firing with its lateness');

    // health: figures from /metrics
    step = 'health';
    await page.getByRole('link', { name: 'Health' }).click();
    await page.locator('[data-stat="queue"]').filter({ hasText: /^\d+/ }).waitFor();
    await axe('Health');

    // remove behind a confirmation (Cancel keeps it), gone live in the other page
    step = 'remove';
    await page.goto(d.url + '/#/h/echo');
    await page.getByRole('button', { name: 'Remove' }).click();
    await page.getByRole('dialog').waitFor();
    await axe('the remove confirmation');
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'hidden' });
    t.equal((await d.req('/harnesses/echo')).status, 200, 'Escape removed nothing');
    await page.getByRole('button', { name: 'Remove' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Remove' }).click();
    await page.getByRole('heading', { name: 'Harnesses' }).waitFor();
    await other.locator('[data-harness="echo"]').waitFor({ state: 'detached', timeout: 5000 });
    t.equal((await d.req('/harnesses/echo')).status, 404, 'removed on the daemon');

    // 360 px: every view fits without sideways scrolling
    step = 'narrow';
    const narrow = watch(await context.newPage(), 'narrow');
    await narrow.setViewportSize({ width: 360, height: 740 });
    for (const view of ['#/', '#/deploy', '#/h/wbprobe', '#/h/wbprobe/run/greet', '#/wakes', '#/health']) {
      await narrow.goto(d.url + '/' + view);
      await narrow.locator('main h1').first().waitFor();
      const width = await narrow.evaluate<number>('document.documentElement.scrollWidth');
      t.ok(width <= 360, `${view} fits 360 px (${width})`);
    }

    // log out: the session ends on the daemon, so the old cookie is worthless
    step = 'logout';
    const cookies = await context.cookies();
    const session = cookies.find((c) => c.name === 'berm_session');
    t.ok(session?.httpOnly && session.sameSite === 'Strict', 'HttpOnly, SameSite=Strict');
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.getByLabel('Token').waitFor();
    const host = new URL(d.url).host;
    const reuse = await fetch(d.url + '/harnesses', {
      headers: { cookie: `berm_session=${session!.value}`, 'sec-fetch-site': 'same-origin', host },
    });
    t.equal(reuse.status, 401, 'the old session cookie is refused after logout');

    // the token was never in a URL, a response, storage, or the log
    t.same(
      urls.filter((u) => u.includes(TOKEN)),
      [],
      `not in any of ${urls.length} request URLs`,
    );
    t.notOk(
      bodies.some((b) => b.includes(TOKEN)),
      `not in any of ${bodies.length} response bodies`,
    );
    t.notOk(
      d.logs.some((l) => l.includes(TOKEN)),
      'not in the log',
    );
    t.same(
      await page.evaluate('[localStorage.length, sessionStorage.length]'),
      [0, 0],
      'no web storage used',
    );
    t.same(
      errors.filter((e) => !/@logout: .*status of 401/.test(e)),
      [],
      'no unexpected console error',
    );
  });
}

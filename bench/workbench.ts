/**
 * Benchmark of the workbench page (bench/run.ts section `workbench`; run alone with
 *   node --stack-size=4000 --import ./scripts/ts/register.mjs bench/run.ts section workbench):
 * - the bundle's size: dist/workbench (app.js, app.css, index.html, icon.svg) gzipped at level 9,
 *   against a target of 150 KiB;
 * - first paint of `/` served by bermd on loopback in headless Chromium (the `first-paint` entry of
 *   the Paint Timing API, median of fresh pages), against a target of 200 ms; the baseline in the
 *   same run is a static page of the same size without script, from a plain node:http server;
 * - the list with 1,000 deployed harnesses (the echo ELF deployed under 1,000 names): time from
 *   navigation start to the first rows in the DOM, and the time one keystroke in the filter takes
 *   to update the list (median of several filters).
 */
import { gzipSync } from 'node:zlib';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Page } from 'playwright-core';
import { startDaemon } from '../src/daemon/daemon.js';
import { createRuntimeBackend } from '../src/daemon/runtime-backend.js';
import { resolveSettings } from '../src/daemon/settings.js';

type Fig = (name: string, value: number, unit: string, label: string, better?: 'lower' | 'higher') => void;

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const QUICK = process.env.BENCH_QUICK === '1';
const CACHE = join(tmpdir(), 'berm-bench-cache');
const ASSETS = join(ROOT, 'dist', 'workbench');

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

/** First paint of `url` in a fresh page, ms after navigation start. */
async function firstPaint(page: Page, url: string): Promise<number> {
  await page.goto(url, { waitUntil: 'load' });
  return page.evaluate<number>(
    `new Promise((resolve) => {
      const seen = () => performance.getEntriesByName('first-paint')[0];
      const e = seen();
      if (e) return resolve(e.startTime);
      new PerformanceObserver(() => { const f = seen(); if (f) resolve(f.startTime); }).observe({ type: 'paint', buffered: true });
    })`,
  );
}

/** The `workbench` section: see the module comment. */
export async function benchWorkbench(fig: Fig, progress: (msg: string) => void): Promise<void> {
  const files = readdirSync(ASSETS);
  const gz = files.reduce((n, f) => n + gzipSync(readFileSync(join(ASSETS, f)), { level: 9 }).length, 0);
  const raw = files.reduce((n, f) => n + readFileSync(join(ASSETS, f)).length, 0);
  fig('workbench.bundle_gzip', gz / 1024, 'KiB', 'workbench bundle gzipped (target <= 150 KiB)');
  fig('workbench.bundle_raw', raw / 1024, 'KiB', 'workbench bundle, uncompressed');

  const root = mkdtempSync(join(tmpdir(), 'berm-bench-wb-'));
  const settings = {
    ...resolveSettings({ addr: '127.0.0.1:0', root, workers: '1', cacheDir: CACHE }, {}),
    limit: [],
  };
  const d = await startDaemon(settings, createRuntimeBackend, {}, () => {});
  const html = readFileSync(join(ASSETS, 'index.html'), 'utf8');
  const plain = createServer((_q, s) =>
    s
      .writeHead(200, { 'content-type': 'text/html' })
      .end(
        html
          .replace(/<script[^>]*><\/script>/, '')
          .replace(/<link rel="stylesheet"[^>]*>/, '<p>berm workbench</p>'),
      ),
  );
  await new Promise<void>((r) => plain.listen(0, '127.0.0.1', r));
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  try {
    const runs = QUICK ? 5 : 15;
    progress(`workbench: first paint, ${runs} fresh pages each`);
    const paint = async (url: string): Promise<number> => {
      const out: number[] = [];
      for (let i = 0; i < runs + 1; i++) {
        const ctx = await browser.newContext();
        const page = await ctx.newPage();
        const ms = await firstPaint(page, url);
        if (i > 0) out.push(ms); // the first warms the browser's own caches
        await ctx.close();
      }
      return median(out);
    };
    const fp = await paint(d.url + '/');
    const base = await paint(`http://127.0.0.1:${(plain.address() as AddressInfo).port}/`);
    fig(
      'workbench.first_paint',
      fp,
      'ms',
      'workbench first paint on loopback, headless Chromium (target <= 200 ms)',
    );
    fig('workbench.first_paint_static', base, 'ms', 'baseline: first paint of a static page without script');
    fig('workbench.first_paint_ratio', fp / base, 'x', 'workbench first paint / static page first paint');

    const n = QUICK ? 300 : 1000;
    progress(`workbench: deploying ${n} harnesses`);
    const t0 = performance.now();
    const elf = readFileSync(join(ROOT, 'fixtures/build/echo-gcc-O2.elf'));
    for (let i = 0; i < n; i += 8) {
      await Promise.all(
        Array.from({ length: Math.min(8, n - i) }, (_, k) =>
          fetch(`${d.url}/harnesses/h${String(i + k).padStart(4, '0')}`, { method: 'PUT', body: elf }).then(
            (r) => {
              if (r.status !== 200) throw new Error(`deploy ${i + k}: ${r.status}`);
            },
          ),
        ),
      );
    }
    progress(`workbench: list of ${n} (deployed in ${((performance.now() - t0) / 1000).toFixed(1)} s)`);
    const list: number[] = [];
    const keys: number[] = [];
    for (let i = 0; i < (QUICK ? 3 : 7); i++) {
      const ctx = await browser.newContext();
      const page = await ctx.newPage();
      await page.addInitScript(`
        new MutationObserver((_, o) => {
          if (document.querySelector('.hrow')) { window.__listAt = performance.now(); o.disconnect(); }
        }).observe(document, { childList: true, subtree: true });`);
      await page.goto(d.url + '/');
      await page.waitForFunction(() => (globalThis as { __listAt?: number }).__listAt !== undefined);
      list.push(await page.evaluate<number>('window.__listAt'));
      // each filter changes the rows shown (h0000..h0999: 100, 10, 1, 100, all, 100, none)
      for (const q of ['h00', 'h001', 'h0012', 'h02', '', 'h01', 'zz']) {
        keys.push(
          await page.evaluate<number>(`new Promise((resolve) => {
            const input = document.getElementById('filter');
            const count = document.querySelector('[data-count]');
            const before = count.getAttribute('data-count');
            const t0 = performance.now();
            setTimeout(() => resolve(NaN), 5000);
            new MutationObserver((_, o) => { o.disconnect(); resolve(performance.now() - t0); })
              .observe(document.querySelector('.hlist ul'), { childList: true, subtree: true, attributes: true });
            input.value = ${JSON.stringify(q)};
            input.dispatchEvent(new Event('input', { bubbles: true }));
            void before;
          })`),
        );
      }
      await ctx.close();
    }
    fig(
      `workbench.list_${n}`,
      median(list),
      'ms',
      `workbench: navigation to the first rows of ${n} harnesses`,
    );
    fig(
      `workbench.filter_${n}`,
      median(keys),
      'ms',
      `workbench: one filter keystroke re-renders ${n} harnesses`,
    );
  } finally {
    await browser.close();
    plain.close();
    await d.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

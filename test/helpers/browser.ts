// Debian's Chromium driven by playwright-core for the workbench's browser tests: one launch per
// test file (headless, no sandbox as root, no background networking: the machine has no network),
// axe-core injected into a page for the accessibility check, and the probe harness built from
// test/data/wbprobe with the guest SDK.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { REPO } from './daemon.js';

export const CHROMIUM = '/usr/bin/chromium';

/** Why the browser tests cannot run here, or null. Under CI a missing piece fails instead. */
export function browserMissing(): string | null {
  if (!existsSync(CHROMIUM)) return `${CHROMIUM} is missing (apt-get install chromium)`;
  if (!existsSync(join(REPO, 'dist', 'workbench', 'app.js')))
    return 'dist/workbench is not built (npm run build)';
  return null;
}

/** Start headless Chromium with the flags this machine needs. */
export function launch(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
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
}

const AXE = readFileSync(join(REPO, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');

/** One axe-core violation, reduced. */
export interface Violation {
  id: string;
  impact: string | null;
  help: string;
  nodes: string[];
}

/**
 * Run axe-core in the page (injected through the DevTools protocol, which the page's CSP does not
 * govern) and return its serious and critical violations.
 */
export async function axeSerious(page: Page): Promise<Violation[]> {
  await page.evaluate(AXE);
  const found = await page.evaluate(async () => {
    const axe = (
      globalThis as unknown as {
        axe: {
          run: (
            c: unknown,
            o: unknown,
          ) => Promise<{
            violations: { id: string; impact: string | null; help: string; nodes: { target: unknown[] }[] }[];
          }>;
        };
      }
    ).axe;
    const r = await axe.run((globalThis as unknown as { document: unknown }).document, {
      resultTypes: ['violations'],
    });
    return r.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.map((n) => JSON.stringify(n.target)),
    }));
  });
  return found.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

/**
 * Build the probe harness (test/data/wbprobe) into a temp folder with the guest SDK.
 * @returns the ELF's path, or null when the RISC-V toolchain is missing
 */
export function buildProbe(): string | null {
  if (spawnSync('riscv64-unknown-elf-gcc', ['--version']).status !== 0) return null;
  const out = mkdtempSync(join(tmpdir(), 'wbprobe-'));
  const r = spawnSync('make', ['-s', '-C', join(REPO, 'test', 'data', 'wbprobe'), `BUILD=${out}`, 'all'], {
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`building the probe harness failed: ${r.stderr}`);
  return join(out, 'wbprobe.elf');
}

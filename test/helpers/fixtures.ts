// Shared access to the committed guest fixtures (fixtures/manifest.json, cases.json, expected.json).
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export const ROOT = resolve(import.meta.dirname, '..', '..');
export const FIXTURES = join(ROOT, 'fixtures');

export interface FixtureElf {
  path: string;
  source: string;
  compiler: string;
  opt: string;
  model: string;
  sha256: string;
}

export interface RawCase {
  source: string;
  symbol: string;
  args: string[];
  returns: number;
  a0?: string;
  a1?: string;
}

export interface ToolCase {
  source: string;
  abi?: number;
  tool: string;
  args: string;
  ok: boolean;
  result: string;
  caps?: string[];
}

export interface TrapCase {
  source: string;
  symbol?: string;
  tool?: string;
  args: string[] | string;
  trap: string;
}

const readJson = (name: string) => JSON.parse(readFileSync(join(FIXTURES, name), 'utf8'));

/** Every fixture image listed in fixtures/manifest.json, with an absolute path. */
function fixtureImages(): FixtureElf[] {
  const m = readJson('manifest.json');
  const list: FixtureElf[] = Array.isArray(m) ? m : (m.fixtures ?? m.elfs ?? m.files);
  return list.map((f) => ({
    ...f,
    path: resolve(FIXTURES, '..', f.path),
    source: f.source.split('/').pop()!,
  }));
}

/** Every fixture ELF listed in fixtures/manifest.json, with an absolute path. */
export function fixtureElfs(): FixtureElf[] {
  return fixtureImages().filter((f) => f.path.endsWith('.elf'));
}

/** The fixtures also built as WebAssembly harnesses (fixtures/fixtures.py WASM32), absolute paths. */
export function fixtureWasms(): FixtureElf[] {
  return fixtureImages().filter((f) => f.path.endsWith('.wasm'));
}

export const expected = (): { raw: RawCase[]; tools: ToolCase[] } => readJson('expected.json');
export const cases = (): { traps: TrapCase[] } => readJson('cases.json');

/** A cache directory shared by the test processes of one run (warm after the first translation). */
export const TEST_CACHE = process.env.BERM_TEST_CACHE ?? join(tmpdir(), 'berm-test-cache');

/** Parse a decimal or 0x-hex case integer (two's complement for negatives). */
export function caseInt(s: string): bigint {
  return BigInt.asUintN(64, BigInt(s));
}

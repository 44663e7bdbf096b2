/**
 * Run the `berm` CLI as a child process (node --stack-size=4000 bin/berm.js ...), the way a user
 * does, collecting its exit code, output and wall time; killed with SIGKILL after `killMs`.
 */
import { spawn } from 'node:child_process';
import * as path from 'node:path';

/** What a CLI run produced; `ms` is wall time from spawn to close. */
export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

const REPO = path.resolve(import.meta.dirname, '..', '..');

/**
 * @param args command line after `berm`
 * @param cacheDir BERM_CACHE_DIR of the child
 * @param env extra environment (overrides the cache dir too)
 * @param killMs SIGKILL after this many ms (default 120 s)
 */
export function runBerm(
  args: string[],
  cacheDir: string,
  env: Record<string, string> = {},
  killMs = 120_000,
): Promise<CliRun> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--stack-size=4000', path.join(REPO, 'bin', 'berm.js'), ...args], {
      cwd: REPO,
      env: { ...process.env, BERM_CACHE_DIR: cacheDir, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), killMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: performance.now() - t0 });
    });
  });
}

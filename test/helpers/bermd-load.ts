// What the tests of many deployments against a real bermd share: its resident set, a deploy and a
// tool call with a bound on the wait.
import { readFileSync } from 'node:fs';
import type { Bermd } from './cluster.js';

/** The resident set of process `pid` (VmRSS of /proc/PID/status), bytes. */
export function rss(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]) * 1024;
}

/** PUT the image `body` as harness `name` (60 s bound). */
export const put = (b: Bermd, name: string, body: Uint8Array): Promise<Response> =>
  fetch(`${b.url}/harnesses/${name}`, { method: 'PUT', body, signal: AbortSignal.timeout(60_000) });

/** POST `args` to `tool` of harness `name` (60 s bound). */
export const call = (b: Bermd, name: string, tool: string, args: unknown): Promise<Response> =>
  fetch(`${b.url}/harnesses/${name}/tools/${tool}`, {
    method: 'POST',
    body: JSON.stringify(args),
    signal: AbortSignal.timeout(60_000),
  });

// Starts bermd in this process on 127.0.0.1 port 0 with a fresh root, for the daemon tests.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Backend } from '../../src/daemon/backend.js';
import { startDaemon, type BackendFactory, type RunningDaemon } from '../../src/daemon/daemon.js';
import { createRuntimeBackend } from '../../src/daemon/runtime-backend.js';
import { resolveSettings, type Flags } from '../../src/daemon/settings.js';
import { TEST_CACHE } from './fixtures.js';

export const REPO = resolve(import.meta.dirname, '..', '..');
export const elf = (rel: string): Buffer => readFileSync(join(REPO, rel));

export interface TestDaemon extends RunningDaemon {
  root: string;
  logs: string[];
  /** fetch relative to the daemon's URL with the token (when given) */
  req(path: string, init?: RequestInit & { token?: string | null }): Promise<Response>;
}

/**
 * Start a daemon; `flags` override settings, `env` supplies BERMD_TOKEN; `adapt` may replace
 * methods of the runtime backend before the daemon uses it (to hold, refuse or count what the
 * daemon asks of it).
 */
export async function testDaemon(
  flags: Flags = {},
  env: Record<string, string> = {},
  root = mkdtempSync(join(tmpdir(), 'bermd-test-')),
  adapt: (backend: Backend) => void = () => {},
): Promise<TestDaemon> {
  const logs: string[] = [];
  const settings = {
    ...resolveSettings({ addr: '127.0.0.1:0', root, workers: '1', cacheDir: TEST_CACHE, ...flags }, env),
    limit: flags.limit ?? [],
  };
  const factory: BackendFactory = async (ctx) => {
    const backend = await createRuntimeBackend(ctx);
    adapt(backend);
    return backend;
  };
  const d = await startDaemon(settings, factory, env, (l) => logs.push(l));
  const token = env.BERMD_TOKEN ?? null;
  return {
    ...d,
    root,
    logs,
    req: (path, init = {}) => {
      const headers = new Headers(init.headers);
      const t = init.token === undefined ? token : init.token;
      if (t !== null) headers.set('authorization', `Bearer ${t}`);
      return fetch(d.url + path, { ...init, headers });
    },
  };
}

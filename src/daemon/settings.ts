/**
 * bermd's settings, each resolved from a command-line flag, else an environment variable, else
 * its default, and remembered with its source so the boot log can say where every limit came
 * from ("flag --max-image-bytes", "env BERMD_MAX_IMAGE_BYTES", "default").
 */
import { homedir } from 'node:os';
import * as path from 'node:path';
import { defaultInstanceMemory } from '../runtime/instance-budget.js';
import { defaultPoolSize } from '../runtime/limits.js';
import { defaultBufferBudget } from './budget.js';
import { DEFAULT_IMAGE_BOUNDS } from './image-bounds.js';

/** One resolved setting. */
export interface Setting<T> {
  value: T;
  /** 'flag --x', 'env X' or 'default' */
  source: string;
}

/** Every bermd setting. */
export interface Settings {
  addr: Setting<{ host: string; port: number }>;
  root: Setting<string>;
  /** Wasm cache directory (default: <root>/cache) */
  cacheDir: Setting<string | null>;
  config: Setting<string | null>;
  tokenFile: Setting<string | null>;
  maxImageBytes: Setting<number>;
  maxBodyBytes: Setting<number>;
  /** bytes of executable code an image may have (translation bound; src/daemon/image-bounds.ts) */
  maxCodeBytes: Setting<number>;
  /** .symtab entries an image may have (translation bound) */
  maxSymbols: Setting<number>;
  /** relocation entries an image may have (translation bound) */
  maxRelocations: Setting<number>;
  /** images the deployment store holds at most (distinct digests the deployments name) */
  maxImages: Setting<number>;
  bodyTimeoutMs: Setting<number>;
  /**
   * a connection whose written reply bytes wait unread (no progress) for this long is closed, ms
   */
  writeTimeoutMs: Setting<number>;
  /** most client connections served at once; one more is answered 503 and closed */
  maxConnections: Setting<number>;
  /** most client connections from one remote address served at once */
  maxConnectionsPerAddress: Setting<number>;
  /** bytes of request bodies and unread replies held at once (src/daemon/budget.ts) */
  maxBufferedBytes: Setting<number>;
  maxInstanceMemory: Setting<number>;
  workers: Setting<number>;
  /** berm's protocol endpoint for the agent-daemon side (`unix:/path` or `127.0.0.1:port`), or none */
  protocolEndpoint: Setting<string | null>;
  /** a PostgreSQL store shared with other daemons (`postgres://...`), or null: SQLite under --root */
  store: Setting<string | null>;
  /** with a PostgreSQL store: lease of a claimed wake, ms */
  leaseMs: Setting<number>;
  /** the index to browse and install from (a directory, a `.git` URL or a service URL), or none */
  index: Setting<string | null>;
}

/**
 * Default of --max-images: far above the harnesses a machine serves (tens), and with
 * --max-image-bytes it bounds the image store's disk (1,024 x 64 MiB at the defaults).
 */
export const DEFAULT_MAX_IMAGES = 1024;

/** Flag values as commander hands them over (strings; undefined when absent). */
export type Flags = Partial<Record<keyof Settings, string>> & {
  /** `--limit key=value` of the queue's limits (repeatable) */
  limit?: string[];
};

interface Spec<T> {
  flag: string;
  env: string;
  def: () => T;
  parse: (s: string, where: string) => T;
}

/**
 * Default bound on client connections served at once: room for many agents and their MCP
 * notification streams, far below the file descriptors a process may open (Node raises its soft
 * limit to the hard one, 1,048,576 on Debian; each connection costs one descriptor and a few KB).
 * Under a lower open-file limit the daemon clamps it at boot (fd-limit.ts).
 */
export const DEFAULT_MAX_CONNECTIONS = 1024;

/**
 * Default bound on connections from one remote address: a quarter of the default global cap, so
 * one client (or one attacker) cannot take every slot, while an agent host with many sessions and
 * their notification streams still fits.
 */
export const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS = 256;

/**
 * Default bound on how long written reply bytes may wait for a client that does not read them
 * (ms): long enough for any reading client on a slow link to take the next piece, short enough that
 * replies parked by clients that never read cannot pile up (each holds its whole reply in memory).
 */
export const DEFAULT_WRITE_TIMEOUT_MS = 30_000;

/** A flag or environment value that cannot be used; the message names it and the fix. */
export class SettingsError extends Error {
  override name = 'SettingsError';
}

const SIZE_UNITS: Record<string, number> = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 };

/** Parse `64M`, `512k`, `1048576` (binary units) into bytes. @throws SettingsError */
export function parseBytes(s: string, where: string): number {
  const m = /^(\d+)([kmg]?)i?b?$/i.exec(s.trim());
  if (!m) throw new SettingsError(`${where}: ${JSON.stringify(s)} is not a size (e.g. 65536, 512K, 64M)`);
  const n = Number(m[1]) * SIZE_UNITS[m[2]!.toLowerCase()]!;
  if (!Number.isSafeInteger(n) || n <= 0) throw new SettingsError(`${where}: ${s} is not a positive size`);
  return n;
}

function parsePositive(s: string, where: string): number {
  if (!/^\d+$/.test(s.trim()) || Number(s) <= 0) {
    throw new SettingsError(`${where}: ${JSON.stringify(s)} is not a positive integer`);
  }
  return Number(s);
}

/** Parse `host:port`, `[v6]:port` or `:port`. @throws SettingsError */
export function parseAddr(s: string, where: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(s.trim());
  if (!m) throw new SettingsError(`${where}: ${JSON.stringify(s)} is not host:port (e.g. 127.0.0.1:7777)`);
  const port = Number(m[3]);
  if (port > 65535) throw new SettingsError(`${where}: port ${port} is over 65535`);
  return { host: m[1] ?? (m[2] || '127.0.0.1'), port };
}

/** The default state directory: $XDG_STATE_HOME/bermd, else ~/.local/state/bermd. */
export function defaultRoot(env: NodeJS.ProcessEnv): string {
  const base = env.XDG_STATE_HOME || path.join(homedir(), '.local', 'state');
  return path.join(base, 'bermd');
}

/**
 * Resolve every setting: flag, else environment, else default.
 * @throws SettingsError on a value that does not parse (naming the flag or variable)
 */
export function resolveSettings(flags: Flags, env: NodeJS.ProcessEnv): Settings {
  const specs: { [K in keyof Settings]: Spec<Settings[K]['value']> } = {
    addr: {
      flag: 'addr',
      env: 'BERMD_ADDR',
      def: () => ({ host: '127.0.0.1', port: 7777 }),
      parse: parseAddr,
    },
    root: { flag: 'root', env: 'BERMD_ROOT', def: () => defaultRoot(env), parse: (s) => path.resolve(s) },
    cacheDir: { flag: 'cache-dir', env: 'BERM_CACHE_DIR', def: () => null, parse: (s) => path.resolve(s) },
    config: { flag: 'config', env: 'BERMD_CONFIG', def: () => null, parse: (s) => path.resolve(s) },
    tokenFile: {
      flag: 'token-file',
      env: 'BERMD_TOKEN_FILE',
      def: () => null,
      parse: (s) => path.resolve(s),
    },
    maxImageBytes: {
      flag: 'max-image-bytes',
      env: 'BERMD_MAX_IMAGE_BYTES',
      def: () => 64 << 20,
      parse: parseBytes,
    },
    maxBodyBytes: {
      flag: 'max-body-bytes',
      env: 'BERMD_MAX_BODY_BYTES',
      def: () => 2 << 20,
      parse: parseBytes,
    },
    maxCodeBytes: {
      flag: 'max-code-bytes',
      env: 'BERMD_MAX_CODE_BYTES',
      def: () => DEFAULT_IMAGE_BOUNDS.maxCodeBytes,
      parse: parseBytes,
    },
    maxSymbols: {
      flag: 'max-symbols',
      env: 'BERMD_MAX_SYMBOLS',
      def: () => DEFAULT_IMAGE_BOUNDS.maxSymbols,
      parse: parsePositive,
    },
    maxRelocations: {
      flag: 'max-relocations',
      env: 'BERMD_MAX_RELOCATIONS',
      def: () => DEFAULT_IMAGE_BOUNDS.maxRelocations,
      parse: parsePositive,
    },
    maxImages: {
      flag: 'max-images',
      env: 'BERMD_MAX_IMAGES',
      def: () => DEFAULT_MAX_IMAGES,
      parse: parsePositive,
    },
    bodyTimeoutMs: {
      flag: 'body-timeout',
      env: 'BERMD_BODY_TIMEOUT_MS',
      def: () => 10_000,
      parse: parsePositive,
    },
    writeTimeoutMs: {
      flag: 'write-timeout',
      env: 'BERMD_WRITE_TIMEOUT_MS',
      def: () => DEFAULT_WRITE_TIMEOUT_MS,
      parse: parsePositive,
    },
    maxConnections: {
      flag: 'max-connections',
      env: 'BERMD_MAX_CONNECTIONS',
      def: () => DEFAULT_MAX_CONNECTIONS,
      parse: parsePositive,
    },
    maxConnectionsPerAddress: {
      flag: 'max-connections-per-address',
      env: 'BERMD_MAX_CONNECTIONS_PER_ADDRESS',
      def: () => DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
      parse: parsePositive,
    },
    maxBufferedBytes: {
      flag: 'max-buffered-bytes',
      env: 'BERMD_MAX_BUFFERED_BYTES',
      def: () => defaultBufferBudget(),
      parse: parseBytes,
    },
    maxInstanceMemory: {
      flag: 'max-instance-memory',
      env: 'BERMD_MAX_INSTANCE_MEMORY',
      def: () => defaultInstanceMemory(),
      parse: parseBytes,
    },
    protocolEndpoint: {
      flag: 'protocol-endpoint',
      env: 'BERMD_PROTOCOL_ENDPOINT',
      def: () => null,
      parse: (s) => s,
    },
    store: {
      flag: 'store',
      env: 'BERMD_STORE',
      def: () => null,
      parse: (s, where) => {
        if (!/^postgres(ql)?:\/\//.test(s))
          throw new SettingsError(
            `${where}: ${JSON.stringify(s.replace(/:[^:@/]*@/, ':***@'))} is not a postgres:// URL (postgres://user[:password]@host:port/database); leave it out to keep the state in SQLite under --root`,
          );
        return s;
      },
    },
    leaseMs: {
      flag: 'lease',
      env: 'BERMD_LEASE_MS',
      def: () => 10_000,
      parse: (s, where) => {
        const n = parsePositive(s, where);
        if (n < 300) throw new SettingsError(`${where}: a lease of ${n} ms is under the minimum of 300 ms`);
        return n;
      },
    },
    index: { flag: 'index', env: 'BERMD_INDEX', def: () => null, parse: (s) => s },
    workers: {
      flag: 'workers',
      env: 'BERMD_WORKERS',
      def: () => defaultPoolSize(),
      parse: parsePositive,
    },
  };
  const out = {} as Record<string, Setting<unknown>>;
  for (const [key, spec] of Object.entries(specs) as [keyof Settings, Spec<unknown>][]) {
    const f = flags[key];
    const e = env[spec.env];
    if (f !== undefined) out[key] = { value: spec.parse(f, `--${spec.flag}`), source: `flag --${spec.flag}` };
    else if (e !== undefined && e !== '')
      out[key] = { value: spec.parse(e, spec.env), source: `env ${spec.env}` };
    else out[key] = { value: spec.def(), source: 'default' };
  }
  return out as unknown as Settings;
}

/**
 * Assembly of bermd: settings → token check → grants → runtime → deployments read from the
 * runtime's store (on SQLite before listening; a shared store may be away, so after) → HTTP server
 * listening (answering 503 with the progress to everything that needs the deployments) →
 * deployments restored without running a guest → served, with the boot log, and the graceful stop
 * (stop accepting, drain up to a bound, persist, release workers).
 *
 * Boot refusals (thrown as {@link BootError}): a non-loopback address without a token, a token
 * file that cannot be read, a declaration file with refused entries or an fs/exec root that does
 * not exist (each with its fix), a damaged legacy deployment index (deployments.json) or record of
 * upstream imports (reference-imports.json). A `--root` held by another process
 * is a {@link RootInUseError} (src/runtime/state-lock.ts): the lock is taken before anything
 * under the root is read and released by the stop (or the process's end).
 */
import { availableParallelism } from 'node:os';
import * as fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { StateLock, StateLockError, type LimitSource, type RuntimeLimits } from '../runtime/index.js';
import { LimitsError, limitsFromFile, limitsFromFlags, mergeLimits } from '../runtime/limit-sources.js';
import { packageVersion } from '../util/package-version.js';
import { narrowFolder, privateDir } from '../util/private-files.js';
import { isLoopback, loadToken } from './auth.js';
import type { Backend } from './backend.js';
import { describeDefaultBudget } from './budget.js';
import { describeDefaultInstanceMemory } from '../runtime/instance-budget.js';
import { Deployments } from './deployments.js';
import { clampConnections, openFileLimit } from './fd-limit.js';
import { Grants } from './grants.js';
import { importReferenceRoot, REFERENCE_IMAGES_DIR } from './reference-root.js';
import { DaemonServer, KEEP_ALIVE_MS, OVER_CAP_GRACE_MS } from './server.js';
import { MAX_ENCODED_RESULT_BYTES } from './reply-size.js';
import { MAX_MCP_SESSIONS } from './mcp.js';
import { MAX_AUTHORITY_CHARS } from '../contract/index.js';
import { DEFAULT_CALL_LIMITS } from '../harness/harness.js';
import type { Settings } from './settings.js';
import { ImageFiles } from './image-files.js';
import { openIndex, type IndexSource } from '../index/source.js';
import { deployInstalled } from './installed.js';

/** The limits that are not settings, for the boot log (docs/daemon.md has the reasons). */
const FIXED_LIMITS: [string, string][] = [
  ['keep-alive-ms', String(KEEP_ALIVE_MS)],
  ['over-cap-grace-ms', String(OVER_CAP_GRACE_MS)],
  ['result-bytes', `${MAX_ENCODED_RESULT_BYTES} (raw and JSON-encoded)`],
  ['args-bytes', String(DEFAULT_CALL_LIMITS.maxArgsBytes)],
  ['log-lines', `${DEFAULT_CALL_LIMITS.maxLogLines} of ${DEFAULT_CALL_LIMITS.maxLogLineBytes} bytes`],
  ['authority-chars', String(MAX_AUTHORITY_CHARS)],
  ['mcp-sessions', String(MAX_MCP_SESSIONS)],
];

/** A reason bermd will not start; the message says what to change. */
export class BootError extends Error {
  override name = 'BootError';
}

/**
 * Import upstream's `<root>/harnesses/<name>.elf` images (reference-root.ts) and log what was
 * imported or skipped; with a shared store the deployments are the database's, so none is
 * imported (logged when there are some). A failure to write the store is a boot error.
 */
function importUpstreamRoot(
  root: string,
  store: Deployments,
  shared: boolean,
  maxImageBytes: number,
  log: (line: string) => void,
): void {
  if (shared) {
    if (fs.existsSync(path.join(root, REFERENCE_IMAGES_DIR)))
      log(
        `  warning: ${path.join(root, REFERENCE_IMAGES_DIR)} (upstream's images) not imported: the deployments are the shared store's`,
      );
    return;
  }
  let r;
  try {
    r = importReferenceRoot(root, store, maxImageBytes);
  } catch (e) {
    throw new BootError(`importing upstream's images under ${root}: ${(e as Error).message}`);
  }
  for (const s of r.skipped) log(`  warning: upstream image skipped: ${s}`);
  if (r.imported.length > 0)
    log(
      `  imported ${r.imported.length} upstream deployments from ${path.join(root, REFERENCE_IMAGES_DIR)}: ${r.imported.join(', ')} (their files stay as they are)`,
    );
}

/**
 * Another process (a bermd, a `berm worker`) holds `--root`: like an address in use, a conflict with
 * something running rather than a bad setting (bermd exits 1). The message names the holder.
 */
export class RootInUseError extends Error {
  override name = 'RootInUseError';
}

/** What the runtime is built from (the daemon picks the directories; the runtime owns them). */
export interface BackendContext {
  /** the state directory (--root) */
  root: string;
  /** the Wasm cache directory */
  cacheDir: string;
  /** worker threads for guests and translations */
  workers: number;
  /** resident bytes of the instance slots the workers keep, all together (--max-instance-memory) */
  instanceMemory: number;
  /** berm's protocol endpoint to listen on, or null */
  protocolEndpoint: string | null;
  /** a PostgreSQL store shared with other daemons, or null (SQLite under root) */
  store: string | null;
  /** lease of a claimed wake with a PostgreSQL store, ms */
  leaseMs: number;
  /** the queue's limits given by the operator, and where each came from */
  limits: Partial<RuntimeLimits>;
  limitSources: Partial<Record<keyof RuntimeLimits, LimitSource>>;
  grants: Grants;
  log: (line: string) => void;
}

/** Builds the runtime; called once at boot. */
export type BackendFactory = (ctx: BackendContext) => Promise<Backend>;

/** A running daemon. */
export interface RunningDaemon {
  address: AddressInfo;
  /** base URL, e.g. http://127.0.0.1:7777 */
  url: string;
  server: DaemonServer;
  deployments: Deployments;
  backend: Backend;
  /** graceful stop; resolves when everything is persisted and released */
  stop(): Promise<void>;
}

/**
 * Boot bermd.
 * @param settings resolved settings (src/daemon/settings.ts)
 * @param makeBackend builds the runtime
 * @param env the environment (BERMD_TOKEN)
 * @param log boot and event lines (stderr in bermd)
 * @throws BootError for every refusal listed in the module comment; whatever listen throws
 *   (EADDRINUSE, ...)
 */
export async function startDaemon(
  settings: Settings & { limit?: string[] },
  makeBackend: BackendFactory,
  env: NodeJS.ProcessEnv,
  log: (line: string) => void,
): Promise<RunningDaemon> {
  const { host, port } = settings.addr.value;
  let token;
  try {
    token = loadToken(settings.tokenFile.value ?? undefined, env);
  } catch (e) {
    throw new BootError((e as Error).message);
  }
  if (token.token === null && !isLoopback(host)) {
    throw new BootError(
      `refusing to listen on ${host} without a bearer token: set BERMD_TOKEN or --token-file, or listen on 127.0.0.1${token.ignored ? ` (${token.ignored} is set, but it is the index's token and bermd does not read it)` : ''}`,
    );
  }
  let grants: Grants;
  try {
    grants = settings.config.value === null ? Grants.none() : Grants.load(settings.config.value);
  } catch (e) {
    throw new BootError((e as Error).message);
  }
  // the queue's limits: [limits] of the declaration file, then BERMD_LIMITS, then --limit flags
  let limits;
  try {
    limits = mergeLimits([
      { source: 'file', limits: settings.config.value === null ? {} : limitsFromFile(settings.config.value) },
      {
        source: 'env',
        limits: limitsFromFlags((env.BERMD_LIMITS ?? '').split(',').filter((x) => x.trim() !== '')),
      },
      { source: 'flag', limits: limitsFromFlags(settings.limit ?? []) },
    ]);
  } catch (e) {
    if (e instanceof LimitsError) throw new BootError(e.message);
    throw new BootError(`limits: ${(e as Error).message}`);
  }
  const root = settings.root.value;
  // one process per root, taken before anything under it is read or cleaned (the deployment
  // store deletes temporary files it takes for a crash's leftovers)
  let lock: StateLock;
  try {
    lock = StateLock.acquire(root, `bermd --addr ${host}:${port}`, '--root');
  } catch (e) {
    if (e instanceof StateLockError) throw new RootInUseError(e.message);
    throw e;
  }
  try {
    let images: ImageFiles;
    try {
      images = ImageFiles.open(path.join(root, 'deployments'));
    } catch (e) {
      throw new BootError(`deployment images: ${(e as Error).message}`);
    }
    // the state is the operator's alone (arguments, results, stored values, images): the root and
    // its folders 0700, its files 0600, whatever an older version or the umask left
    narrowFolder(root);
    narrowFolder(images.root);
    narrowFolder(images.imagesDir);

    log(`bermd ${packageVersion()} (node ${process.version}, pid ${process.pid})`);
    const show = (label: string, s: { value: unknown; source: string }, v = String(s.value)): void =>
      log(`  ${label.padEnd(16)} ${v}  (${s.source})`);
    show('addr', settings.addr, `${host}:${port}`);
    show('root', settings.root);
    const cacheDir = settings.cacheDir.value ?? path.join(root, 'cache');
    show('cache-dir', settings.cacheDir, cacheDir);
    privateDir(cacheDir);
    show('config', settings.config, settings.config.value ?? 'none: every harness runs without capabilities');
    log(
      `  ${'token'.padEnd(16)} ${token.token === null ? 'none (loopback only)' : 'required'}  (${token.source})`,
    );
    if (token.ignored)
      log(
        `  warning: ${token.ignored} is set but bermd does not read it (it is the index's token for berm publish); bermd's token is BERMD_TOKEN or --token-file`,
      );
    show('max-image-bytes', settings.maxImageBytes);
    show('max-body-bytes', settings.maxBodyBytes);
    show('max-code-bytes', settings.maxCodeBytes);
    show('max-symbols', settings.maxSymbols);
    show('max-relocations', settings.maxRelocations);
    show('max-images', settings.maxImages);
    show('body-timeout-ms', settings.bodyTimeoutMs);
    show('write-timeout-ms', settings.writeTimeoutMs);
    // a cap above the open-file limit cannot hold: the kernel would reset the extra connections
    const fdLimit = openFileLimit();
    const conns = clampConnections(settings.maxConnections.value, fdLimit);
    show(
      'max-connections',
      settings.maxConnections,
      conns.warning === null
        ? String(conns.value)
        : `${conns.value} (asked ${settings.maxConnections.value}; open-file limit ${fdLimit})`,
    );
    if (conns.warning !== null) log(`  warning: ${conns.warning}`);
    const perAddress = Math.min(conns.value, settings.maxConnectionsPerAddress.value);
    show(
      'max-connections-per-address',
      settings.maxConnectionsPerAddress,
      perAddress === settings.maxConnectionsPerAddress.value
        ? String(perAddress)
        : `${perAddress} (asked ${settings.maxConnectionsPerAddress.value}; at most max-connections)`,
    );
    show('max-buffered-bytes', {
      value: settings.maxBufferedBytes.value,
      source:
        settings.maxBufferedBytes.source === 'default'
          ? describeDefaultBudget()
          : settings.maxBufferedBytes.source,
    });
    if (settings.maxBufferedBytes.value < settings.maxImageBytes.value)
      log(
        `  warning: max-buffered-bytes ${settings.maxBufferedBytes.value} is below max-image-bytes ${settings.maxImageBytes.value}: the largest uploads will be refused 503`,
      );
    show('workers', {
      value: settings.workers.value,
      source:
        settings.workers.source === 'default'
          ? `default: ${availableParallelism()} cores + 1, the reserve no single harness may take`
          : settings.workers.source,
    });
    show('max-instance-memory', {
      value: settings.maxInstanceMemory.value,
      source:
        settings.maxInstanceMemory.source === 'default'
          ? describeDefaultInstanceMemory()
          : settings.maxInstanceMemory.source,
    });
    show('protocol-endpoint', settings.protocolEndpoint, settings.protocolEndpoint.value ?? 'none');
    show(
      'store',
      settings.store,
      settings.store.value === null
        ? `sqlite under ${root}`
        : `${settings.store.value.replace(/:[^:@/]*@/, ':***@')} (shared; docs/scale-out.md)`,
    );
    if (settings.store.value !== null) show('lease-ms', settings.leaseMs);

    show('index', settings.index, settings.index.value ?? 'none');
    let index: IndexSource | null = null;
    if (settings.index.value !== null) {
      try {
        index = await openIndex(settings.index.value, cacheDir);
      } catch (e) {
        throw new BootError(`--index: ${(e as Error).message}`);
      }
    }

    const backend = await makeBackend({
      root,
      cacheDir,
      workers: settings.workers.value,
      instanceMemory: settings.maxInstanceMemory.value,
      limits: limits.limits,
      limitSources: limits.sources,
      protocolEndpoint: settings.protocolEndpoint.value,
      store: settings.store.value,
      leaseMs: settings.leaseMs.value,
      grants,
      log,
    });
    for (const [k, v, source] of backend.limits?.() ?? []) log(`  ${k.padEnd(16)} ${v}  (${source})`);
    for (const [k, v] of FIXED_LIMITS) log(`  ${k.padEnd(16)} ${v}  (fixed)`);
    const deployments = new Deployments(
      images,
      backend.deploymentRecords(),
      backend,
      grants,
      {
        maxCodeBytes: settings.maxCodeBytes.value,
        maxSymbols: settings.maxSymbols.value,
        maxRelocations: settings.maxRelocations.value,
      },
      settings.maxImages.value,
    );
    const shared = settings.store.value !== null;
    // the deployments the store records; a shared store may be away while this daemon starts, so
    // its are read once the daemon listens (answering 503 until they are restored)
    const load = async (): Promise<void> => {
      let r;
      try {
        r = await deployments.load(log);
      } catch (e) {
        throw new BootError(`deployments: ${(e as Error).message}`);
      }
      if (r.migrated !== null)
        log(
          shared
            ? `  deleted deployments/deployments.json, this daemon's copy of the shared store's deployments (they are the database's)`
            : `  moved ${r.migrated} deployments from deployments/deployments.json into the store; the file is deleted`,
        );
      if (r.importsMigrated !== null)
        log(
          `  moved ${r.importsMigrated} records of upstream imports from deployments/reference-imports.json into the store; the file is deleted`,
        );
      if (r.removed.length > 0)
        log(`  removed ${r.removed.length} stored images no deployment uses (deployments/images)`);
    };
    if (!shared) {
      try {
        await load();
        importUpstreamRoot(root, deployments, shared, settings.maxImageBytes.value, log);
      } catch (e) {
        await backend.close(0);
        throw e;
      }
    } else importUpstreamRoot(root, deployments, shared, settings.maxImageBytes.value, log);
    const server = new DaemonServer({
      backend,
      deployments,
      token: token.token,
      limits: {
        maxImageBytes: settings.maxImageBytes.value,
        maxBodyBytes: settings.maxBodyBytes.value,
        bodyTimeoutMs: settings.bodyTimeoutMs.value,
        writeTimeoutMs: settings.writeTimeoutMs.value,
        maxConnections: conns.value,
        maxConnectionsPerAddress: perAddress,
        maxBufferedBytes: settings.maxBufferedBytes.value,
      },
      version: packageVersion(),
      log,
      index,
    });
    // Listen before the restore, so a long one does not refuse connections: until it is done (and,
    // with a shared store, the deployments follow the database) every request that needs them is
    // answered 503 with the progress, so no client meets a deployment it acknowledged missing and
    // no wake is armed or fires for a harness not yet restored; /health and /metrics answer.
    let restoring = deployments.storedCount();
    const gated = restoring > 0 || backend.join !== undefined;
    if (gated) {
      server.setBooting(() => {
        const p = deployments.restoreProgress();
        return p !== null
          ? `restoring ${p.done} of ${p.total} deployments`
          : `restored ${restoring} deployments; following the shared store`;
      });
    }
    let address: AddressInfo;
    try {
      address = await server.listen(host, port);
    } catch (e) {
      await backend.close(0);
      throw e;
    }
    const hostPart = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    const url = `http://${hostPart}:${address.port}`;
    // tools that wait for "listening on http://..." before using the deployments still can: this
    // line says "listening at", the one after the restore "listening on"
    if (gated)
      log(
        `listening at ${url}, restore not done: ${restoring} deployments to restore (the API answers 503 with Retry-After until it is; /health and /metrics answer)`,
      );

    let problems: string[];
    let restored = 0;
    try {
      // a few deployments in flight per worker keep every worker (and this thread's reading and
      // checking of the images) busy; more would only queue on the workers
      if (shared) {
        await load();
        restoring = deployments.storedCount();
      }
      const t0 = Date.now();
      problems = await deployments.restore(Math.min(16, 2 * settings.workers.value));
      restored = restoring - problems.length;
      if (restoring > 0) log(`  restored ${restored} of ${restoring} deployments in ${Date.now() - t0} ms`);
      // with a shared store: deployments follow the database before any wake may fire
      if (backend.join) problems.push(...(await backend.join(deployments)));
    } catch (e) {
      await server.close(0);
      await backend.close(0);
      throw e;
    }
    // the due-set as it came back, before any of it fires: the operator sees the schedules survived
    const st = backend.stats();
    log(`  wakes            ${st.wakesPending} pending, ${st.wakesClaimed} to re-deliver`);
    backend.start?.();
    for (const d of deployments.list()) {
      const g = d.granted;
      const args = Object.entries(g.grant)
        .map(([k, v]) => `${k}=${Array.isArray(v) ? v.join(',') : String(v)}`)
        .join(' ');
      log(
        `  harness ${d.name} sha256 ${d.digest} capabilities: ${g.capabilities.join(', ') || 'none'}${args ? ` ${args}` : ''}`,
      );
    }
    // harnesses the declaration names by reference are deployed from the store `berm install` fills
    problems.push(...(await deployInstalled(grants, deployments, log)));
    for (const p of problems) log(`  warning: ${p}`);
    for (const n of grants.names()) {
      if (!deployments.get(n)) log(`  declared ${n} (not deployed yet)`);
    }
    server.setBooting(null);
    log(
      restoring > 0
        ? `listening on ${url} (restore done: ${restored} of ${restoring} deployments restored)`
        : `listening on ${url}`,
    );

    let stopping: Promise<void> | null = null;
    const stop = (): Promise<void> => {
      stopping ??= (async () => {
        const t0 = Date.now();
        log('stopping: no new connections; draining in-flight requests');
        // one bound for the whole drain: the queue's drainMs limit (HTTP requests, then the runtime)
        const bound = backend.drainMs;
        const left = await server.close(bound);
        const remaining = Math.max(0, bound - (Date.now() - t0));
        await backend.close(remaining);
        lock.release();
        log(
          left === 0
            ? `stopped after ${Date.now() - t0} ms; state persisted under ${root}`
            : `stopped after ${Date.now() - t0} ms with ${left} request(s) cut off by the drain bound; state persisted under ${root}`,
        );
      })();
      return stopping;
    };
    return { address, url, server, deployments, backend, stop };
  } catch (e) {
    lock.release();
    throw e;
  }
}

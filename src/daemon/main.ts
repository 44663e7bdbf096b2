/**
 * The `bermd` entry point: parse flags (commander), boot the daemon, print the boot log on
 * stderr, and stop gracefully on SIGTERM or SIGINT (exit 0). Exit 2 for a refused boot (bad flag,
 * missing token, bad declaration, missing fs/exec root), 1 for anything else that stops the boot.
 */
import { Command } from 'commander';
import { packageVersion } from '../util/package-version.js';
import { SettingsError, resolveSettings, type Flags } from './settings.js';

const program = new Command('bermd')
  .description('berm daemon: deploy harnesses and serve their tools over HTTP and MCP')
  .version(packageVersion(), '-V, --version')
  .option('--addr <host:port>', 'listen address (default 127.0.0.1:7777; env BERMD_ADDR)')
  .option(
    '--root <dir>',
    'state: deployments, due-set, journal, cache (default $XDG_STATE_HOME/bermd, else ~/.local/state/bermd; env BERMD_ROOT)',
  )
  .option('--cache-dir <dir>', 'Wasm cache (default <root>/cache; env BERM_CACHE_DIR)')
  .option('--config <file>', "the operator's declaration file: the only source of grants (env BERMD_CONFIG)")
  .option(
    '--token-file <file>',
    'bearer token on the first line (env BERMD_TOKEN_FILE; else the token itself in env BERMD_TOKEN; BERM_TOKEN is not read)',
  )
  .option('--max-image-bytes <size>', 'largest ELF a deploy accepts (default 64M; env BERMD_MAX_IMAGE_BYTES)')
  .option(
    '--max-code-bytes <size>',
    'largest executable code of a deployed image, translation bound (default 4M; env BERMD_MAX_CODE_BYTES)',
  )
  .option(
    '--max-symbols <n>',
    'most .symtab entries of a deployed image, translation bound (default 131072; env BERMD_MAX_SYMBOLS)',
  )
  .option(
    '--max-relocations <n>',
    'most relocations of a deployed image, translation bound (default 1048576; env BERMD_MAX_RELOCATIONS)',
  )
  .option(
    '--max-images <n>',
    'most images the deployment store holds; a deploy of a new image beyond is refused 507 (default 1024; env BERMD_MAX_IMAGES)',
  )
  .option('--max-body-bytes <size>', 'largest body of other requests (default 2M; env BERMD_MAX_BODY_BYTES)')
  .option(
    '--body-timeout <ms>',
    'a request body must arrive within this time (default 10000; env BERMD_BODY_TIMEOUT_MS)',
  )
  .option(
    '--write-timeout <ms>',
    'close a connection whose reply bytes wait unread this long (default 30000; env BERMD_WRITE_TIMEOUT_MS)',
  )
  .option(
    '--max-connections <n>',
    'client connections served at once; one more is answered 503 and closed (default 1024; env BERMD_MAX_CONNECTIONS)',
  )
  .option(
    '--max-connections-per-address <n>',
    'client connections from one address served at once (default 256, at most --max-connections; env BERMD_MAX_CONNECTIONS_PER_ADDRESS)',
  )
  .option(
    '--max-buffered-bytes <size>',
    'bytes of request bodies and unread replies held at once; over it, 503 with Retry-After (default: an eighth of the memory, 128M..1G; env BERMD_MAX_BUFFERED_BYTES)',
  )
  .option(
    '--max-instance-memory <size>',
    'resident bytes of the instances the workers keep warm between calls; a deploy whose instance cannot be made is refused 507 (default: a quarter of the memory, 256M..16G; env BERMD_MAX_INSTANCE_MEMORY)',
  )
  .option(
    '--limit <key=value>',
    "a queue limit, repeatable (e.g. --limit timeoutMs=5000; drainMs bounds the shutdown); also [limits] in --config and env BERMD_LIMITS='k=v,k=v'",
    (v: string, prev: string[] | undefined) => [...(prev ?? []), v],
  )
  .option(
    '--protocol-endpoint <where>',
    "berm's protocol endpoint for the agent daemon: unix:/path or 127.0.0.1:port (env BERMD_PROTOCOL_ENDPOINT)",
  )
  .option(
    '--store <url>',
    'share due-set, deployments, storage keys and journal with other daemons in PostgreSQL (postgres://user@host:port/db; env BERMD_STORE); default: SQLite under --root',
  )
  .option(
    '--lease <ms>',
    'with --store: lease of a claimed wake, renewed while it runs (default 10000; env BERMD_LEASE_MS)',
  )
  .option(
    '--workers <n>',
    'worker threads for guests and translations (default: the core count + 1; env BERMD_WORKERS)',
  )
  .option(
    '--index <source>',
    'an index to browse and install from at GET /index and POST /index/install: a directory, a .git URL or an index service URL (env BERMD_INDEX)',
  )
  .allowExcessArguments(false)
  .addHelpText(
    'after',
    [
      '',
      'Exit codes:',
      '  0  a graceful stop (SIGTERM, SIGINT)',
      '  1  the boot stopped: the address or --root is in use by another process, ...',
      '  2  the boot is refused: a bad flag or setting, no token on a non-loopback',
      '     address, a refused declaration (the message names the fix)',
    ].join('\n'),
  )
  // a bad flag is a refused boot like a bad setting (exit 2), not commander's default 1: a service
  // manager told not to restart on 2 must not restart a unit whose command line is wrong
  .exitOverride((e) => process.exit(e.exitCode === 0 ? 0 : 2));
program.parse(process.argv);
const o = program.opts<Record<string, string> & { limit?: string[] }>();
const flags: Flags = {
  addr: o.addr,
  root: o.root,
  cacheDir: o.cacheDir,
  config: o.config,
  tokenFile: o.tokenFile,
  maxImageBytes: o.maxImageBytes,
  maxBodyBytes: o.maxBodyBytes,
  maxCodeBytes: o.maxCodeBytes,
  maxSymbols: o.maxSymbols,
  maxRelocations: o.maxRelocations,
  maxImages: o.maxImages,
  bodyTimeoutMs: o.bodyTimeout,
  writeTimeoutMs: o.writeTimeout,
  maxConnections: o.maxConnections,
  maxConnectionsPerAddress: o.maxConnectionsPerAddress,
  maxBufferedBytes: o.maxBufferedBytes,
  maxInstanceMemory: o.maxInstanceMemory,
  workers: o.workers,
  protocolEndpoint: o.protocolEndpoint,
  store: o.store,
  leaseMs: o.lease,
  index: o.index,
};
const log = (line: string): void => void process.stderr.write(`bermd: ${line}\n`);

// The daemon (HTTP, MCP SDK, zod, the runtime) loads only after the flags parsed, so `bermd --help`,
// `--version` and a bad flag answer without loading it.
const { BootError, startDaemon } = await import('./daemon.js');
const { createRuntimeBackend } = await import('./runtime-backend.js');
try {
  const settings = { ...resolveSettings(flags, process.env), limit: o.limit ?? [] };
  const daemon = await startDaemon(settings, createRuntimeBackend, process.env, log);
  const onSignal = (sig: string): void => {
    log(`${sig} received`);
    daemon.stop().then(
      () => process.exit(0),
      (e: unknown) => {
        log(`stop failed: ${(e as Error).message}`);
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => onSignal('SIGTERM'));
  process.once('SIGINT', () => onSignal('SIGINT'));
} catch (e) {
  if (e instanceof BootError || e instanceof SettingsError) {
    log(`refusing to start: ${e.message}`);
    process.exit(2);
  }
  const inUse = (e as NodeJS.ErrnoException | undefined)?.code === 'EADDRINUSE';
  log(
    `cannot start: ${e instanceof Error ? e.message : String(e)}` +
      (inUse
        ? '; another process listens there: stop it, or choose another --addr (port 0 picks a free one)'
        : ''),
  );
  process.exit(1);
}

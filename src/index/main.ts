/**
 * The `berm-indexd` entry point: parse flags (commander), load the index directory, serve it
 * (./service.ts), log on stderr, and stop on SIGTERM or SIGINT (exit 0). Exit 2 for a refused
 * start (bad flag, unreadable tokens file, an open service on a non-loopback address), 1 for
 * anything else that stops it (the address in use, an unreadable directory).
 */
import { Command } from 'commander';
import { packageVersion } from '../util/package-version.js';
import { defaultCacheDir } from '../cache/cache.js';
import { startIndexService } from './service.js';
import { defaultSnapshotFile } from './snapshot.js';
import { loadTokens, type Publisher } from './tokens.js';

const program = new Command('berm-indexd')
  .description('the berm index service: search, publish and take down harness listings over HTTP')
  .version(packageVersion(), '-V, --version')
  .option('--index <dir>', 'the index directory, JSON Lines per harness; created when missing', './index')
  .option('--addr <host:port>', 'listen address (port 0 picks a free one)', '127.0.0.1:7788')
  .option(
    '--tokens <file>',
    'publisher identity: lines "<sha256 of token> <publisher> [operator]"; without it the index is open',
  )
  .option('--open', 'serve an open index (no --tokens) on a non-loopback address')
  .option('--publish-rate <n>', 'publishes per minute per client (default 30)')
  .option(
    '--snapshot <file>',
    'where to keep the start-up snapshot of the index (default: under the cache directory, one per --index)',
  )
  .option('--no-snapshot', 'read every index file at each start, keep no snapshot')
  .allowExcessArguments(false)
  .exitOverride((e) => process.exit(e.exitCode === 0 ? 0 : 2));
program.parse(process.argv);
const o = program.opts<{
  index: string;
  addr: string;
  tokens?: string;
  open?: boolean;
  publishRate?: string;
  snapshot: string | boolean;
}>();
const log = (line: string): void => void process.stderr.write(`berm-indexd: ${line}\n`);

let tokens: Map<string, Publisher> | undefined;
let rate: number | undefined;
try {
  if (o.tokens !== undefined) tokens = loadTokens(o.tokens);
  if (o.publishRate !== undefined) {
    if (!/^\d{1,6}$/.test(o.publishRate) || Number(o.publishRate) < 1)
      throw new Error(`--publish-rate ${o.publishRate}: expected a whole number of publishes a minute (≥ 1)`);
    rate = Number(o.publishRate);
  }
} catch (e) {
  log(`refusing to start: ${(e as Error).message}`);
  process.exit(2);
}
try {
  const svc = await startIndexService({
    root: o.index,
    addr: o.addr,
    tokens,
    open: o.open === true,
    publishesPerMinute: rate,
    log,
    snapshot:
      o.snapshot === false
        ? undefined
        : typeof o.snapshot === 'string'
          ? o.snapshot
          : defaultSnapshotFile(defaultCacheDir(), o.index),
  });
  const stop = (sig: string): void => {
    log(`${sig} received`);
    void svc.close().then(() => process.exit(0));
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
} catch (e) {
  const msg = e instanceof Error ? e.message : String(e);
  if (/^refusing/.test(msg)) {
    log(msg);
    process.exit(2);
  }
  log(`cannot start: ${msg}`);
  process.exit(1);
}

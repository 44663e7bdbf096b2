/**
 * `berm worker --config FILE --state DIR`: the queue in the foreground. Wakes fire, one line per
 * invocation on stdout, Ctrl-C / SIGTERM drains in-flight work and exits 0. At boot it prints
 * every limit in force with its source (flag, file, default) and each harness with its grant.
 * `berm wake add` from another process signals it (SIGUSR2, pid in <state>/run.pid) to pick up
 * what was armed.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Command } from 'commander';
import { DeclarationError, loadDeclarations } from '../../config/declarations.js';
import { AssemblyError, assembleRuntime, type AssembledRuntime } from '../../assembly/assemble.js';
import {
  StateLock,
  StateLockError,
  type JournalRecord,
  type Outcome,
  type RuntimeLimits,
} from '../../runtime/index.js';
import {
  LIMIT_KEYS,
  LimitsError,
  limitsFromFile,
  limitsFromFlags,
  mergeLimits,
} from '../../runtime/limit-sources.js';
import { cacheDirOf, CliError, ExitCode, parsePositiveInt } from '../context.js';
import type { CliContext } from '../program.js';

/** What `berm wake add` needs to know of the harnesses of a running or last-run queue. */
export interface HarnessSummary {
  name: string;
  onWake: boolean;
  onNotify: boolean;
  tools: string[];
  capabilities: string[];
}

/** File under the state directory listing the harnesses of the last `berm worker`. */
export const HARNESSES_FILE = 'harnesses.json';
/** File under the state directory holding the pid of the running `berm worker`. */
export const PID_FILE = 'run.pid';

function collect(v: string, prev: string[] | undefined): string[] {
  return [...(prev ?? []), v];
}

function describeGrant(capabilities: string[], grant: Record<string, unknown>): string {
  if (capabilities.length === 0) return 'no capabilities';
  const args = Object.entries(grant)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${Array.isArray(v) ? v.join(',') : String(v)}`);
  return capabilities.join(', ') + (args.length ? ` (${args.join('; ')})` : '');
}

function invocationLine(r: JournalRecord): string {
  const parts = [
    new Date(r.start).toISOString(),
    r.trigger,
    `${r.harness}.${r.entry}`,
    r.outcome,
    `${r.ms.toFixed(1)}ms`,
    `fuel=${r.fuel}`,
    `chain=${r.chain.slice(0, 8)}`,
    `depth=${r.depth}`,
  ];
  if (r.wake !== undefined)
    parts.push(`wake=${r.wake}`, `attempt=${r.attempt}`, `late=${r.start - (r.scheduledAt ?? r.start)}ms`);
  if (r.detail !== undefined) parts.push(`: ${r.detail.replace(/\s+/g, ' ')}`);
  return parts.join(' ');
}

let rescan: (() => void) | null = null;
let rescanInstalled = false;

/**
 * Route SIGUSR2 (`berm wake add --state` asking for a rescan) to `fn`, or ignore it (null). The
 * listener is installed once and never removed, so the signal's default action (ending the
 * process) never applies once a queue has written its pid file.
 */
function onRescanSignal(fn: (() => void) | null): void {
  rescan = fn;
  if (rescanInstalled) return;
  rescanInstalled = true;
  process.on('SIGUSR2', () => rescan?.());
}

/** Register `worker`. */
export function registerWorker(program: Command, ctx: CliContext): void {
  program
    .command('worker')
    .description(
      'run the queue in the foreground: declared harnesses, timed wakes, one line per invocation (--verbose: and its log lines)',
    )
    .requiredOption('--config <file>', 'declaration file (harnesses.toml, with an optional [limits] table)')
    .requiredOption('--state <dir>', 'state directory: due-set, journal, storage keys')
    .option(
      '--store <url>',
      'share the due-set, storage keys and journal with other processes in PostgreSQL (postgres://user@host:port/db); default: SQLite under --state',
    )
    .option('--lease <ms>', 'with --store: lease of a claimed wake (default 10000)', parsePositiveInt)
    .option('--workers <n>', 'worker threads (default: the number of cores + 1)', parsePositiveInt)
    .option('--limit <key=value>', 'set a limit, e.g. --limit timeoutMs=5000 (repeatable)', collect)
    .action(
      (
        opts: {
          config: string;
          state: string;
          store?: string;
          lease?: number;
          workers?: number;
          limit?: string[];
        },
        cmd: Command,
      ) =>
        ctx.run(cmd, async () => {
          const g = ctx.globals(cmd);
          const io = ctx.io;
          let decls;
          let layers;
          try {
            decls = loadDeclarations(opts.config);
            const flagLimits: Partial<RuntimeLimits> = limitsFromFlags(opts.limit ?? []);
            if (g.timeout !== undefined) flagLimits.timeoutMs = g.timeout;
            if (g.fuel !== undefined) flagLimits.fuel = g.fuel;
            layers = mergeLimits([
              { source: 'file', limits: limitsFromFile(opts.config) },
              { source: 'flag', limits: flagLimits },
            ]);
          } catch (e) {
            if (e instanceof DeclarationError || e instanceof LimitsError) throw new CliError(e.message);
            throw e;
          }
          for (const e of decls.errors) io.err(`berm worker: warning: ${e.message} (entry skipped)\n`);
          // one process per state directory (a bermd --root or another berm worker would re-deliver
          // this one's claims and interleave its journal); wake add|ls|rm --state do not take it
          let lock: StateLock;
          try {
            lock = StateLock.acquire(opts.state, `berm worker --config ${opts.config}`, '--state');
          } catch (e) {
            if (e instanceof StateLockError) throw new CliError(e.message);
            throw e;
          }
          try {
            if (opts.store !== undefined) fs.mkdirSync(opts.state, { recursive: true });
            // the runtime as bermd assembles it: the same store, limits, workers and protocol door
            let assembled: AssembledRuntime;
            try {
              assembled = await assembleRuntime({
                who: 'berm worker',
                state: opts.state,
                store: opts.store ?? null,
                ...(opts.lease !== undefined ? { leaseMs: opts.lease } : {}),
                cacheDir: cacheDirOf(g),
                ...(opts.workers !== undefined ? { workers: opts.workers } : {}),
                limits: layers.limits,
                limitSources: layers.sources,
                ...(g.memory !== undefined ? { memorySize: g.memory } : {}),
                log: (line) => io.out(`berm worker: ${line}\n`),
              });
            } catch (e) {
              if (e instanceof AssemblyError) throw new CliError(e.message);
              throw e;
            }
            const { runtime: rt, shared } = assembled;
            // deployments stay per process (the declaration file); wakes are shared
            shared?.attach(rt, { deployments: false });
            const poolSource = opts.workers !== undefined ? 'flag' : 'default';
            io.out(`berm worker: state ${path.resolve(opts.state)} (${rt.store.description})\n`);
            io.out(`berm worker: workers = ${rt.stats().workers} (${poolSource})\n`);
            for (const k of LIMIT_KEYS)
              io.out(`berm worker: limit ${k} = ${rt.limits[k]} (${rt.limitSources[k]})\n`);
            // --verbose: each invocation's log lines (berm.log) under its line, the only place the
            // logs of a wake or notification (no caller waits for them) can be seen
            rt.on('invocation', (r: JournalRecord, o: Outcome | null) => {
              io.out(`${invocationLine(r)}\n`);
              if (g.verbose && o && 'logs' in o) for (const line of o.logs) io.out(`  [log] ${line}\n`);
            });
            try {
              for (const d of await rt.loadDeclarations(decls)) {
                const entries = [d.onWake ? 'on_wake' : '', d.onNotify ? 'on_notify' : ''].filter(Boolean);
                io.out(
                  `berm worker: harness ${d.name}: ${describeGrant(d.capabilities, d.grant as Record<string, unknown>)}; ` +
                    `${d.tools.length} tools${entries.length ? `; ${entries.join(', ')}` : ''}\n`,
                );
              }
            } catch (e) {
              await assembled.close(0);
              throw new CliError(`cannot deploy the declared harnesses: ${(e as Error).message}`);
            }
            const summaries: HarnessSummary[] = rt.harnesses().map((d) => ({
              name: d.name,
              onWake: d.onWake,
              onNotify: d.onNotify,
              tools: d.tools.map((t) => t.name),
              capabilities: d.capabilities,
            }));
            fs.writeFileSync(
              path.join(opts.state, HARNESSES_FILE),
              JSON.stringify(summaries, null, 2) + '\n',
            );
            // SIGUSR2 is handled before the pid file names this process and for as long as the
            // process lives: a `berm wake add` that read the pid file just before it was removed
            // may signal at any moment of the drain or after it, and the signal's default action
            // would end the process mid-drain
            let draining = false;
            onRescanSignal(() => {
              if (draining) return; // the store is closing: the new wakes fire at the next start
              const n = rt.rescan();
              if (n > 0) io.out(`berm worker: picked up ${n} wakes armed from outside\n`);
            });
            const pidFile = path.join(opts.state, PID_FILE);
            fs.writeFileSync(pidFile, `${process.pid}\n`);
            // the due-set as it came back, before any of it fires: claims found at start are the
            // re-deliveries (a wake that falls due at once is not one)
            const st = rt.stats();
            rt.start();
            io.out(
              `berm worker: ready; ${st.wakesPending} wakes pending, ${st.wakesClaimed} to re-deliver\n`,
            );

            // keeps the process alive while idle (the due-set's timer is unref'd); not a polling tick
            const keepAlive = setInterval(() => {}, 1 << 30);
            await new Promise<void>((resolve) => {
              const stop = (sig: string) => {
                process.off('SIGINT', onInt);
                process.off('SIGTERM', onTerm);
                io.out(`berm worker: ${sig}: draining in-flight work\n`);
                resolve();
              };
              const onInt = () => stop('SIGINT');
              const onTerm = () => stop('SIGTERM');
              process.on('SIGINT', onInt);
              process.on('SIGTERM', onTerm);
            });
            draining = true;
            await assembled.close();
            clearInterval(keepAlive);
            try {
              if (fs.readFileSync(pidFile, 'utf8').trim() === String(process.pid)) fs.rmSync(pidFile);
            } catch {
              // already gone
            }
            onRescanSignal(null);
            io.out('berm worker: stopped\n');
            return ExitCode.Ok;
          } finally {
            lock.release();
          }
        }),
    );
}

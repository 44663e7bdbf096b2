/**
 * `berm wake add|ls|rm --state DIR`: the local side of `berm wake` (wake-client.ts is the daemon
 * side; `--state` selects this one): the due-set of a state directory from outside a guest. The
 * target is checked like a guest's berm.wake.arm (the harness must be declared and export
 * `on_wake`; payload and delay within the limits): against `--config FILE` when given (its ELF
 * symbols are read, nothing is compiled or run), else against the harnesses of the last
 * `berm worker` on that state directory. A running `berm worker` is told to pick the new wakes up.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Command } from 'commander';
import { DeclarationError, loadDeclarations } from '../../config/declarations.js';
import { readImage } from '../../engine/image.js';
import {
  ArmError,
  defaultLimits,
  LimitError,
  ON_WAKE,
  SqliteStore,
  StateLock,
  wakeSpec,
  type WakeRecord,
} from '../../runtime/index.js';

import { LimitsError, limitsFromFile } from '../../runtime/limit-sources.js';
import { CliError, ExitCode, parsePositiveInt, type ExitCodeValue } from '../context.js';
import type { CliContext } from '../program.js';
import { HARNESSES_FILE, PID_FILE, type HarnessSummary } from './worker.js';
import { pendingText, wakesText } from './wake-client.js';

function known(state: string, config: string | undefined): Map<string, { onWake: boolean }> {
  const out = new Map<string, { onWake: boolean }>();
  if (config !== undefined) {
    let decls;
    try {
      decls = loadDeclarations(config);
    } catch (e) {
      if (e instanceof DeclarationError) throw new CliError(e.message);
      throw e;
    }
    for (const d of decls.harnesses) {
      const image = readImage(d.elf!);
      out.set(d.name, { onWake: image.functions.some((f) => f.global && f.names.includes(ON_WAKE)) });
    }
    return out;
  }
  const file = path.join(state, HARNESSES_FILE);
  let list: HarnessSummary[];
  try {
    list = JSON.parse(fs.readFileSync(file, 'utf8')) as HarnessSummary[];
  } catch {
    throw new CliError(`no harnesses are known for ${state} (${file} is missing); pass --config FILE`);
  }
  for (const h of list) out.set(h.name, { onWake: h.onWake });
  return out;
}

/**
 * Tell a running `berm worker` on this state directory to rescan; false when none runs. The pid
 * file is believed only when the live holder of the state lock is that pid: a file left by a
 * killed queue names a pid the system may have given to an unrelated process since.
 */
export function signalRunner(state: string): boolean {
  try {
    const pid = Number(fs.readFileSync(path.join(state, PID_FILE), 'utf8').trim());
    if (!Number.isSafeInteger(pid) || pid <= 0) return false;
    if (StateLock.holder(state) !== pid) return false;
    process.kill(pid, 'SIGUSR2');
    return true;
  } catch {
    return false;
  }
}

/** Flags of the local `wake add` (beside the daemon side's --in, --at, --payload, --id). */
export interface LocalAddFlags {
  state: string;
  config?: string;
  in?: number;
  at?: number;
  payload?: string;
  id?: string;
  count?: number;
  spread?: number;
}

/** Options only the local side has; `--state` selects it. */
export function addLocalWakeOptions(cmd: Command, add: boolean): Command {
  cmd.option('--state <dir>', 'work on the due-set of this berm worker state directory instead of a daemon');
  if (add) {
    cmd
      .option(
        '--config <file>',
        'with --state: declaration file to check the harness against (default: the last berm worker)',
      )
      .option(
        '--count <n>',
        'with --state: arm N wakes (ids ID-0..ID-N-1 when --id is given)',
        parsePositiveInt,
      )
      .option(
        '--spread <ms>',
        'with --count: spread the due instants evenly over this many ms',
        parsePositiveInt,
      );
  }
  return cmd;
}

/** `berm wake add --state DIR HARNESS`. */
export function localWakeAdd(
  ctx: CliContext,
  cmd: Command,
  harness: string,
  opts: LocalAddFlags,
): ExitCodeValue {
  const g = ctx.globals(cmd);
  let limits = defaultLimits(1);
  try {
    if (opts.config !== undefined) limits = { ...limits, ...limitsFromFile(opts.config) };
  } catch (e) {
    if (e instanceof LimitsError) throw new CliError(e.message);
    throw e;
  }
  const harnesses = known(opts.state, opts.config);
  const base = opts.at ?? Date.now() + (opts.in ?? 0);
  const count = opts.count ?? 1;
  const specs = [];
  try {
    for (let i = 0; i < count; i++) {
      const at = base + (count > 1 && opts.spread ? Math.floor((i * opts.spread) / count) : 0);
      const id = opts.id === undefined ? undefined : count > 1 ? `${opts.id}-${i}` : opts.id;
      specs.push(
        wakeSpec(
          { harness, at, payload: opts.payload ?? '', ...(id !== undefined ? { id } : {}), armedBy: 'cli' },
          harnesses.get(harness),
          [...harnesses.keys()],
          limits,
        ),
      );
    }
  } catch (e) {
    if (e instanceof ArmError || e instanceof LimitError) throw new CliError(`wake add: ${e.message}`);
    throw e;
  }
  const store = SqliteStore.open(opts.state);
  let armed: WakeRecord[];
  try {
    armed = store.dues.armMany(specs);
  } finally {
    store.close();
  }
  const told = signalRunner(opts.state);
  if (g.json)
    ctx.io.out(
      JSON.stringify({ armed: armed.map((w) => ({ id: w.id, when: w.when })), signalled: told }) + '\n',
    );
  else if (armed.length === 1) ctx.io.out(`${armed[0]!.id}\n`);
  else ctx.io.out(`armed ${armed.length} wakes\n`);
  return ExitCode.Ok;
}

/**
 * The store of an existing `berm worker` state directory, for the verbs that only read or remove:
 * opening a mistyped path would create an empty state there and report "0 wakes pending".
 * @throws CliError when DIR holds no state.sqlite
 */
export function existingStore(dir: string): SqliteStore {
  if (!fs.existsSync(path.join(dir, 'state.sqlite'))) {
    throw new CliError(
      `--state ${dir}: no berm worker state there (no state.sqlite); give the --state DIR of a berm worker`,
    );
  }
  return SqliteStore.open(dir);
}

/** `berm wake ls --state DIR [--limit N]`: the earliest N (default all) and how many are pending. */
export function localWakeLs(
  ctx: CliContext,
  cmd: Command,
  opts: { state: string; limit?: number },
): ExitCodeValue {
  const g = ctx.globals(cmd);
  const store = existingStore(opts.state);
  try {
    const all = store.dues.list();
    const list = opts.limit === undefined ? all : all.slice(0, opts.limit);
    if (g.json) ctx.io.out(JSON.stringify(list) + '\n');
    else
      ctx.io.out(
        wakesText(
          list.map((w) => ({
            id: w.id,
            harness: w.harness,
            due_at: w.when,
            payload: w.payload,
            kind: w.kind,
            entry: w.entry,
          })),
        ),
      );
    if (list.length < all.length)
      ctx.io.err(`berm: listed the earliest ${list.length} of ${all.length} pending wakes\n`);
    else if (!g.json && list.length > 0) ctx.io.err(`berm: ${pendingText(store.dues.count())}\n`);
  } finally {
    store.close();
  }
  return ExitCode.Ok;
}

/** `berm wake rm --state DIR ID`. */
export function localWakeRm(
  ctx: CliContext,
  cmd: Command,
  id: string,
  opts: { state: string },
): ExitCodeValue {
  const g = ctx.globals(cmd);
  const store = existingStore(opts.state);
  let removed: boolean;
  try {
    removed = store.dues.cancel(id);
  } finally {
    store.close();
  }
  // as against bermd: a refusal goes to stderr (its --json form to stdout) with exit 2
  if (!removed) throw new CliError(`wake rm ${id}: no wake with id ${id}`);
  ctx.io.out(g.json ? JSON.stringify({ status: 'ok', id }) + '\n' : `cancelled ${id}\n`);
  return ExitCode.Ok;
}

/**
 * `berm wake ls --dead|retry|drop --state DIR`: the dead-letter set of a `berm worker` state
 * directory (docs/wakes.md), the local side of the daemon's `GET /wakes/dead`,
 * `POST /wakes/dead/{id}/retry` and `DELETE /wakes/dead/{id}` (wake-client.ts). A retried entry
 * is armed in the due-set and a running `berm worker` is told to pick it up; a dropped one is
 * journaled in the state's journal.
 */
import type { Command } from 'commander';
import { deadWakeInfo, dropDeadEntry } from '../../runtime/index.js';
import { CliError, ExitCode, type ExitCodeValue } from '../context.js';
import type { CliContext } from '../program.js';
import { deadText } from './wake-client.js';
import { existingStore, signalRunner } from './wake.js';

/** `berm wake ls --dead --state DIR [--limit N]`: the oldest N entries (default all). */
export function localDeadLs(
  ctx: CliContext,
  cmd: Command,
  opts: { state: string; limit?: number },
): ExitCodeValue {
  const g = ctx.globals(cmd);
  const store = existingStore(opts.state);
  try {
    const all = store.dues.deadList().map(deadWakeInfo);
    const list = opts.limit === undefined ? all : all.slice(0, opts.limit);
    ctx.io.out(g.json ? JSON.stringify(list) + '\n' : deadText(list));
    if (list.length < all.length)
      ctx.io.err(`berm: listed the oldest ${list.length} of ${all.length} dead-letter entries\n`);
  } finally {
    store.close();
  }
  return ExitCode.Ok;
}

/** `berm wake retry --state DIR ID`. */
export function localDeadRetry(
  ctx: CliContext,
  cmd: Command,
  id: string,
  opts: { state: string },
): ExitCodeValue {
  const g = ctx.globals(cmd);
  const store = existingStore(opts.state);
  let r;
  try {
    r = store.dues.retryDead(id, Date.now());
  } finally {
    store.close();
  }
  if (r.status === 'missing') throw new CliError(`wake retry ${id}: no dead-letter entry with id ${id}`);
  if (r.status === 'conflict')
    throw new CliError(
      `wake retry ${id}: a pending wake holds id ${id} (a recurring schedule re-armed itself?): cancel it (berm wake rm ${id}) or drop the entry`,
    );
  const told = signalRunner(opts.state);
  ctx.io.out(
    g.json
      ? JSON.stringify({ id: r.record.id, when: r.record.when, signalled: told }) + '\n'
      : `armed ${id} again\n`,
  );
  return ExitCode.Ok;
}

/** `berm wake drop --state DIR ID`: removed and journaled in the state's journal. */
export function localDeadDrop(
  ctx: CliContext,
  cmd: Command,
  id: string,
  opts: { state: string },
): ExitCodeValue {
  const g = ctx.globals(cmd);
  const store = existingStore(opts.state);
  let r;
  try {
    r = dropDeadEntry(store, id, (line) => ctx.io.err(`berm: ${line}\n`));
  } finally {
    store.close();
  }
  if (!r) throw new CliError(`wake drop ${id}: no dead-letter entry with id ${id}`);
  ctx.io.out(g.json ? JSON.stringify({ status: 'ok', id }) + '\n' : `dropped ${id}\n`);
  return ExitCode.Ok;
}

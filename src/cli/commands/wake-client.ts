/**
 * `berm wake add|ls|rm|retry|drop` against bermd (`POST /wakes`, `GET /wakes`, `DELETE /wakes/{id}`,
 * and the dead-letter set's `GET /wakes/dead`, `POST /wakes/dead/{id}/retry`,
 * `DELETE /wakes/dead/{id}`): arm a wake of a deployed harness's `on_wake` from outside the guest,
 * list the pending ones, cancel one; list the dead-letter set (`ls --dead`), arm an entry again,
 * drop one. Body of `POST /wakes`: `{"harness", "delay_ms" | "at", "payload"?, "id"?}` (at: ms since
 * the Unix epoch); the answer and the list entries are `{id, harness, due_at, payload, ...}`.
 */
import { InvalidArgumentError, type Command } from '../commander.js';
import { CliError, ExitCode, parsePositiveInt } from '../context.js';
import type { CliContext } from '../program.js';
import { WAKE_LIST_LIMIT } from '../../contract/index.js';
import type { DaemonFlags, DeadWakeInfo, WakeInfo } from './daemon-client.js';
import { addDaemonOptions, withDaemon } from './daemon-verbs.js';
import { addLocalWakeOptions, localWakeAdd, localWakeLs, localWakeRm, type LocalAddFlags } from './wake.js';
import { localDeadDrop, localDeadLs, localDeadRetry } from './wake-dead.js';

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Parse a delay: milliseconds (`1500`) or a number with a unit `ms`, `s`, `m`, `h`, `d`
 * (`30s`, `1.5m`).
 * @returns milliseconds (an integer >= 0)
 * @throws InvalidArgumentError (exit 2)
 */
export function parseDelay(text: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?$/.exec(text.trim());
  if (!m) throw new InvalidArgumentError(`expected a delay such as 1500, 30s, 5m or 2h, got '${text}'`);
  const ms = Math.round(Number(m[1]) * UNIT_MS[m[2] ?? 'ms']);
  if (!Number.isSafeInteger(ms)) throw new InvalidArgumentError(`delay '${text}' is too large`);
  return ms;
}

/**
 * Parse a due time: an ISO 8601 date-time (`2026-12-01T08:00:00Z`) or milliseconds since the Unix
 * epoch.
 * @throws InvalidArgumentError (exit 2)
 */
export function parseAt(text: string): number {
  if (/^\d+$/.test(text.trim())) return Number(text.trim());
  if (!/^\d{4}-\d{2}-\d{2}T/.test(text.trim())) {
    throw new InvalidArgumentError(
      `expected an ISO date-time such as 2026-12-01T08:00:00Z or ms since the epoch, got '${text}'`,
    );
  }
  const t = Date.parse(text);
  if (Number.isNaN(t)) throw new InvalidArgumentError(`'${text}' is not a date-time`);
  return t;
}

/**
 * A time until due in the units `wake add --in` takes: whole seconds below 2 minutes, then
 * minutes below 2 hours, hours below 2 days, then days (`45s`, `68m`, `5h`, `3d`; past = `0s`).
 */
export function untilText(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s}s`;
  if (s < 120 * 60) return `${Math.round(s / 60)}m`;
  if (s < 48 * 3600) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86400)}d`;
}

/**
 * What a wake runs, for the HARNESS column: the harness for a wake of its `on_wake`, `harness.tool`
 * for a `berm.call.after` (kind `call`: the payload is that tool's arguments).
 */
function target(w: WakeInfo): string {
  return w.kind === 'call' && typeof w.entry === 'string' ? `${w.harness}.${w.entry}` : String(w.harness);
}

/**
 * Text of `berm wake ls`, against bermd and on a `--state` directory alike (the latter maps its
 * records with the daemon's field names).
 */
export function wakesText(ws: WakeInfo[], now = Date.now()): string {
  if (ws.length === 0) return 'no wakes pending\n';
  const wi = Math.max(2, ...ws.map((w) => String(w.id).length));
  const wh = Math.max(7, ...ws.map((w) => target(w).length));
  const rows = [`${'ID'.padEnd(wi)}  ${'HARNESS'.padEnd(wh)}  ${'DUE'.padEnd(24)}  IN       PAYLOAD`];
  for (const w of ws) {
    const due = Number(w.due_at);
    const when = Number.isFinite(due) ? new Date(due).toISOString() : String(w.due_at);
    const inS = Number.isFinite(due) ? untilText(due - now) : '?';
    const payload = String(w.payload ?? '');
    const shown =
      payload.length > 40 ? JSON.stringify(payload.slice(0, 37) + '...') : JSON.stringify(payload);
    rows.push(
      `${String(w.id).padEnd(wi)}  ${target(w).padEnd(wh)}  ${when.padEnd(24)}  ${inS.padEnd(7)}  ${shown}`,
    );
  }
  return rows.join('\n') + '\n';
}

/**
 * Text of `berm wake ls --dead`, against bermd and on a `--state` directory alike: one row per
 * entry, oldest first (when it entered the set), with its reason, deliveries and last error.
 */
export function deadText(ds: DeadWakeInfo[]): string {
  if (ds.length === 0) return 'no dead-letter entries\n';
  const wi = Math.max(2, ...ds.map((d) => String(d.id).length));
  const wh = Math.max(7, ...ds.map((d) => target(d).length));
  const rows = [
    `${'ID'.padEnd(wi)}  ${'HARNESS'.padEnd(wh)}  ${'DEAD SINCE'.padEnd(24)}  ${'REASON'.padEnd(11)}  ATTEMPTS  LAST ERROR`,
  ];
  for (const d of ds) {
    const at = Number.isFinite(d.dead_at) ? new Date(d.dead_at).toISOString() : String(d.dead_at);
    const err = String(d.last_error ?? '').replace(/\s+/g, ' ');
    rows.push(
      `${String(d.id).padEnd(wi)}  ${target(d).padEnd(wh)}  ${at.padEnd(24)}  ${String(d.reason).padEnd(11)}  ${String(d.attempts).padEnd(8)}  ${err.length > 60 ? err.slice(0, 57) + '...' : err}`,
    );
  }
  return rows.join('\n') + '\n';
}

/** bermd's default and largest `limit` of `GET /wakes`. */
const WAKE_LS_DEFAULT = WAKE_LIST_LIMIT.default;
const WAKE_LS_MAX = WAKE_LIST_LIMIT.max;

/** `1 wake pending`, `3 wakes pending`. */
export function pendingText(n: number): string {
  return `${n} wake${n === 1 ? '' : 's'} pending`;
}

/**
 * The stderr line of a wake list cut short: `listed` of `pending` wakes, and how to see more.
 * @returns undefined when the list holds every pending wake
 */
export function pendingNote(listed: number, pending: number): string | undefined {
  if (pending <= listed) return undefined;
  const more = listed < WAKE_LS_MAX ? `; --limit N lists up to ${WAKE_LS_MAX}` : '';
  return `berm: listed the earliest ${listed} of ${pending} pending wakes${more}\n`;
}

/**
 * True when a wake verb works on a `berm worker` state directory (`--state`) rather than a daemon.
 * `--state` with `--host` or `--token-file` is ambiguous and refused.
 * @throws CliError for the ambiguous combination
 */
function local(flags: DaemonFlags & { state?: string }): flags is DaemonFlags & { state: string } {
  if (flags.state === undefined) return false;
  if (flags.host !== undefined || flags.tokenFile !== undefined) {
    throw new CliError(
      'wake: --state (a berm worker state directory) and --host/--token-file (a daemon) exclude each other',
    );
  }
  return true;
}

/** Options of `wake add`. */
interface AddFlags extends DaemonFlags, Partial<Omit<LocalAddFlags, 'state'>> {
  in?: number;
  at?: number;
  payload?: string;
  id?: string;
  /** the local side (wake.ts): a berm worker state directory instead of a daemon */
  state?: string;
}

/** Register `wake add|ls|rm` (the daemon side). */
export function registerWakeClient(program: Command, ctx: CliContext): Command {
  const wake = program
    .command('wake')
    .description(
      "arm, list and cancel wakes of deployed harnesses' on_wake; list, retry and drop the dead-letter set",
    );
  addDaemonOptions(
    addLocalWakeOptions(wake.command('add'), true)
      .description('arm a wake of HARNESS (its on_wake runs when due); give --in or --at')
      .argument('<harness>', 'deployed harness name')
      .option('--in <delay>', 'due after this delay: ms, or with a unit (30s, 5m, 2h)', parseDelay)
      .option('--at <time>', 'due at this ISO date-time or ms since the epoch', parseAt)
      .option('--payload <text>', 'payload handed to on_wake', '')
      .option('--id <id>', 're-arm or name the wake (an existing id is replaced)'),
  ).action((harness: string, flags: AddFlags, cmd: Command) =>
    ctx.run(cmd, async () => {
      const g = ctx.globals(cmd);
      if (local(flags)) return localWakeAdd(ctx, cmd, harness, { ...flags, state: flags.state });
      // the daemon arms one wake per request and checks it against its own deployments: these
      // options would be dropped without a word
      const localOnly = (['count', 'spread', 'config'] as const).filter((k) => flags[k] !== undefined);
      if (localOnly.length > 0) {
        throw new CliError(
          `wake add: ${localOnly.map((k) => `--${k}`).join(', ')} ${localOnly.length === 1 ? 'works' : 'work'} only with --state DIR (a berm worker ` +
            'state directory); against bermd, arm each wake with its own wake add',
        );
      }
      if ((flags.in === undefined) === (flags.at === undefined)) {
        throw new CliError('wake add: give exactly one of --in DELAY and --at TIME');
      }
      const w = await withDaemon(flags, (c) =>
        c.addWake({
          harness,
          ...(flags.in !== undefined ? { delay_ms: flags.in } : { at: flags.at }),
          payload: flags.payload ?? '',
          ...(flags.id !== undefined ? { id: flags.id } : {}),
        }),
      );
      ctx.io.out(g.json ? JSON.stringify(w) + '\n' : `${w.id}\n`);
      return ExitCode.Ok;
    }),
  );
  addDaemonOptions(
    addLocalWakeOptions(wake.command('ls').description('list pending wakes, earliest first'), false).option(
      '--limit <n>',
      `list at most the earliest N wakes (bermd: ${WAKE_LS_DEFAULT} unless given, at most ${WAKE_LS_MAX}; --state: all); stderr says how many are pending`,
      parsePositiveInt,
    ),
  )
    .option(
      '--dead',
      'list the dead-letter set instead: wakes whose deliveries all ended through a host fault (worker lost, store error, process killed), oldest first, with the reason',
    )
    .action((flags: DaemonFlags & { state?: string; limit?: number; dead?: boolean }, cmd: Command) =>
      ctx.run(cmd, async () => {
        const g = ctx.globals(cmd);
        const limit = flags.limit;
        if (flags.dead) {
          if (local(flags)) return localDeadLs(ctx, cmd, { state: flags.state, limit });
          const { dead, count } = await withDaemon(flags, (c) => c.listDead(limit));
          ctx.io.out(g.json ? JSON.stringify(dead) + '\n' : deadText(dead));
          if (count > dead.length)
            ctx.io.err(`berm: listed the oldest ${dead.length} of ${count} dead-letter entries\n`);
          return ExitCode.Ok;
        }
        if (local(flags)) return localWakeLs(ctx, cmd, { state: flags.state, limit });
        const { wakes, pending } = await withDaemon(flags, (c) => c.listWakes(limit));
        ctx.io.out(g.json ? JSON.stringify(wakes) + '\n' : wakesText(wakes));
        // bermd answers at most a page: without this line a cut list reads as the whole due-set
        const note = pendingNote(wakes.length, pending);
        if (note !== undefined) ctx.io.err(note);
        else if (!g.json && pending > 0) ctx.io.err(`berm: ${pendingText(pending)}\n`);
        return ExitCode.Ok;
      }),
    );
  addDaemonOptions(
    addLocalWakeOptions(
      wake.command('rm').description('cancel a pending wake').argument('<id>', 'wake id'),
      false,
    ),
  ).action((id: string, flags: DaemonFlags & { state?: string }, cmd: Command) =>
    ctx.run(cmd, async () => {
      const g = ctx.globals(cmd);
      if (local(flags)) return localWakeRm(ctx, cmd, id, { state: flags.state });
      await withDaemon(flags, (c) => c.removeWake(id));
      ctx.io.out(g.json ? JSON.stringify({ status: 'ok', id }) + '\n' : `cancelled ${id}\n`);
      return ExitCode.Ok;
    }),
  );
  addDaemonOptions(
    addLocalWakeOptions(
      wake
        .command('retry')
        .description(
          'arm a dead-letter entry again (due now, attempts reset); it leaves the set. Refused while a pending wake holds its id',
        )
        .argument('<id>', 'wake id of the entry (berm wake ls --dead)'),
      false,
    ),
  ).action((id: string, flags: DaemonFlags & { state?: string }, cmd: Command) =>
    ctx.run(cmd, async () => {
      const g = ctx.globals(cmd);
      if (local(flags)) return localDeadRetry(ctx, cmd, id, { state: flags.state });
      const w = await withDaemon(flags, (c) => c.retryDead(id));
      ctx.io.out(g.json ? JSON.stringify(w) + '\n' : `armed ${w.id} again\n`);
      return ExitCode.Ok;
    }),
  );
  addDaemonOptions(
    addLocalWakeOptions(
      wake
        .command('drop')
        .description('remove a dead-letter entry for good (journaled as dropped)')
        .argument('<id>', 'wake id of the entry (berm wake ls --dead)'),
      false,
    ),
  ).action((id: string, flags: DaemonFlags & { state?: string }, cmd: Command) =>
    ctx.run(cmd, async () => {
      const g = ctx.globals(cmd);
      if (local(flags)) return localDeadDrop(ctx, cmd, id, { state: flags.state });
      await withDaemon(flags, (c) => c.dropDead(id));
      ctx.io.out(g.json ? JSON.stringify({ status: 'ok', id }) + '\n' : `dropped ${id}\n`);
      return ExitCode.Ok;
    }),
  );
  return wake;
}

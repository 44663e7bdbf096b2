/**
 * berm.exec.run's child process, run in the bridge worker (src/sync/bridge.ts). Why not
 * spawnSync: its timeout signals only the direct child, and a grandchild that keeps the output
 * pipes open then blocks spawnSync for ever. Here the shell starts in a new session (detached),
 * so it leads its own process group, and the whole group is killed with SIGKILL at the timeout,
 * when output overflows, and when the shell exits (a tool call leaves no background processes).
 */
import { spawn } from 'node:child_process';

/** Arguments of {@link run}. */
export interface RunArgs {
  command: string;
  cwd: string;
  env: Record<string, string>;
  maxOutput: number;
}

/** Outcome of {@link run}; `exitCode` is null when a signal ended the shell. */
export interface RunResult {
  stdout: Uint8Array;
  stderr: Uint8Array;
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  truncated: boolean;
}

/** Time allowed for the pipes to close after the group was killed, in ms. */
export const PIPE_DRAIN_MS = 500;

function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // ESRCH: the group is already gone.
  }
}

/**
 * Run `command` through `/bin/sh -c` in `cwd` with exactly `env`, stdin from /dev/null, keeping
 * at most `maxOutput` bytes of stdout and of stderr. The job's signal (the per-call timeout)
 * kills the process group.
 */
export async function run(args: RunArgs, signal: AbortSignal): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn('/bin/sh', ['-c', args.command], {
      cwd: args.cwd,
      env: args.env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const sizes = { out: 0, err: 0 };
    let timedOut = false;
    let truncated = false;
    let exit: { code: number | null; signal: string | null } | null = null;
    let settled = false;
    let drainTimer: NodeJS.Timeout | undefined;

    const collect = (which: 'out' | 'err', chunks: Buffer[]) => (chunk: Buffer) => {
      const room = args.maxOutput - sizes[which];
      if (chunk.length <= room) {
        chunks.push(chunk);
        sizes[which] += chunk.length;
        return;
      }
      // One byte past the cap, wherever it falls (also in a later chunk, after output that
      // filled the cap exactly), kills the group.
      if (room > 0) {
        chunks.push(chunk.subarray(0, room));
        sizes[which] += room;
      }
      if (!truncated) {
        truncated = true;
        killGroup(child.pid);
      }
    };
    child.stdout.on('data', collect('out', out));
    child.stderr.on('data', collect('err', err));

    const onAbort = () => {
      timedOut = true;
      killGroup(child.pid);
    };
    signal.addEventListener('abort', onAbort, { once: true });

    const finish = () => {
      if (settled) return;
      settled = true;
      clearTimeout(drainTimer);
      signal.removeEventListener('abort', onAbort);
      child.stdout.destroy();
      child.stderr.destroy();
      resolve({
        stdout: new Uint8Array(Buffer.concat(out)),
        stderr: new Uint8Array(Buffer.concat(err)),
        exitCode: exit?.code ?? null,
        signal: exit?.signal ?? null,
        timedOut,
        truncated,
      });
    };
    child.on('error', (e) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      reject(e);
    });
    child.on('exit', (code, sig) => {
      exit = { code, signal: sig };
      killGroup(child.pid);
      // A process that left the group (setsid) may still hold the pipes; do not wait on it.
      drainTimer = setTimeout(finish, PIPE_DRAIN_MS);
    });
    child.on('close', finish);
  });
}

/**
 * The exec capability:
 *   berm.exec.run / crabtalk.exec.run (command, cwd, env key, env value, ...) ->
 *     one field, JSON {"stdout", "stderr", "exit_code", "signal", "truncated"}
 * The command runs under /bin/sh -c in cwd (default: root; must lie inside root) with only the
 * environment the call names. A per-call timeout kills the whole process group; output is capped.
 * Note: root confines the working directory, not what the command may do; granting exec grants
 * the host user's powers to the shell.
 */
import * as fs from 'node:fs';
import { fieldText } from '../../wire/fields.js';
import { runSync } from '../../sync/bridge.js';
import {
  arity,
  boundedTimeout,
  callDeadline,
  defineCapability,
  guarded,
  limitsOf,
  ok,
  type Capability,
  type CapabilityContext,
  type CapabilityReply,
} from '../types.js';
import type { RunArgs, RunResult } from './run-job.js';
import {
  ROOT_FIX,
  ROOT_SCHEMA,
  canonicalRoot,
  placeGuestPath,
  prepareRoot,
  resolveExisting,
} from '../common/confine.js';

/** Limits of the exec capability and their defaults (ms, bytes). */
export const EXEC_LIMITS = Object.freeze({
  /** exec.run: wall-clock budget; at expiry the whole process group is killed */
  execTimeoutMs: 30_000,
  /** exec.run: bytes kept of stdout and of stderr each; more kills the process group */
  execMaxOutput: 1024 * 1024,
});

const RUN_JOB = new URL(`./run-job${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url);

/** Most environment pairs a call may name. */
export const EXEC_MAX_ENV = 256;

function run(name: string, fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply {
  const bad = arity(name, fields, 'command, cwd, env key, env value, ...', 2, 2 + 2 * EXEC_MAX_ENV);
  if (bad) return bad;
  if (fields.length % 2 !== 0) return { refused: `${name}: env keys and values must come in pairs` };
  const command = fieldText(fields[0]!, 'command');
  const guestCwd = fieldText(fields[1]!, 'cwd');
  if (command.includes('\0')) return { refused: `${name}: command contains a NUL byte` };
  if (command === '') return { refused: `${name}: command is empty` };
  const env: Record<string, string> = Object.create(null) as Record<string, string>;
  for (let i = 2; i < fields.length; i += 2) {
    const k = fieldText(fields[i]!, 'env key');
    const v = fieldText(fields[i + 1]!, 'env value');
    if (!/^[^=\0]+$/.test(k))
      return { refused: `${name}: env key ${JSON.stringify(k)} is empty or holds '=' or NUL` };
    if (v.includes('\0')) return { refused: `${name}: env value of ${k} contains a NUL byte` };
    env[k] = v;
  }
  const root = canonicalRoot(ctx.grant.root, name);
  if (typeof root !== 'string') return root;
  let cwd = root;
  if (guestCwd !== '') {
    const abs = placeGuestPath(root, ctx.grant.root!, guestCwd, name);
    if (typeof abs !== 'string') return abs;
    const real = resolveExisting(root, abs, guestCwd, name);
    if (typeof real !== 'string') return real;
    if (!fs.statSync(real).isDirectory())
      return { error: `${name}: cwd ${JSON.stringify(guestCwd)} is not a directory` };
    cwd = real;
  }
  const limits = limitsOf(ctx, EXEC_LIMITS);
  const timeout = boundedTimeout(ctx, limits.execTimeoutMs);
  const args: RunArgs = { command, cwd, env, maxOutput: limits.execMaxOutput };
  const res = runSync<RunResult>(RUN_JOB, 'run', args, timeout, callDeadline(ctx));
  if (!res.ok) return { error: `${name}: ${res.error}` };
  const r = res.value;
  if (r.timedOut) {
    const why = timeout < limits.execTimeoutMs ? " (the tool call's deadline)" : '';
    return { error: `${name}: timed out after ${timeout} ms${why}; the process group was killed` };
  }
  const dec = new TextDecoder();
  return ok(
    JSON.stringify({
      stdout: dec.decode(r.stdout),
      stderr: dec.decode(r.stderr),
      exit_code: r.exitCode,
      signal: r.signal,
      truncated: r.truncated,
    }),
  );
}

/** The exec capability: see the module comment and docs/capabilities.md. */
export const execCapability: Capability = defineCapability({
  name: 'exec',
  calls: {
    'berm.exec.run': (f, c) => guarded('berm.exec.run', () => run('berm.exec.run', f, c)),
    'crabtalk.exec.run': (f, c) => guarded('crabtalk.exec.run', () => run('crabtalk.exec.run', f, c)),
  },
  grant: {
    schema: { type: 'object', properties: { root: ROOT_SCHEMA }, required: ['root'] },
    fixes: { root: ROOT_FIX },
    prepare: prepareRoot,
  },
  limits: EXEC_LIMITS,
});

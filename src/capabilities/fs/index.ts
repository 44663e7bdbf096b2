/**
 * The fs capability: read, write, glob and grep confined to the granted root. Wire calls and fields:
 *   berm.fs.read / crabtalk.fs.read   (path, offset, limit) -> content bytes
 *   berm.fs.write / crabtalk.fs.write (path, content)       -> decimal bytes written
 *   berm.fs.glob                      (pattern)             -> newline-separated relative paths
 *   berm.fs.grep                      (pattern, path_glob)  -> "path:line:text" lines
 */
import * as fs from 'node:fs';
import { fieldInt, fieldText } from '../../wire/fields.js';
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
import { GlobError, compileGlob, literalPrefix, walk } from './glob.js';
import type { GrepArgs } from './grep-job.js';
import {
  ROOT_FIX,
  ROOT_SCHEMA,
  canonicalRoot,
  openParent,
  openVerified,
  placeGuestPath,
  prepareRoot,
  resolveExisting,
} from '../common/confine.js';

/** Limits of the fs capability and their defaults (bytes, entries, lines, ms). */
export const FS_LIMITS = Object.freeze({
  /** fs.read: largest `limit` honoured; bigger requests are clamped */
  fsReadMax: 4 * 1024 * 1024,
  /** fs.write: largest content accepted */
  fsWriteMax: 4 * 1024 * 1024,
  /** fs.glob / fs.grep: most directory entries visited per call */
  fsWalkMaxEntries: 100_000,
  /** fs.glob / fs.grep: most result lines */
  fsMaxResults: 10_000,
  /** fs.grep: files bigger than this are skipped */
  grepMaxFileBytes: 8 * 1024 * 1024,
  /** fs.glob: time budget of the match (the walk itself is bounded by fsWalkMaxEntries) */
  fsGlobTimeoutMs: 10_000,
  /** fs.grep: time budget (the regex runs off-thread so a pathological pattern cannot wedge us) */
  grepTimeoutMs: 10_000,
});

/** Last line appended when a listing hit a cap, so the guest knows it is incomplete. */
export const TRUNCATED_MARK = '[berm: truncated]';

function rootOf(ctx: CapabilityContext, name: string): string | CapabilityReply {
  return canonicalRoot(ctx.grant.root, name);
}

function read(name: string, fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply {
  const bad = arity(name, fields, 'path, offset, limit', 3);
  if (bad) return bad;
  const guestPath = fieldText(fields[0]!, 'path');
  const offset = fieldInt(fields[1]!, 'offset', { min: 0n, max: BigInt(Number.MAX_SAFE_INTEGER) });
  const limit = fieldInt(fields[2]!, 'limit', { min: 0n, max: BigInt(Number.MAX_SAFE_INTEGER) });
  const root = rootOf(ctx, name);
  if (typeof root !== 'string') return root;
  const abs = placeGuestPath(root, ctx.grant.root!, guestPath, name);
  if (typeof abs !== 'string') return abs;
  const real = resolveExisting(root, abs, guestPath, name);
  if (typeof real !== 'string') return real;
  const fd = openVerified(root, real, 'read', guestPath, name);
  if (typeof fd !== 'number') return fd;
  try {
    const cap = limitsOf(ctx, FS_LIMITS).fsReadMax;
    // limit 0 means "as much as allowed"; any limit is clamped to the cap.
    const want = limit === 0n || limit > BigInt(cap) ? cap : Number(limit);
    const buf = Buffer.alloc(want);
    let got = 0;
    while (got < want) {
      const n = fs.readSync(fd, buf, got, want - got, Number(offset) + got);
      if (n === 0) break;
      got += n;
    }
    return { fields: [new Uint8Array(buf.buffer, buf.byteOffset, got)] };
  } finally {
    fs.closeSync(fd);
  }
}

function write(name: string, fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply {
  const bad = arity(name, fields, 'path, content', 2);
  if (bad) return bad;
  const guestPath = fieldText(fields[0]!, 'path');
  const content = fields[1]!;
  const max = limitsOf(ctx, FS_LIMITS).fsWriteMax;
  if (content.length > max)
    return { refused: `${name}: content is ${content.length} bytes; the limit is ${max}` };
  const root = rootOf(ctx, name);
  if (typeof root !== 'string') return root;
  const abs = placeGuestPath(root, ctx.grant.root!, guestPath, name);
  if (typeof abs !== 'string') return abs;
  if (abs === root) return { error: `${name}: ${JSON.stringify(guestPath)} is the root directory` };
  const parent = openParent(root, abs, guestPath, name);
  if (!('fd' in parent)) return parent;
  let fd: number | CapabilityReply;
  try {
    // Named through the parent's handle: the leaf is created in the directory that was checked.
    let target = parent.at(abs.slice(abs.lastIndexOf('/') + 1));
    let st: fs.Stats | undefined;
    try {
      st = fs.lstatSync(target);
    } catch {
      st = undefined;
    }
    let mode: 'write' | 'rewrite' = 'write';
    if (st?.isSymbolicLink()) {
      // Writing through a symlink is allowed only when it resolves inside root, to an existing
      // file: nothing is created through a link.
      const real = resolveExisting(root, target, guestPath, name);
      if (typeof real !== 'string') return real;
      target = real;
      mode = 'rewrite';
    }
    fd = openVerified(root, target, mode, guestPath, name);
  } finally {
    parent.close();
  }
  if (typeof fd !== 'number') return fd;
  try {
    // Truncate only after verifying what was opened: O_TRUNC would act before the check.
    fs.ftruncateSync(fd, 0);
    let done = 0;
    while (done < content.length) done += fs.writeSync(fd, content, done, content.length - done, done);
    return ok(String(done));
  } finally {
    fs.closeSync(fd);
  }
}

function checkPattern(name: string, pattern: string): CapabilityReply | null {
  if (pattern.includes('\0')) return { refused: `${name}: pattern contains a NUL byte` };
  if (pattern.startsWith('/')) return { refused: `${name}: pattern must be relative to the root` };
  if (pattern.split('/').includes('..')) return { refused: `${name}: pattern contains '..'` };
  try {
    compileGlob(pattern);
  } catch (e) {
    if (e instanceof GlobError) return { refused: `${name}: bad pattern: ${e.message}` };
    throw e;
  }
  return null;
}

function glob(name: string, fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply {
  const bad = arity(name, fields, 'pattern', 1);
  if (bad) return bad;
  const pattern = fieldText(fields[0]!, 'pattern');
  const badPattern = checkPattern(name, pattern);
  if (badPattern) return badPattern;
  const root = rootOf(ctx, name);
  if (typeof root !== 'string') return root;
  const limits = limitsOf(ctx, FS_LIMITS);
  const re = compileGlob(pattern);
  const budget = boundedTimeout(ctx, limits.fsGlobTimeoutMs);
  const deadline = Date.now() + budget;
  const { entries, truncated } = walk(root, literalPrefix(pattern), limits.fsWalkMaxEntries);
  const out: string[] = [];
  let cut = truncated;
  for (const e of entries) {
    if (Date.now() > deadline) {
      return { error: `${name}: timed out after ${budget} ms (narrow the pattern)` };
    }
    if (!re.test(e.rel)) continue;
    if (out.length >= limits.fsMaxResults) {
      cut = true;
      break;
    }
    out.push(e.rel);
  }
  if (cut) out.push(TRUNCATED_MARK);
  return ok(out.join('\n'));
}

function grep(name: string, fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply {
  const bad = arity(name, fields, 'pattern, path_glob', 2);
  if (bad) return bad;
  const pattern = fieldText(fields[0]!, 'pattern');
  const pathGlob = fieldText(fields[1]!, 'path_glob') || '**';
  if (pattern.includes('\0')) return { refused: `${name}: pattern contains a NUL byte` };
  try {
    new RegExp(pattern);
  } catch (e) {
    return { refused: `${name}: bad regular expression: ${(e as Error).message}` };
  }
  const badGlob = checkPattern(name, pathGlob);
  if (badGlob) return badGlob;
  const root = rootOf(ctx, name);
  if (typeof root !== 'string') return root;
  const limits = limitsOf(ctx, FS_LIMITS);
  const args: GrepArgs = {
    root,
    pattern,
    glob: pathGlob,
    maxEntries: limits.fsWalkMaxEntries,
    maxResults: limits.fsMaxResults,
    maxFileBytes: limits.grepMaxFileBytes,
  };
  const res = runSync<{ lines: string[]; truncated: boolean }>(
    GREP_JOB,
    'grep',
    args,
    boundedTimeout(ctx, limits.grepTimeoutMs),
    callDeadline(ctx),
  );
  if (!res.ok) return { error: `${name}: ${res.error}` };
  const lines = res.value.lines;
  if (res.value.truncated) lines.push(TRUNCATED_MARK);
  return ok(lines.join('\n'));
}

const GREP_JOB = new URL(`./grep-job${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url);

function handler(name: string, body: (n: string, f: Uint8Array[], c: CapabilityContext) => CapabilityReply) {
  return (fields: Uint8Array[], ctx: CapabilityContext): CapabilityReply =>
    guarded(name, () => body(name, fields, ctx));
}

/** The fs capability: see the module comment for wire fields, and docs/capabilities.md. */
export const fsCapability: Capability = defineCapability({
  name: 'fs',
  calls: {
    'berm.fs.read': handler('berm.fs.read', read),
    'crabtalk.fs.read': handler('crabtalk.fs.read', read),
    'berm.fs.write': handler('berm.fs.write', write),
    'crabtalk.fs.write': handler('crabtalk.fs.write', write),
    'berm.fs.glob': handler('berm.fs.glob', glob),
    'berm.fs.grep': handler('berm.fs.grep', grep),
  },
  grant: {
    schema: { type: 'object', properties: { root: ROOT_SCHEMA }, required: ['root'] },
    fixes: { root: ROOT_FIX },
    prepare: prepareRoot,
  },
  limits: FS_LIMITS,
});

/**
 * The registry of capabilities an operator's declaration may name (upstream berm issue 6). Each
 * capability lives in its own folder and never imports another; shared infrastructure is
 * types.ts and common/ (path confinement, the synchronous worker bridge).
 */
import { callCapability } from './call/index.js';
import { clockCapability } from './clock/index.js';
import { execCapability } from './exec/index.js';
import { fsCapability } from './fs/index.js';
import { httpCapability } from './http/index.js';
import { scheduleCapability } from './schedule/index.js';
import { storageCapability } from './storage/index.js';
import type { Capability } from './types.js';

/** Every capability by declaration name: fs, exec, http, clock, storage, call, schedule. */
export const CAPABILITIES: Readonly<Record<string, Capability>> = Object.freeze({
  fs: fsCapability,
  exec: execCapability,
  http: httpCapability,
  clock: clockCapability,
  storage: storageCapability,
  call: callCapability,
  schedule: scheduleCapability,
});

/** Declaration names of every capability, sorted. */
export const CAPABILITY_NAMES: readonly string[] = Object.keys(CAPABILITIES).sort();

export * from './types.js';

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
import { storageCapability } from './storage/index.js';
import type { Capability } from './types.js';

/** Every capability by declaration name: fs, exec, http, clock, storage, call. */
export const CAPABILITIES: Readonly<Record<string, Capability>> = Object.freeze({
  fs: fsCapability,
  exec: execCapability,
  http: httpCapability,
  clock: clockCapability,
  storage: storageCapability,
  call: callCapability,
});

/** Declaration names of every capability, sorted. */
export const CAPABILITY_NAMES: readonly string[] = Object.keys(CAPABILITIES).sort();

/** Why a capability name of a registered family is refused, and the fix. */
export interface CapabilityRefusal {
  problem: string;
  fix: string;
}

const registered = new Map<string, Capability>();
const families = new Map<string, (name: string) => CapabilityRefusal | null>();

/**
 * Add capabilities supplied from above this layer (the protocol door, an embedder) under a
 * family prefix: `family` names the family (e.g. "protocol"); each capability's name is
 * `family` or starts with `family:`. `explain` tells a declaration why a name of the family
 * that is not registered is refused, with the fix. Registering the same names again replaces
 * them (idempotent for the same objects).
 * @throws Error when a name clashes with a built-in capability or lies outside the family.
 */
export function registerCapabilityFamily(
  family: string,
  caps: readonly Capability[],
  explain: (name: string) => CapabilityRefusal | null,
): void {
  for (const c of caps) {
    if (CAPABILITIES[c.name]) throw new Error(`capability ${c.name} is built in`);
    if (c.name !== family && !c.name.startsWith(`${family}:`)) {
      throw new Error(`capability ${c.name} is outside the family ${family}`);
    }
  }
  for (const c of caps) registered.set(c.name, c);
  families.set(family, explain);
}

/** The capability a declaration names, built in or registered; undefined when unknown. */
export function findCapability(name: string): Capability | undefined {
  return CAPABILITIES[name] ?? registered.get(name);
}

/** Every capability name a declaration may use right now (built in and registered), sorted. */
export function capabilityNames(): string[] {
  return [...CAPABILITY_NAMES, ...registered.keys()].sort();
}

/** Why an unknown name of a registered family is refused, or null when no family claims it. */
export function explainCapability(name: string): CapabilityRefusal | null {
  const family = name.split(':')[0]!;
  const explain = families.get(family);
  return explain ? explain(name) : null;
}

export * from './types.js';

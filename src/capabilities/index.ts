/**
 * The registry of capabilities an operator's declaration may name. Each capability lives in its
 * own folder, never imports another, and describes itself as data ({@link CapabilityDefinition}):
 * wire names and handlers, grant schema, default limits, identity fields. Everything else is
 * derived from this list: the declaration keys and their owners (src/config/declarations.ts), the
 * host-call name table (src/util/host-call-names.ts), the image identity, the linker entries.
 * Shared infrastructure is types.ts and common/ (path confinement, the synchronous worker bridge).
 * Adding a capability: see docs/capabilities.md.
 */
import { registerHostCallNames } from '../util/host-call-names.js';
import { callCapability } from './call/index.js';
import { clockCapability } from './clock/index.js';
import { execCapability } from './exec/index.js';
import { fsCapability } from './fs/index.js';
import { httpCapability } from './http/index.js';
import { scheduleCapability } from './schedule/index.js';
import { storageCapability } from './storage/index.js';
import { wsCapability } from './ws/index.js';
import type { Capability } from './types.js';

const BUILT_IN: readonly Capability[] = [
  fsCapability,
  execCapability,
  httpCapability,
  clockCapability,
  storageCapability,
  callCapability,
  scheduleCapability,
  wsCapability,
];

const registry: Record<string, Capability> = {};

/**
 * Add a capability to the registry (the built-ins are added when this module loads): its name
 * becomes a declaration name, its grant keys declaration keys, its wire names known host calls.
 * @throws Error when the name is taken, a wire name is already answered by another capability, or
 *   a grant key is owned by another capability with a different schema.
 */
export function registerCapability(cap: Capability): void {
  if (registry[cap.name]) throw new Error(`capability ${cap.name} is already registered`);
  for (const other of Object.values(registry)) {
    // One handler answering for several capabilities (the protocol door's crabtalk.protocol.call,
    // linked by any of its groups) is one binding, not a clash.
    const clash = cap.wireNames.find((w) => other.wireNames.includes(w) && other.calls[w] !== cap.calls[w]);
    if (clash)
      throw new Error(`capability ${cap.name}: wire name ${clash} is already answered by ${other.name}`);
    for (const [key, schema] of Object.entries(cap.grant.schema.properties)) {
      const theirs = other.grant.schema.properties[key];
      if (theirs !== undefined && JSON.stringify(theirs) !== JSON.stringify(schema)) {
        throw new Error(
          `capability ${cap.name}: grant key ${key} is owned by ${other.name} with another schema`,
        );
      }
    }
  }
  registerHostCallNames(cap.wireNames, cap.name);
  registry[cap.name] = cap;
}

for (const c of BUILT_IN) registerCapability(c);

/** Every registered capability by declaration name (fs, exec, http, clock, storage, call, ...). */
export const CAPABILITIES: Readonly<Record<string, Capability>> = registry;

/** Declaration names of every registered capability, sorted. */
export function capabilityNames(): string[] {
  return Object.keys(registry).sort();
}

/** Declaration names of the built-in capabilities, sorted. */
export const CAPABILITY_NAMES: readonly string[] = capabilityNames();

/** Each declaration key a capability owns, with its owners (sorted), e.g. root -> [exec, fs]. */
export function grantKeyOwners(): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const name of capabilityNames()) {
    for (const key of Object.keys(registry[name]!.grant.schema.properties)) {
      out.set(key, [...(out.get(key) ?? []), name]);
    }
  }
  return out;
}

/** Every wire name answered by a registered capability, sorted. */
export function capabilityWireNames(): string[] {
  return Object.values(registry)
    .flatMap((c) => c.wireNames)
    .sort();
}

/** Why a capability name of a registered family is refused, and the fix. */
export interface CapabilityRefusal {
  problem: string;
  fix: string;
}

const families = new Map<string, (name: string) => CapabilityRefusal | null>();

/**
 * Claim a family of capability names (`family` and `family:member`, e.g. the protocol door's
 * `protocol:read`): a declaration naming a member that is not registered is refused with what
 * `explain` says (why, and the fix) instead of a bare "unknown capability". Registering the
 * family again replaces its explainer.
 */
export function registerCapabilityFamily(
  family: string,
  explain: (name: string) => CapabilityRefusal | null,
): void {
  families.set(family, explain);
}

/**
 * Why `name` is refused by the family that claims it (see {@link registerCapabilityFamily}), or
 * null when it is registered or no family claims it.
 */
export function explainCapability(name: string): CapabilityRefusal | null {
  if (registry[name]) return null;
  const explain = families.get(name.split(':')[0]!);
  return explain ? explain(name) : null;
}

export * from './types.js';

/**
 * Names of host calls by ecall number (FNV-1a-64 of the name), so an unknown ecall number can be
 * reported by name. The harness ABI's own calls are listed here; each capability's wire names come
 * from its module (src/capabilities) and are added by the capability registry when it loads, so
 * the one source of capability names is the capability itself. test/fnv.test.ts checks
 * guest-sdk/caps.txt against both.
 */
import { fnv1a64 } from './fnv.js';

/** The harness ABI's host calls (src/harness): arguments, result, log, heap. */
export const CORE_HOST_CALL_NAMES: readonly string[] = Object.freeze([
  'berm.log',
  'berm.args.len',
  'berm.args.read',
  'berm.fail',
  'berm.done',
  'berm.result.read',
  'berm.heap.start',
  'berm.heap.size',
]);

const names = new Set<string>(CORE_HOST_CALL_NAMES);
const byNumber = new Map<bigint, string>(CORE_HOST_CALL_NAMES.map((n) => [fnv1a64(n), n]));
/** wire name -> the capabilities (declaration names) whose grant links it */
const owners = new Map<string, string[]>();

/**
 * Add wire names (a capability's) to the table.
 * @param owner the declaration name of the capability answering them (`fs`, `protocol:read`):
 *   recorded so that an unlinked call can name the grant it lacks (see {@link hostCallOwners})
 * @throws Error when a name's FNV-1a-64 number collides with a different known name.
 */
export function registerHostCallNames(wireNames: Iterable<string>, owner?: string): void {
  for (const n of wireNames) {
    const number = fnv1a64(n);
    const other = byNumber.get(number);
    if (other !== undefined && other !== n) throw new Error(`host call ${n} collides with ${other}`);
    byNumber.set(number, n);
    names.add(n);
    if (owner !== undefined) {
      const list = owners.get(n) ?? [];
      if (!list.includes(owner)) owners.set(n, [...list, owner].sort());
    }
  }
}

/**
 * The capabilities whose grant links host call `number` (sorted declaration names; several when
 * one handler answers for a family, e.g. the protocol door's groups), or [] for the harness ABI's
 * own calls and numbers no capability registered.
 */
export function hostCallOwners(number: bigint): readonly string[] {
  const name = hostCallName(number);
  return (name !== undefined && owners.get(name)) || [];
}

/** Every known name: the core ones and those registered so far, sorted. */
export function knownHostCallNames(): readonly string[] {
  return [...names].sort();
}

/** The name whose FNV-1a-64 hash is `number`, or undefined. */
export function hostCallName(number: bigint): string | undefined {
  return byNumber.get(BigInt.asUintN(64, number));
}

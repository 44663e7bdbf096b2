/**
 * Names of the upstream berm host calls and capabilities (guest-sdk/caps.txt holds the same list;
 * test/fnv.test.ts keeps the two equal), so an unknown ecall number can be reported by name.
 */
import { fnv1a64 } from './fnv.js';

const NAMES = [
  'berm.log',
  'berm.args.len',
  'berm.args.read',
  'berm.fail',
  'berm.done',
  'berm.result.read',
  'berm.heap.start',
  'berm.heap.size',
  'berm.fs.read',
  'berm.fs.write',
  'berm.fs.glob',
  'berm.fs.grep',
  'berm.exec.run',
  'berm.http.fetch',
  'berm.now',
  'berm.clock.offset',
  'berm.get',
  'berm.set',
  'berm.delete',
  'berm.call',
  'berm.wake.arm',
  'berm.wake.cancel',
  'berm.call.after',
  'crabtalk.fs.read',
  'crabtalk.fs.write',
  'crabtalk.exec.run',
  'crabtalk.http.fetch',
];

let byNumber: Map<bigint, string> | null = null;

/** Every known name. */
export function knownHostCallNames(): readonly string[] {
  return NAMES;
}

/** The name whose FNV-1a-64 hash is `number`, or undefined. */
export function hostCallName(number: bigint): string | undefined {
  byNumber ??= new Map(NAMES.map((n) => [fnv1a64(n), n]));
  return byNumber.get(BigInt.asUintN(64, number));
}

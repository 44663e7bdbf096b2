// Wasm harness images for tests, written in WAT and assembled by wabt (an implementation of the
// text format independent of berm), with the manifest appended as the custom section `berm.abi`
// the way the wasm32 SDK's post-link step appends it (WebAssembly core spec 5.5.3: id 0, size,
// name, payload).
import { fnv1a64 } from '../../src/util/fnv.js';

type Wabt = {
  parseWat(
    name: string,
    text: string,
    features?: Record<string, boolean>,
  ): {
    toBinary(o: object): { buffer: Uint8Array };
    destroy(): void;
  };
};
let wabt: Wabt | null = null;

/** The host-call number of `name` as a WAT i64 literal (FNV-1a-64, two's complement). */
export function num(name: string): string {
  return BigInt.asIntN(64, fnv1a64(name)).toString();
}

function leb(n: number): number[] {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n !== 0) b |= 0x80;
    out.push(b);
  } while (n !== 0);
  return out;
}

/** `wasm` followed by a custom section `name` holding `payload`. */
export function withCustom(wasm: Uint8Array, name: string, payload: Uint8Array): Uint8Array {
  const n = new TextEncoder().encode(name);
  const content = [...leb(n.length), ...n, ...payload];
  return Uint8Array.from([...wasm, 0, ...leb(content.length), ...content]);
}

/** Assemble `wat`; with `manifest`, append it as the `berm.abi` section. */
export async function wat(text: string, manifest?: object | string): Promise<Uint8Array> {
  wabt ??= (await (await import('wabt')).default()) as unknown as Wabt;
  const m = wabt.parseWat('t.wat', text, { tail_call: true });
  try {
    const bin = new Uint8Array(m.toBinary({}).buffer);
    if (manifest === undefined) return bin;
    const json = typeof manifest === 'string' ? manifest : JSON.stringify(manifest);
    return withCustom(bin, 'berm.abi', new TextEncoder().encode(json));
  } finally {
    m.destroy();
  }
}

/** A manifest declaring `tools` (names; parameters {"type":"object"}). */
export function manifestOf(...tools: string[]): object {
  return {
    abi_version: 1,
    usage: 'test',
    tools: tools.map((name) => ({ name, description: name, parameters: { type: 'object' } })),
  };
}

/** The WAT of the one import every Wasm harness has. */
export const SYSCALL = '(import "berm" "syscall" (func $sys (param i64 i32 i32) (result i64)))';

/**
 * 64-bit FNV-1a hash, the rule upstream berm uses to turn a capability name into the ecall number
 * in a7: offset basis 0xcbf29ce484222325, prime 0x100000001b3; for each byte, xor then multiply
 * modulo 2^64 (http://www.isthe.com/chongo/tech/comp/fnv/, "FNV-1a").
 *
 * @param name the capability name; strings are hashed as their UTF-8 bytes.
 * @returns the hash as an unsigned 64-bit bigint.
 */
export function fnv1a64(name: string | Uint8Array): bigint {
  const bytes = typeof name === 'string' ? new TextEncoder().encode(name) : name;
  // Two 32-bit halves keep the loop in small integers; BigInt multiply per byte is ~20x slower.
  let hi = 0xcbf29ce4;
  let lo = 0x84222325;
  for (const b of bytes) {
    lo = (lo ^ b) >>> 0;
    // (hi:lo) * 0x100000001b3 = (hi:lo) * 0x1b3 + (lo << 40); only lo << 8 lands in the high word.
    const loMul = lo * 0x1b3;
    const carry = Math.floor(loMul / 0x100000000);
    const newLo = loMul >>> 0;
    const newHi = (Math.imul(hi, 0x1b3) + carry + (lo << 8)) >>> 0;
    hi = newHi;
    lo = newLo;
  }
  return (BigInt(hi) << 32n) | BigInt(lo >>> 0);
}

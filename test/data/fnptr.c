/* Engine test guest: a dozen functions reached through a table of function pointers in .data, so
 * the one call site is `jalr ra, 0(t1)` (or similar) through a pointer loaded from memory, and
 * the indirect-call dispatcher has one caller (Binaryen's optimiser inlines it there). */
typedef unsigned long u64;
typedef u64 (*op_fn)(u64, u64);

__attribute__((noinline)) static u64 op_add(u64 a, u64 b) { return a + b; }
__attribute__((noinline)) static u64 op_sub(u64 a, u64 b) { return a - b; }
__attribute__((noinline)) static u64 op_mul(u64 a, u64 b) { return a * b; }
__attribute__((noinline)) static u64 op_xor(u64 a, u64 b) { return a ^ b; }
__attribute__((noinline)) static u64 op_or(u64 a, u64 b) { return a | b; }
__attribute__((noinline)) static u64 op_and(u64 a, u64 b) { return a & b; }
__attribute__((noinline)) static u64 op_shl(u64 a, u64 b) { return a << (b & 63); }
__attribute__((noinline)) static u64 op_shr(u64 a, u64 b) { return a >> (b & 63); }
__attribute__((noinline)) static u64 op_max(u64 a, u64 b) { return a > b ? a : b; }
__attribute__((noinline)) static u64 op_min(u64 a, u64 b) { return a < b ? a : b; }
__attribute__((noinline)) static u64 op_rot(u64 a, u64 b) { return (a << (b & 63)) | (a >> ((64 - b) & 63)); }

op_fn table[11] = {op_add, op_sub, op_mul, op_xor, op_or, op_and, op_shl, op_shr, op_max, op_min, op_rot};

/* fold(n, seed, skew): a running value combined with each operation in turn, n steps, through
 * the function pointer table[k % 11] plus skew bytes (skew 0: the function; otherwise no entry) */
u64 fold(u64 n, u64 seed, u64 skew) {
  u64 v = seed;
  for (u64 k = 0; k < n; k++) {
    op_fn f = (op_fn)((char *)table[k % 11] + skew);
    v = f(v, k * 0x9e3779b97f4a7c15ul + 1);
  }
  return v;
}

void _start(void) {}

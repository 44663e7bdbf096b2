// Reader test program (test/elf.test.ts): functions, an alias, a dense switch (jump table),
// function-pointer tables, a function address taken in code, and a .berm.abi manifest.
// Built by test/data/Makefile with clang/lld (medany) and GNU gcc/ld (medany, medlow).
typedef long (*op_fn)(long, long);

__attribute__((noinline)) long op_add(long a, long b) { return a + b; }
__attribute__((noinline)) long op_sub(long a, long b) { return a - b; }
__attribute__((noinline)) static long op_mul(long a, long b) { return a * b; }
long op_plus(long a, long b) __attribute__((alias("op_add")));

const op_fn ops[] = {op_add, op_sub, op_mul};
op_fn current = op_sub;
long counter;

__attribute__((noinline)) long dispatch(long k, long a, long b) {
  switch (k) {
  case 0: return a + 1;
  case 1: return b * 3;
  case 2: return a ^ b;
  case 3: return a - 7;
  case 4: return b << 2;
  case 5: return a | b;
  case 6: return counter++;
  default: return -1;
  }
}

__attribute__((noinline)) op_fn pick(long k) {
  // the address of op_mul is materialised in code, not loaded from a table
  return k ? op_mul : ops[k & 1];
}

__attribute__((section(".berm.abi"), used)) static const char manifest[16] = "berm-abi v1";

void _start(void) {
  long r = dispatch(counter, 2, 3) + pick(counter)(1, 2) + current(4, 5) + ops[2](6, 7);
  register long a0 __asm__("a0") = r;
  register long a7 __asm__("a7") = 93;
  __asm__ volatile("ecall" : : "r"(a0), "r"(a7));
  for (;;) {
  }
}

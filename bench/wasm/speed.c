/* Bench harness: the guest-speed programs of fixtures/src/compute.c as tools, for building as a
 * WebAssembly harness (make BERM_TARGET=wasm32) and, for comparison, as an ELF. Each tool takes
 * "a0 a1" (decimal text) and answers the program's result as 16 hex digits. */
#include "../../fixtures/src/compute.c"

static void run(u64 (*f)(u64, u64)) {
  size_t n;
  const char *args = berm_args(&n);
  char *end;
  u64 a0 = strtoull(args, &end, 10);
  u64 a1 = strtoull(end, NULL, 10);
  u64 r = f(a0, a1);
  char out[16];
  for (int i = 0; i < 16; i++) out[i] = "0123456789abcdef"[(r >> (60 - 4 * i)) & 15];
  berm_done(out, 16);
}

static u64 fib2(u64 n, u64 unused) { return fib_rec(n); }

BERM_TOOL(sha256, "sha256_seed(a0, a1)") { run(sha256_seed); }
BERM_TOOL(fib, "fib_rec(a0)") { run(fib2); }
BERM_TOOL(qsort, "qsort_ints(a0, a1)") { run(qsort_ints); }
BERM_TOOL(coremark, "coremark_mix(a0, a1)") { run(coremark_mix); }

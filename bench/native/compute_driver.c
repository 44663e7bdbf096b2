/* Native / qemu driver for the compute benchmarks: links fixtures/src/compute.c (built with
 * -DBERM_HOST against the SDK's stand-in host) and calls one raw entry point with the same
 * arguments the translated guest gets, timing it with clock_gettime(CLOCK_MONOTONIC).
 * Usage: compute_driver <symbol> <a0> [a1]   ->   prints "<result as 16 hex digits> <ns>" */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef uint64_t u64;
extern u64 sha256_seed(u64 n, u64 seed);
extern u64 fib_rec(u64 n);
extern u64 qsort_ints(u64 n, u64 seed);
extern u64 coremark_mix(u64 iters, u64 seed);

static u64 now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (u64)ts.tv_sec * 1000000000ull + (u64)ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s <symbol> <a0> [a1]\n", argv[0]);
    return 2;
  }
  const char *sym = argv[1];
  u64 a0 = strtoull(argv[2], NULL, 0), a1 = argc > 3 ? strtoull(argv[3], NULL, 0) : 0;
  u64 r, t0 = now_ns();
  if (!strcmp(sym, "sha256_seed")) r = sha256_seed(a0, a1);
  else if (!strcmp(sym, "fib_rec")) r = fib_rec(a0);
  else if (!strcmp(sym, "qsort_ints")) r = qsort_ints(a0, a1);
  else if (!strcmp(sym, "coremark_mix")) r = coremark_mix(a0, a1);
  else {
    fprintf(stderr, "unknown symbol %s\n", sym);
    return 2;
  }
  u64 t1 = now_ns();
  printf("%016llx %llu\n", (unsigned long long)r, (unsigned long long)(t1 - t0));
  return 0;
}

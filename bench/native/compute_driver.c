/* Native / qemu driver for the compute benchmarks: links fixtures/src/compute.c (built with
 * -DBERM_HOST against the SDK's stand-in host) and calls one raw entry point with the same
 * arguments the translated guest gets, 1 + <calls> times in this process, timing each call in
 * CPU time of the process (clock_gettime(CLOCK_PROCESS_CPUTIME_ID): user + system, all threads).
 * Under qemu-user the clock_gettime syscall is passed to the host kernel, so the clock is the
 * qemu process's own CPU time (emulation and code translation included).
 * Usage: compute_driver <calls> <symbol> <a0> [a1]
 *   -> prints "<result as 16 hex digits> <ns of call 0> <ns of call 1> ... <ns of call <calls>>"
 * Exits 3 if the calls do not all return the same result. */
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

static u64 cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (u64)ts.tv_sec * 1000000000ull + (u64)ts.tv_nsec;
}

static int call(const char *sym, u64 a0, u64 a1, u64 *r) {
  if (!strcmp(sym, "sha256_seed")) *r = sha256_seed(a0, a1);
  else if (!strcmp(sym, "fib_rec")) *r = fib_rec(a0);
  else if (!strcmp(sym, "qsort_ints")) *r = qsort_ints(a0, a1);
  else if (!strcmp(sym, "coremark_mix")) *r = coremark_mix(a0, a1);
  else return -1;
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s <calls> <symbol> <a0> [a1]\n", argv[0]);
    return 2;
  }
  int calls = atoi(argv[1]);
  const char *sym = argv[2];
  u64 a0 = strtoull(argv[3], NULL, 0), a1 = argc > 4 ? strtoull(argv[4], NULL, 0) : 0;
  if (calls < 0 || calls > 1000) {
    fprintf(stderr, "calls must be 0..1000, got %s\n", argv[1]);
    return 2;
  }
  u64 first = 0, ns[1001];
  for (int i = 0; i <= calls; i++) {
    u64 r, t0 = cpu_ns();
    if (call(sym, a0, a1, &r)) {
      fprintf(stderr, "unknown symbol %s\n", sym);
      return 2;
    }
    ns[i] = cpu_ns() - t0;
    if (i == 0) first = r;
    else if (r != first) {
      fprintf(stderr, "%s: call %d returned %016llx, call 0 %016llx\n", sym, i, (unsigned long long)r,
              (unsigned long long)first);
      return 3;
    }
  }
  printf("%016llx", (unsigned long long)first);
  for (int i = 0; i <= calls; i++) printf(" %llu", (unsigned long long)ns[i]);
  printf("\n");
  return 0;
}

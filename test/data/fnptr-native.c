/* Native driver for fnptr.c: prints the values test/translate-valid.test.ts expects
 * (`make -C test/data fnptr-expected`, x86-64 gcc). */
#include <stdio.h>
#define _start fnptr_start
#include "fnptr.c"
int main(void) {
  unsigned long ns[] = {0, 1, 11, 12, 1000};
  for (int i = 0; i < 5; i++) printf("fold(%lu, 7, 0) = %lu\n", ns[i], fold(ns[i], 7, 0));
  printf("fold(100000, 0x123456789abcdef, 0) = %lu\n", fold(100000, 0x123456789abcdeful, 0));
  return 0;
}

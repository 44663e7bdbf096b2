/* Engine test guest: stores through pointers the test chooses (test/pool.test.ts). */
typedef unsigned long u64;
u64 poke(u64 addr, u64 value) { *(volatile u64 *)addr = value; return 0; }
u64 peek(u64 addr) { return *(volatile u64 *)addr; }
void _start(void) {}
u64 counter; /* referenced pc-relatively, so the link keeps relocations */
u64 bump(void) { return ++counter; }
/* Moves sp to addr - 16 and stores at 16(sp), as code running on a stack of its own would. */
u64 sp_poke(u64 addr, u64 value) {
  __asm__ volatile("mv t0, sp\n\taddi sp, %0, -16\n\tsd %1, 16(sp)\n\tmv sp, t0" : : "r"(addr), "r"(value) : "t0", "memory");
  return 0;
}

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
/* Calls a function with sp = addr, as code switching to a stack of its own would: the callee's
 * entry check traps StackOverflow when addr is outside [stack limit, end of memory]. */
__attribute__((noinline)) u64 seven(void) { return 7; }
u64 sp_call(u64 addr) {
  u64 r;
  __asm__ volatile("mv s1, sp\n\tmv sp, %1\n\tcall seven\n\tmv sp, s1\n\tmv %0, a0"
                   : "=r"(r) : "r"(addr) : "s1", "ra", "a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7",
                     "t0", "t1", "t2", "t3", "t4", "t5", "t6", "memory");
  return r;
}

/* Engine test guest: stores through pointers the test chooses (test/pool.test.ts). */
typedef unsigned long u64;
u64 poke(u64 addr, u64 value) { *(volatile u64 *)addr = value; return 0; }
u64 peek(u64 addr) { return *(volatile u64 *)addr; }
void _start(void) {}
u64 counter; /* referenced pc-relatively, so the link keeps relocations */
u64 bump(void) { return ++counter; }

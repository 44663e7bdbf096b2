# Reader test: a function address and a data load relaxed by GNU ld to gp-relative accesses
# (R_RISCV_GPREL_I). Built by test/data/Makefile with .sdata placed just below .text.
  .text
  .globl _start
  .type _start, @function
_start:
  lui a0, %hi(fn)
  addi a0, a0, %lo(fn)
  lui a1, %hi(var)
  ld a1, %lo(var)(a1)
  jr a0
  .size _start, .-_start
  .type fn, @function
fn:
  ret
  .size fn, .-fn
  .section .sdata,"aw"
  .dword 1
  .dword 2
var: .dword 5

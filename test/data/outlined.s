# Translator test: code shared by LLVM's machine outliner (rustc/clang at opt-level z), which
# follows no calling convention. OUTLINED_FUNCTION_0 is called through t0 (`call t0, f`,
# returning with `jr t0`), reads the caller's s1, writes s2 for the caller, and calls another
# function itself. OUTLINED_FUNCTION_1 is tail-called: it reads the caller's s4, calls a
# function, restores the caller's saved registers and returns from the caller's frame.
# Expected (by the RV64I semantics): call_outlined(x) = 9x + 6, tail_outlined(x) = 2x + 15.
  .text
  .globl call_outlined
  .type call_outlined, @function
call_outlined:
  addi sp, sp, -32
  sd ra, 24(sp)
  sd s1, 16(sp)
  sd s2, 8(sp)
  slli s1, a0, 1
  add s1, s1, a0
  call t0, OUTLINED_FUNCTION_0
  add a0, a0, s2
  ld ra, 24(sp)
  ld s1, 16(sp)
  ld s2, 8(sp)
  addi sp, sp, 32
  ret
  .size call_outlined, .-call_outlined

  .globl tail_outlined
  .type tail_outlined, @function
tail_outlined:
  addi sp, sp, -16
  sd ra, 8(sp)
  sd s4, 0(sp)
  addi s4, a0, 7
  tail OUTLINED_FUNCTION_1
  .size tail_outlined, .-tail_outlined

  .type helper, @function
helper:
  slli a0, a0, 1
  addi a0, a0, 1
  ret
  .size helper, .-helper

  .type OUTLINED_FUNCTION_0, @function
OUTLINED_FUNCTION_0:
  mv a0, s1
  addi s2, a0, 5
  mv s3, ra
  call helper
  mv ra, s3
  jr t0
  .size OUTLINED_FUNCTION_0, .-OUTLINED_FUNCTION_0

  .type OUTLINED_FUNCTION_1, @function
OUTLINED_FUNCTION_1:
  mv a0, s4
  call helper
  ld ra, 8(sp)
  ld s4, 0(sp)
  addi sp, sp, 16
  ret
  .size OUTLINED_FUNCTION_1, .-OUTLINED_FUNCTION_1

  # the entry points' addresses (a relocation section for --emit-relocs to keep)
  .section .rodata
  .dword call_outlined
  .dword tail_outlined

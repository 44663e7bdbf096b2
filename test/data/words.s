# Registers that hold a sign-extended 32-bit value ("word value") on one path and not on another,
# for the optimising tier's word-value analysis (src/translate/words.ts), which drops `sext.w` of a
# word value and copies the property through moves (test/word-values.test.ts). Each case_* returns
# a0; _start runs them all and writes each a0 (8 bytes, little-endian) to stdout under
# qemu-riscv64 (make words-expected). Uncompressed except case_cmv.
  .option nopic
  .option norvc
  .text
  .globl case_merge
  .type case_merge, @function
case_merge:             # a0 = 1: t0 is 2^33 on one path, 5 on the other
  li t0, 5
  beqz a0, 1f
  li t1, 1
  slli t0, t1, 33
1:
  mv t2, t0
  addiw a0, t2, 0
  ret

  .size case_merge, .-case_merge
  .globl case_loop
  .type case_loop, @function
case_loop:              # a0 = 2: t0 a word value on entry, not on the back edge
  li t0, 7
  li t2, 0
1:
  addiw t1, t0, 0
  add t2, t2, t1
  slli t0, t0, 31
  addi a0, a0, -1
  bnez a0, 1b
  mv a0, t2
  ret

  .size case_loop, .-case_loop
  .globl big
  .type big, @function
big:                    # returns 2^32 + 5 and leaves 2^40 + 1 in t0
  li a0, 1
  slli a0, a0, 32
  addi a0, a0, 5
  li t0, 1
  slli t0, t0, 40
  addi t0, t0, 1
  ret

  .size big, .-big
  .globl case_call
  .type case_call, @function
case_call:              # a0 (a word value) moved, then the call's result moved
  addi sp, sp, -16
  sd ra, 8(sp)
  li a0, 3
  mv t1, a0
  jal ra, big
  mv t1, a0
  addiw a0, t1, 0
  ld ra, 8(sp)
  addi sp, sp, 16
  ret

  .size case_call, .-case_call
  .globl case_load
  .type case_load, @function
case_load:              # lw then ld into the same register
  lla t1, data
  lw t0, 0(t1)
  ld t0, 0(t1)
  mv t2, t0
  addiw a0, t2, 0
  ret

  .size case_load, .-case_load
  .globl case_add0
  .type case_add0, @function
case_add0:              # add rd, rs, x0 / add rd, x0, rs of a non-word value; x0 writes
  li t0, 1
  slli t0, t0, 35
  addi t0, t0, 11
  li t3, 2
  add t1, t0, x0
  add t2, x0, t1
  addi x0, t0, 0
  add x0, t2, x0
  addiw a0, t2, 0
  addiw a1, t1, 0
  add a0, a0, a1
  add t4, x0, t3
  addiw t4, t4, 0
  add a0, a0, t4
  ret

  .size case_add0, .-case_add0
  .option rvc
  .globl case_cmv
  .type case_cmv, @function
case_cmv:               # c.mv of a word value, then of a non-word value into the same register
  li t0, 9
  c.mv t1, t0
  c.addiw t1, 0
  lui t2, 0x10
  c.slli t2, 20
  c.mv t1, t2
  c.addiw t1, 0
  c.add t1, t0
  c.mv a0, t1
  c.addiw a0, 0
  ret
  .size case_cmv, .-case_cmv
  .option norvc

  .globl case_inner
  .type case_inner, @function
case_inner:             # a word value merged with a non-word one through a loop that also calls
  addi sp, sp, -16
  sd ra, 8(sp)
  sw zero, 0(sp)
  li s1, 4
  li s0, 2
1:
  addiw a2, s1, 0
  add s0, s0, a2
  jal ra, big
  mv s1, a0
  addi a1, a1, 0
  lw t5, 0(sp)
  bnez t5, 2f
  li t5, 1
  sw t5, 0(sp)
  j 1b
2:
  addiw a0, s1, 0
  add a0, a0, s0
  ld ra, 8(sp)
  addi sp, sp, 16
  ret

  .size case_inner, .-case_inner
  .globl _start
  .type _start, @function
_start:
  lla sp, stack_top
  li a0, 1
  jal ra, case_merge
  jal ra, out
  li a0, 2
  jal ra, case_loop
  jal ra, out
  jal ra, case_call
  jal ra, out
  jal ra, case_load
  jal ra, out
  jal ra, case_add0
  jal ra, out
  jal ra, case_cmv
  jal ra, out
  jal ra, case_inner
  jal ra, out
  li a0, 0
  li a7, 93
  ecall

  .size _start, .-_start
  .globl out
  .type out, @function
out:                    # write a0's 8 bytes to stdout
  lla t0, buf
  sd a0, 0(t0)
  li a0, 1
  mv a1, t0
  li a2, 8
  li a7, 64
  ecall
  ret

  .size out, .-out
  .data
  .align 3
data: .dword 0x100000009
buf: .dword 0
  .bss
  .align 4
  .space 4096
stack_top:

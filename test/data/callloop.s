# Loops whose header block calls a guest function (test/fuel-call-loops.test.ts): their back edge
# charges without polling, the call site's charge polls. Uncompressed, so sizes are fixed.
  .option nopic
  .option norvc
  .text
  .globl leaf
  .type leaf, @function
leaf:                       # a1 += 1
  addi a1, a1, 1
  ret
  .size leaf, .-leaf

  .globl call_loop
  .type call_loop, @function
call_loop:                  # a0 = iterations (>= 1): calls leaf a0 times; returns a0 = the count
  addi sp, sp, -16
  sd ra, 8(sp)
  li a1, 0
1:
  jal ra, leaf
  addi a0, a0, -1
  bnez a0, 1b
  mv a0, a1
  ld ra, 8(sp)
  addi sp, sp, 16
  ret
  .size call_loop, .-call_loop

  .globl call_spin
  .type call_spin, @function
call_spin:                  # calls leaf forever
  addi sp, sp, -16
  sd ra, 8(sp)
1:
  jal ra, leaf
  j 1b
  .size call_spin, .-call_spin

  .data
  .globl table
table:
  .dword leaf               # a relocation, as --emit-relocs links always keep

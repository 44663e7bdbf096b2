# Engine test guest (test/edge.test.ts): a misaligned AMO, and a loop whose back edge ends a
# two-instruction block after a long forward body (fuel must still count the body).
  .option nopic
  .text
  .globl amo_at
  .type amo_at, @function
amo_at:                     # a0 = address: amoadd.d there, return the old value
  li a1, 1
  amoadd.d a0, a1, (a0)
  ret
  .size amo_at, .-amo_at

  .globl long_body
  .type long_body, @function
long_body:                  # a0 = iterations; 512 forward instructions per iteration
1:
  .rept 512
  addi a1, a1, 1
  .endr
  addi a0, a0, -1
  bnez a0, 1b
  mv a0, a1
  ret
  .size long_body, .-long_body

  .globl spin
  .type spin, @function
spin:
  j spin
  .size spin, .-spin

  .data
  .globl table
table:
  .dword amo_at             # a relocation, as --emit-relocs links always keep

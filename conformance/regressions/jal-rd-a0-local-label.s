# Regression: was BadIndirectTarget instead of jumping and setting a0 = pc + 4 (spec: JAL writes pc+4 to rd).
# berm: ours trapped: indirect jump to 0x1000c, which is not a function entry named by a relocation; a0: ours=0x0000000000000000 qemu=0x0000000000000008; a0: ours=0x0000000000000000, the spec says 0x0000000000000008
  .option nopic
  .attribute arch, "rv64i2p0_m2p0_a2p0_c2p0"
  .text
# 0: jal a0 to a local label links pc + 4
  .p2align 1
  .globl t_0
  .type t_0, @function
t_0:
  .option push
  .option norvc
1:
  auipc a1, 0
  jal a0, 2f
  nop
2:
  .option pop
  sub a0, a0, a1
  la t6, r_0
  sd a0, 0(t6)
  ret
  .size t_0, .-t_0
  .data
  .p2align 3
  .bss
  .p2align 3
  .p2align 3
  .globl r_0
r_0:
  .zero 8
m_0:
  .zero 0
  .size r_0, 8

# Every kind of guest memory access at an address the caller chooses, one function each: loads,
# stores, compressed forms, LR/SC and AMOs, and accesses with a large positive or negative imm.
# Used by test/guest-bounds.test.ts (accesses at and past the end of guest memory, where the ecall
# argument area lies). The first instruction of each function is the access.
	.text
	.globl	ld8
	.type	ld8, @function
	.p2align	1
ld8:
	ld a0, 0(a0)
	ret
	.size	ld8, .-ld8
	.globl	lw4
	.type	lw4, @function
	.p2align	1
lw4:
	lw a0, 0(a0)
	ret
	.size	lw4, .-lw4
	.globl	lhu2
	.type	lhu2, @function
	.p2align	1
lhu2:
	lhu a0, 0(a0)
	ret
	.size	lhu2, .-lhu2
	.globl	lbu1
	.type	lbu1, @function
	.p2align	1
lbu1:
	lbu a0, 0(a0)
	ret
	.size	lbu1, .-lbu1
	.globl	sd8
	.type	sd8, @function
	.p2align	1
sd8:
	sd a1, 0(a0)
	li a0, 0
	ret
	.size	sd8, .-sd8
	.globl	sw4
	.type	sw4, @function
	.p2align	1
sw4:
	sw a1, 0(a0)
	li a0, 0
	ret
	.size	sw4, .-sw4
	.globl	sh2
	.type	sh2, @function
	.p2align	1
sh2:
	sh a1, 0(a0)
	li a0, 0
	ret
	.size	sh2, .-sh2
	.globl	sb1
	.type	sb1, @function
	.p2align	1
sb1:
	sb a1, 0(a0)
	li a0, 0
	ret
	.size	sb1, .-sb1
	.globl	cld8
	.type	cld8, @function
	.p2align	1
cld8:
	c.ld a0, 0(a0)
	ret
	.size	cld8, .-cld8
	.globl	clw4
	.type	clw4, @function
	.p2align	1
clw4:
	c.lw a0, 0(a0)
	ret
	.size	clw4, .-clw4
	.globl	csd8
	.type	csd8, @function
	.p2align	1
csd8:
	c.sd a1, 0(a0)
	li a0, 0
	ret
	.size	csd8, .-csd8
	.globl	csw4
	.type	csw4, @function
	.p2align	1
csw4:
	c.sw a1, 0(a0)
	li a0, 0
	ret
	.size	csw4, .-csw4
	.globl	lrd8
	.type	lrd8, @function
	.p2align	1
lrd8:
	lr.d a0, (a0)
	ret
	.size	lrd8, .-lrd8
	.globl	lrw4
	.type	lrw4, @function
	.p2align	1
lrw4:
	lr.w a0, (a0)
	ret
	.size	lrw4, .-lrw4
	.globl	scd8
	.type	scd8, @function
	.p2align	1
scd8:
	sc.d a0, a1, (a0)
	ret
	.size	scd8, .-scd8
	.globl	scw4
	.type	scw4, @function
	.p2align	1
scw4:
	sc.w a0, a1, (a0)
	ret
	.size	scw4, .-scw4
	.globl	amoaddd8
	.type	amoaddd8, @function
	.p2align	1
amoaddd8:
	amoadd.d a0, a1, (a0)
	ret
	.size	amoaddd8, .-amoaddd8
	.globl	amoswapw4
	.type	amoswapw4, @function
	.p2align	1
amoswapw4:
	amoswap.w a0, a1, (a0)
	ret
	.size	amoswapw4, .-amoswapw4
	.globl	amomaxud8
	.type	amomaxud8, @function
	.p2align	1
amomaxud8:
	amomaxu.d a0, a1, (a0)
	ret
	.size	amomaxud8, .-amomaxud8
	.globl	ldhi8
	.type	ldhi8, @function
	.p2align	1
ldhi8:
	ld a0, 2040(a0)
	ret
	.size	ldhi8, .-ldhi8
	.globl	sdlo8
	.type	sdlo8, @function
	.p2align	1
sdlo8:
	sd a1, -2048(a0)
	li a0, 0
	ret
	.size	sdlo8, .-sdlo8

# a function pointer, so the linked ELF keeps a relocation section (berm requires --emit-relocs)
	.data
	.globl	bounds_ptr
bounds_ptr:
	.quad	ld8

# One bare ecall: the caller's a0..a7 go to the host unchanged (a7 is the call number) and
# whatever the host leaves in a0 and a1 is returned. Used by test/hostcall-boundary.test.ts.
	.text
	.globl	ecall_pass
	.type	ecall_pass, @function
ecall_pass:
	ecall
	ret
	.size	ecall_pass, .-ecall_pass

# a function pointer, so the linked ELF keeps a relocation section (berm requires --emit-relocs)
	.data
	.globl	ecall_ptr
ecall_ptr:
	.quad	ecall_pass

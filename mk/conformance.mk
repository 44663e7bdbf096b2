# Conformance suite. The CI part runs with the unit tests (test/conformance.test.ts);
# `make fuzz` runs random-program differential fuzzing against qemu-riscv64 for FUZZ_SECONDS
# (default 3600) and saves minimised divergences under conformance/regressions/.
FUZZ_SECONDS ?= 3600
.PHONY: fuzz conformance

fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) node --stack-size=4000 --import ./scripts/ts/register.mjs conformance/fuzz.ts $(FUZZ_SEED)

conformance:
	npx tap test/conformance.test.ts --disable-coverage

# Top-level targets. `make test` is the README's test command; `make fixtures` rebuilds the guest
# fixtures from source; `make bench` runs the benchmarks.
.PHONY: test lint typecheck unit fixtures fixtures-check host-test expected fuzz bench

test: typecheck lint unit

typecheck:
	npx tsc --noEmit -p tsconfig.json

lint:
	npx eslint .
	npx prettier --check .

unit:
	npx tap

# TypeScript side: `make test` is the README's test command (type check, lint, every tap test).
.PHONY: test typecheck lint unit bench fuzz

test: typecheck lint unit

typecheck:
	npx tsc --noEmit -p tsconfig.json

lint:
	npx eslint .
	npx prettier --check .

# tap rebuilds its runner for the plugin set in package.json (no tsx: see scripts/ts/hooks.mjs)
unit:
	npx tap build >/dev/null
	npx tap

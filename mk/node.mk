# TypeScript side: `make test` is the README's test command (type check, lint, every tap test).
.PHONY: test typecheck lint unit bench fuzz build

test: typecheck lint unit

typecheck:
	npx tsc --noEmit -p tsconfig.json

lint:
	npx eslint .
	npx prettier --check .

# dist/: the compiled JavaScript bin/berm.js and bin/bermd.js run when it is current (npm ci builds
# it through the `prepare` script; after editing src/ the bins run the sources until rebuilt)
build:
	node scripts/build.mjs

# Tests import the TypeScript sources; the bins they spawn run dist/, built first so they start fast.
# tap rebuilds its runner for the plugin set in package.json (no tsx: see scripts/ts/hooks.mjs)
unit: build
	npx tap build >/dev/null
	npx tap || { bash scripts/failed-tests.sh; exit 1; }

# Benchmarks: `make bench` installs the baselines it needs, runs bench/run.ts, prints the
# table and writes bench/results/latest.json (+ a timestamped copy).
# `make bench-compare A=old.json B=new.json` prints figure-by-figure ratios B/A
# (add FAIL=1 to exit non-zero when a figure regressed by more than THRESHOLD, default 1.10).
.PHONY: bench bench-compare bench-scale-out
THRESHOLD ?= 1.10

# dist/ is built first: the process-start and warm-compile figures measure what the bins run
bench:
	bench/setup.sh
	node scripts/build.mjs
	npm run --silent bench

bench-compare:
	node --import ./scripts/ts/register.mjs bench/compare.ts $(A) $(B) --threshold $(THRESHOLD) $(if $(FAIL),--fail)

# The scale-out section alone: 1, 2, 3 bermd on one PostgreSQL (BERM_TEST_PG_URL, else a
# throwaway cluster from scripts/pg-cluster.sh) and 1 on SQLite; wakes/s and tool calls/s.
bench-scale-out:
	node --stack-size=4000 --import ./scripts/ts/register.mjs bench/scale-out.ts

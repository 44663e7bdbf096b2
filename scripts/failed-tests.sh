#!/usr/bin/env bash
# Prints, after a failed `tap` run, which test files failed and their failing assertions, one line
# each, so that the last lines of a long CI log (after the coverage table) name the failures.
set -uo pipefail
dir=${1:-.tap/test-results}
[ -d "$dir" ] || exit 0
echo "== failing tests =="
grep -rn --include='*.tap' -E '^\s*not ok ' "$dir" | grep -v -E '# (TODO|SKIP)' | sed -E "s|^$dir/||" | head -40

#!/usr/bin/env bash
# tests/gpu/check.sh: the whole GPU check in one command, for a short loan of a GPU machine: the
# tests (tests/gpu/run.sh, about 3 minutes) and then the benchmark (bench/gpu.sh, under 6), each
# writing its logs under $OUT; their tables are printed again at the end, so that the last lines
# of the output hold both. Pack first on the build machine (tests/gpu/pack.sh) and send .gpu/
# along; then, on the GPU machine, from the repository root:
#
#     bash tests/gpu/check.sh          # exits 1 if a test part failed or the benchmark has no zt row
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/gpu}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
export OUT
start=$SECONDS
bash tests/gpu/run.sh > /dev/null 2>&1
tests=$?
bash bench/gpu.sh > /dev/null 2>&1
bench=$?
echo "tests/gpu/run.sh (exit $tests; log $OUT/run.log):"
cat "$OUT/summary.md" 2>/dev/null || echo "no summary: see the log"
echo
echo "bench/gpu.sh (exit $bench; log $OUT/gpu.log):"
cat "$OUT/gpu.md" 2>/dev/null || echo "no table: see the log"
cat "$OUT/profile.txt" 2>/dev/null
echo "check: $((SECONDS - start)) s"
[ $tests = 0 ] && [ $bench = 0 ]

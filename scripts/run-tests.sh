#!/usr/bin/env bash
# Runs every unit test binary in BUILD/tests and every CLI test in tests/cli,
# then prints one closing line "N passed, N failed" (N counts test files).
# usage: scripts/run-tests.sh BUILD_DIR ZT_BINARY [CLI_GLOB]
set -u
build=${1:-build}
zt=${2:-zt}
cli_glob=${3:-t[0-9]*.sh}
export ZT_BIN=$(cd "$(dirname "$zt")" && pwd)/$(basename "$zt")
passed=0 failed=0 failures=()
for t in "$build"/tests/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  start=$(date +%s)
  if out=$("$t" 2>&1); then
    passed=$((passed + 1)); echo "PASS $name ($(( $(date +%s) - start ))s): $(echo "$out" | tail -n 1)"
  else
    failed=$((failed + 1)); failures+=("$name"); echo "FAIL $name"; echo "$out" | tail -n 30
  fi
done
for t in tests/cli/$cli_glob; do
  [ -f "$t" ] || continue
  name=$(basename "$t")
  start=$(date +%s)
  if out=$(bash "$t" 2>&1); then
    passed=$((passed + 1)); echo "PASS $name ($(( $(date +%s) - start ))s)"
  else
    failed=$((failed + 1)); failures+=("$name"); echo "FAIL $name"; echo "$out" | tail -n 30
  fi
done
[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

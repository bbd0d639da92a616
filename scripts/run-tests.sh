#!/usr/bin/env bash
# Runs every unit test binary in BUILD/tests and every CLI test in tests/cli, then prints
# one closing line "N passed, N failed, N skipped" (N counts test files). A test that
# cannot run here (a missing tool, no permission) exits 77 with its reason on a line
# "skip: REASON" and counts as skipped. With CI=true, where scripts/install-deps.sh has
# installed everything, a skipped test fails the run too.
# usage: scripts/run-tests.sh BUILD_DIR ZT_BINARY [CLI_GLOB...]   (CLI_GLOB "none": unit tests only)
# ZT_CPU=scalar|avx2|avx512 runs the whole suite on that kernel level (lib/core/cpu.c).
set -u
build=${1:-build}
zt=${2:-zt}
shift 2
cli_globs=("${@:-t[0-9]*.sh}")
root=$(cd "$(dirname "$0")/.." && pwd)
export ZT_BIN=$(cd "$(dirname "$zt")" && pwd)/$(basename "$zt")
export ZT_TEST_TOOL=$(cd "$build" && pwd)/zt-test-tool  # tests/tool: zt's internals for the CLI tests
# Under the sanitizers, LeakSanitizer ignores what Open MPI's own libraries keep in zt-san (the
# file names them, and says why it needs full allocation stacks); zt's leaks are still reported.
# Only the CLI tests take the suppressions and full stacks: those on every allocation make a unit
# test up to 13 times slower, and the unit tests that start MPI set both (tests/unit/test_mpi.h).
# intercept_tls_get_addr=0: up to GCC 13 the runtime's __tls_get_addr hook takes a dynamic TLS
# block whose address is 16 past a page boundary for one with a pre-2.25 glibc header and reads
# a bogus range from it; the leak check's tracer then dies on SIGSEGV ("Tracer caught signal
# 11"), in whichever run the memory layout lands that way (t1500's 2-rank runs, on some
# machines every time). Without the hook LSan skips only the dynamic TLS of dlopen'ed
# libraries (Open MPI's components); zt's own TLS is static and still scanned.
unit_lsan=${LSAN_OPTIONS:-} cli_lsan=${LSAN_OPTIONS:-}
case "$ZT_BIN" in
  *-san)
    unit_lsan="intercept_tls_get_addr=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
    cli_lsan="suppressions=$root/tests/lsan-openmpi.supp:fast_unwind_on_malloc=0:$unit_lsan" ;;
esac

# The CPU this run used: the model, the features the kernels dispatch on, and the level zt picked.
cpu_model=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p')
cpu_flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'avx2|fma|f16c|avx512(f|bw|vl|dq|_bf16)' | tr '\n' ' ')
echo "cpu: ${cpu_model:-unknown}; flags: ${cpu_flags:-none of avx2 fma f16c avx512*}; ZT_CPU=${ZT_CPU:-(unset)}"
"$ZT_BIN" env 2>&1 | grep '^cpu:' | sed 's/^/zt env: /'

# what a CLI test makes that a later one of this run may reuse (tests/cli/lib.sh: rlhf_demo_sft)
export ZT_TEST_SHARED=$(mktemp -d)
trap 'rm -rf "$ZT_TEST_SHARED"' EXIT

passed=0 failed=0 skipped=0 failures=() skips=()
# run_one NAME CMD...: runs one test file and counts it
run_one() {
  local name=$1 start=$(date +%s) out code reason; shift
  out=$("$@" 2>&1)
  code=$?
  local took="$(( $(date +%s) - start ))s"
  if [ $code = 0 ]; then
    passed=$((passed + 1)); echo "PASS $name ($took): $(echo "$out" | tail -n 1)"
  elif [ $code = 77 ]; then
    reason=$(echo "$out" | sed -n 's/^ *skip: //p' | tail -n 1)
    skipped=$((skipped + 1)); skips+=("$name (${reason:-no reason given})"); echo "SKIP $name ($took): ${reason:-no reason given}"
  else
    failed=$((failed + 1)); failures+=("$name"); echo "FAIL $name ($took, exit $code)"
    # the first failed check with what it printed before (a checker's assertion) and after (a
    # crash's report can run long), then the end
    echo "$out" | grep -m1 -B 12 -A 20 -E '^ *(FAIL|not ok)\b'
    echo "..."; echo "$out" | tail -n 15
  fi
}

for t in "$build"/tests/test_*; do
  [ -x "$t" ] && run_one "$(basename "$t")" env LSAN_OPTIONS="$unit_lsan" "$t"
done
for glob in "${cli_globs[@]}"; do
  for t in tests/cli/$glob; do
    [ -f "$t" ] && run_one "$(basename "$t")" env LSAN_OPTIONS="$cli_lsan" bash "$t"
  done
done
[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]}"
[ ${#skips[@]} -gt 0 ] && printf 'skipped: %s\n' "${skips[@]}"
echo "$passed passed, $failed failed, $skipped skipped"
if [ "${CI:-}" = true ] && [ "$skipped" -gt 0 ]; then
  echo "CI: $skipped test(s) skipped where everything should be installed: ${skips[*]}" >&2
  exit 1
fi
[ "$failed" -eq 0 ]

#!/usr/bin/env bash
# README's test command: installs what is missing, builds, runs the whole suite, then the
# sanitizer build (ASan + UBSan) on the unit tests, the bad-input CLI tests and a few
# multi-rank ones, the suite again at every CPU kernel level below this CPU's own (ZT_CPU:
# every unit test, and the CLI tests but those marked "# kernel levels: own only", whose
# subject does not touch the kernels), and each fuzz harness for a short while. Each phase
# prints how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
phase() { echo "test: $1 done after $(( $(date +%s) - start )) s"; }
scripts/install-deps.sh
phase "installing"
make -j2 test
phase "the whole suite"
make -j2 SAN=1 test-san
phase "the sanitizer suite"
# the suite again at each kernel level below the one this CPU takes by itself
# (lib/core/cpu.c caps the level at ZT_CPU), so the lower paths run on any machine
own=$(./zt env | sed -n 's/^cpu: kernels \([a-z0-9-]*\),.*/\1/p')
case "$own" in
  avx512-bf16) levels="avx512 avx2 scalar" ;;
  avx512) levels="avx2 scalar" ;;
  avx2) levels="scalar" ;;
  *) levels="" ;;
esac
kernel_cli=$(cd tests/cli && grep -L '^# kernel levels: own only' t[0-9]*.sh | tr '\n' ' ')
for level in $levels; do
  echo "test: the suite at ZT_CPU=$level (this CPU's own level: $own)"
  ZT_CPU=$level make -j2 test CLI="$kernel_cli"
  phase "the suite at ZT_CPU=$level"
done
make -j2 fuzz FUZZ_SECONDS=20  # two harnesses at a time: each is one process on one core
phase "fuzzing"

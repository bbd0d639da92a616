#!/usr/bin/env bash
# README's test command: installs what is missing, builds, runs the whole suite, then the
# sanitizer build (ASan + UBSan) on the unit tests, the bad-input CLI tests and a few
# multi-rank ones, the whole suite again at every CPU kernel level below this CPU's own
# (ZT_CPU), and each fuzz harness for a short while.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
make -j2 test
make -j2 SAN=1 test-san
# the whole suite again at each kernel level below the one this CPU takes by itself
# (lib/core/cpu.c caps the level at ZT_CPU), so the lower paths run on any machine
own=$(./zt env | sed -n 's/^cpu: kernels \([a-z0-9-]*\),.*/\1/p')
case "$own" in
  avx512-bf16) levels="avx512 avx2 scalar" ;;
  avx512) levels="avx2 scalar" ;;
  avx2) levels="scalar" ;;
  *) levels="" ;;
esac
for level in $levels; do
  echo "test: the whole suite at ZT_CPU=$level (this CPU's own level: $own)"
  ZT_CPU=$level make -j2 test
done
make fuzz FUZZ_SECONDS=20

#!/usr/bin/env bash
# README's test command: installs what is missing, builds, runs the whole suite, then the
# sanitizer build (ASan + UBSan) on the unit tests, the bad-input CLI tests and a few
# multi-rank ones, the unit tests again at the avx2 and scalar CPU kernel levels (ZT_CPU),
# and each fuzz harness for a short while.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
make -j2 test
make -j2 SAN=1 test-san
# the kernel paths this CPU would not take by itself (lib/core/cpu.c caps the level at
# ZT_CPU); the AVX-512 ones already run at the full level
for level in avx2 scalar; do
  echo "test: the unit tests at ZT_CPU=$level"
  ZT_CPU=$level make -j2 test CLI=none
done
make fuzz FUZZ_SECONDS=20

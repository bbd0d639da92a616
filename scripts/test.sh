#!/usr/bin/env bash
# README's test command: installs what is missing, builds, runs the whole suite,
# then the sanitizer build (ASan + UBSan) on the unit tests and the bad-input CLI tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
make -j2 test
make -j2 SAN=1 test-san

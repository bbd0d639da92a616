#!/usr/bin/env bash
# Installs the Debian packages zt needs to build, test and benchmark; only what
# is missing, so a second run does nothing. Needs root (or sudo) for apt-get.
set -euo pipefail

packages=(
  build-essential pkg-config
  libopenblas-openmp-dev   # CPU GEMM (OpenMP flavour: shares zt's thread pool)
  libcjson-dev             # JSON: config.json, safetensors headers, metrics
  libopenmpi-dev openmpi-bin
  liburing-dev
  libcurl4-openssl-dev
  libsentencepiece-dev sentencepiece
  python3 python3-numpy    # test cross-checks
  clang                    # fuzz harnesses (libFuzzer)
)
if [ "${ZT_BENCH_DEPS:-0}" = 1 ]; then packages+=(python3-torch fio); fi # bench/run.sh, bench/offload.sh

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

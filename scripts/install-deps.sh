#!/usr/bin/env bash
# Installs the Debian packages zt needs to build, test and benchmark; only what
# is missing, so a second run does nothing. Needs root (or sudo) for apt-get.
# --packages: the Debian packages only, not the test suite's huggingface_hub venv
# (scripts/demo.sh, which needs no network beyond the Debian mirror).
set -euo pipefail

packages=(
  build-essential pkg-config
  libopenblas-openmp-dev   # CPU GEMM (OpenMP flavour: shares zt's thread pool)
  libcjson-dev             # JSON: config.json, safetensors headers, metrics
  libpcre2-dev             # tokenizer.json pre-tokenizer regexes
  libicu-dev               # tokenizer.json normalizers (NFD, NFKC, NFKD, Lowercase)
  libdnnl-dev              # oneDNN: bf16 GEMMs on AMX / AVX-512 BF16 (optional: NO_DNNL=1)
  libopenmpi-dev openmpi-bin
  liburing-dev
  libcurl4-openssl-dev libssl-dev   # zt download (libcurl, sha256 from libcrypto)
  libsentencepiece-dev sentencepiece
  python3 python3-numpy    # test cross-checks
  python3-venv             # the venv with huggingface_hub (below)
  clang                    # fuzz harnesses (libFuzzer)
  iproute2                 # tests/cli/t1300-multinode.sh: network namespaces
  clang-format             # make format (.clang-format)
)
if [ "${ZT_BENCH_DEPS:-0}" = 1 ]; then packages+=(python3-torch fio curl); fi # bench/run.sh, bench/offload.sh, bench/download.sh

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
else
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: installing needs root or sudo; missing: ${missing[*]}" >&2; exit 1; }
    SUDO=sudo
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

[ "${1:-}" = --packages ] && exit 0

# huggingface_hub from PyPI, in a venv inside the build directory: tests/cli/t2200-download.sh
# checks with it that the Python client reads zt's cache. A failure here leaves that test failing.
venv="$(cd "$(dirname "$0")/.." && pwd)/build/hub-venv"
if ! "$venv/bin/python" -c 'import huggingface_hub' 2>/dev/null; then
  echo "install-deps: installing huggingface_hub into $venv"
  /usr/bin/python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check 'huggingface_hub==2.4.0' ||
    echo "install-deps: warning: huggingface_hub did not install; tests/cli/t2200-download.sh will fail" >&2
fi

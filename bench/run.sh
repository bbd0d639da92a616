#!/usr/bin/env bash
# bench/run.sh: zt against PyTorch and against the machine's fp32 GEMM ceiling, on one model
# shape (bench/llama60m.toml), in one environment. `make bench` runs it after building ./zt.
#
#   bench/run.sh            prints a table and appends it to bench/RESULTS.md
#   BENCH_THREADS=1 bench/run.sh
#   BENCH_TORCH_PYTHON=/path/to/venv/bin/python bench/run.sh    # a Python whose torch to run
#
# Order: OpenBLAS sgemm peak (bench/sgemm_peak.c), PyTorch eager in fp32 and under bf16 autocast
# (bench/torch_llama.py), then
# `zt pretrain` in fp32, in bf16 (oneDNN's GEMMs where zt has them) and in bf16 on zt's own
# GEMM kernels (ZT_DNNL=0), each without activation recomputation as PyTorch's eager loop
# trains (model.activation_checkpointing = false), then fp32 and bf16 again with zt's default
# (checkpointing on: a third more products in the layers, for less memory). A part that is
# missing or fails shows as "missing" and the rest still runs. zt's tokens/s is the mean of
# metrics.jsonl's input_tokens_per_s over steps 3..10.
set -u
cd "$(dirname "$0")/.."

THREADS=${BENCH_THREADS:-2}
OUT=build/bench
PY=/usr/bin/python3
TORCH_PY=${BENCH_TORCH_PYTHON:-$PY}
RECIPE=bench/llama60m.toml
mkdir -p "$OUT"
LOAD=$(cut -d' ' -f1-3 /proc/loadavg) # other work on the machine skews every number below

# One environment for every run. OPENBLAS_CORETYPE is left as the caller set it (or unset).
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
ENVLINE="OMP_NUM_THREADS=$OMP_NUM_THREADS OPENBLAS_NUM_THREADS=$OPENBLAS_NUM_THREADS"
ENVLINE+=" OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}"
for v in OMP_PROC_BIND OMP_PLACES GOMP_CPU_AFFINITY OPENBLAS_VERBOSE ZT_CPU ZT_DNNL ONEDNN_MAX_CPU_ISA; do
    [ -n "${!v:-}" ] && ENVLINE+=" $v=${!v}"
done

# json FILE KEY: the value of KEY in the last JSON line of FILE, empty if none.
json() {
    $PY - "$1" "$2" <<'EOF'
import json, sys
try:
    lines = [l for l in open(sys.argv[1]) if l.lstrip().startswith("{")]
    v = json.loads(lines[-1]).get(sys.argv[2]) if lines else None
    print("" if v is None else v)
except (OSError, ValueError):
    print("")
EOF
}

log() { echo "bench: $*" >&2; }

# --- 1. OpenBLAS sgemm ceiling ----------------------------------------------------------------
PEAK="" CORE=""
if gcc -std=gnu11 -O2 -Wall -Wextra -fopenmp bench/sgemm_peak.c $(pkg-config --cflags --libs openblas) \
        -o "$OUT/sgemm_peak"; then
    log "sgemm peak ($THREADS threads)"
    "$OUT/sgemm_peak" --json | tee "$OUT/sgemm_peak.out" >&2
    PEAK=$(json "$OUT/sgemm_peak.out" peak_gflops)
    CORE=$(json "$OUT/sgemm_peak.out" corename)
else
    log "sgemm_peak did not build"
fi

# --- 2. PyTorch --------------------------------------------------------------------------------
FPT=$($PY bench/torch_llama.py --print-flops)
# Without AVX-512 BF16 PyTorch's bf16 autocast runs a plain-loop matmul (on a Zen 3, 140 s a step
# of this shape): a warm-up step and 2 timed ones there.
BF16_STEPS=""
grep -q avx512_bf16 /proc/cpuinfo || BF16_STEPS="--warmup 1 --steps 2"
for dtype in fp32 bf16; do
    log "pytorch $dtype ($THREADS threads)"
    steps=""
    [ $dtype = bf16 ] && steps=$BF16_STEPS
    $TORCH_PY bench/torch_llama.py --threads "$THREADS" --dtype $dtype $steps > "$OUT/torch-$dtype.out" 2> "$OUT/torch-$dtype.log" ||
        log "pytorch $dtype failed: see $OUT/torch-$dtype.log"
done
TORCH_TPS=$(json "$OUT/torch-fp32.out" tokens_per_s)
TORCH_BF16_TPS=$(json "$OUT/torch-bf16.out" tokens_per_s)
TORCH_VER=$(json "$OUT/torch-fp32.out" torch)

# --- 3. zt -------------------------------------------------------------------------------------
# zt_run NAME [overrides...]: trains the recipe, prints the mean tokens/s of steps 3..10.
zt_run() {
    local name=$1
    shift
    log "zt $name"
    if ! ./zt pretrain "$RECIPE" "$@" > "$OUT/zt-$name.log" 2>&1; then
        log "zt $name failed: see $OUT/zt-$name.log"
        return
    fi
    local metrics=$OUT/run-$name/metrics.jsonl
    $PY - "$metrics" <<'EOF'
import json, sys
rows = []
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{"):
        r = json.loads(line)
        if "input_tokens_per_s" in r and 3 <= r.get("step", 0) <= 10 and r.get("split") is None:
            rows.append(r["input_tokens_per_s"])
print(f"{sum(rows) / len(rows):.2f}" if rows else "")
EOF
}

ZT_FP32="" ZT_BF16="" ZT_BF16_OWN="" ZT_FP32_CK="" ZT_BF16_CK=""
NOCK=model.activation_checkpointing=false
if [ -x ./zt ]; then
    if bench/make-model.sh > "$OUT/zt-init.log" 2>&1; then
        ZT_FP32=$(zt_run fp32 $NOCK)
        ZT_BF16=$(zt_run bf16 $NOCK model.dtype=bf16 output.dir="$OUT/run-bf16")
        ZT_BF16_OWN=$(ZT_DNNL=0 zt_run bf16-own $NOCK model.dtype=bf16 output.dir="$OUT/run-bf16-own")
        ZT_FP32_CK=$(zt_run fp32-ck output.dir="$OUT/run-fp32-ck")
        ZT_BF16_CK=$(zt_run bf16-ck model.dtype=bf16 output.dir="$OUT/run-bf16-ck")
    else
        log "zt init failed: see $OUT/zt-init.log"
    fi
else
    log "./zt not built: zt rows missing"
fi

# --- table -------------------------------------------------------------------------------------
GEMM=$([ -x ./zt ] && ./zt env 2>/dev/null | sed -n 's/^bf16 gemm: //p')
TABLE=$($PY - "$FPT" "$PEAK" "$TORCH_TPS" "$TORCH_BF16_TPS" "$ZT_FP32" "$ZT_BF16" "$ZT_BF16_OWN" "${GEMM:-?}" \
    "$ZT_FP32_CK" "$ZT_BF16_CK" <<'EOF'
import sys
fpt, peak, torch, torch16, zt32, zt16, zt16own, gemm, zt32ck, zt16ck = sys.argv[1:11]
fpt = float(fpt)
peak = float(peak) if peak else None
num = lambda v: float(v) if v else None
torch, torch16, zt32, zt32ck = num(torch), num(torch16), num(zt32), num(zt32ck)
# each row against PyTorch in its own precision (fp32 eager, or bf16 autocast), and a bf16 row
# against zt fp32 run alike
out = ["| run | tokens/s | GFLOP/s | % of sgemm peak | vs PyTorch (same precision) | vs zt fp32 |",
       "|---|---:|---:|---:|---:|---:|"]
out.append(f"| OpenBLAS sgemm peak | | {peak:.1f} | 100% | | |" if peak else "| OpenBLAS sgemm peak | missing | | | | |")
ck = ", activation checkpointing (zt's default)"
for name, tps, base, fp32 in (("PyTorch eager fp32", torch, None, None),
                              ("PyTorch eager, bf16 autocast", torch16, None, None),
                              ("zt fp32", zt32, torch, None), (f"zt bf16 ({gemm})", num(zt16), torch16, zt32),
                              ("zt bf16 (zt's own GEMM kernels)", num(zt16own), torch16, zt32),
                              ("zt fp32" + ck, zt32ck, torch, None), (f"zt bf16 ({gemm})" + ck, num(zt16ck), torch16, zt32ck)):
    if tps is None:
        out.append(f"| {name} | missing | | | | |")
        continue
    g = tps * fpt / 1e9
    pct = f"{100 * g / peak:.0f}%" if peak else ""
    ratio = f"{tps / base:.2f}x" if base else ""
    vs32 = f"{tps / fp32:.2f}x" if fp32 else ""
    out.append(f"| {name} | {tps:.1f} | {g:.1f} | {pct} | {ratio} | {vs32} |")
print("\n".join(out))
EOF
)

COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo "no commit")
[ -n "$(git status --porcelain 2>/dev/null | head -1)" ] && COMMIT+=" (uncommitted changes)"
CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
SHAPE="llama hidden 512, 8 layers, 8 heads / 4 KV, intermediate 1408, vocab 32000, seq 256, batch 4"
HEAD="### $(date -u '+%Y-%m-%d %H:%M UTC') · $COMMIT"
INFO="- CPU: $CPU ($(nproc) cores online), OpenBLAS core: ${CORE:-?}, zt CPU level: $([ -x ./zt ] && ./zt env 2>/dev/null | grep -i -m1 -o 'avx[a-z0-9-]*\|scalar' || echo '?'), bf16 GEMM: ${GEMM:-?}
- environment: $ENVLINE; load average at the start: $LOAD
- model: $SHAPE; $(printf "%.1f" "$($PY -c "print($FPT / 1e6)")") MFLOP per token; torch ${TORCH_VER:-?}"

printf '\n%s\n%s\n\n%s\n' "$HEAD" "$INFO" "$TABLE"
[ -f bench/RESULTS.md ] || printf '# Benchmark results\n\nAppended by bench/run.sh (`make bench`); newest last.\n' > bench/RESULTS.md
printf '\n%s\n%s\n\n%s\n' "$HEAD" "$INFO" "$TABLE" >> bench/RESULTS.md

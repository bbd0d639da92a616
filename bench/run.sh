#!/usr/bin/env bash
# bench/run.sh: zt against PyTorch and against the machine's fp32 GEMM ceiling, on one model
# shape (bench/llama60m.toml), in one environment. `make bench` runs it after building ./zt.
#
#   bench/run.sh            prints a table and appends it to bench/RESULTS.md
#   BENCH_THREADS=1 bench/run.sh
#   BENCH_TORCH_PYTHON=/path/to/venv/bin/python bench/run.sh    # a Python whose torch to run
#
# Order: OpenBLAS sgemm peak (bench/sgemm_peak.c), then BENCH_ROUNDS rounds (default 3) of
# PyTorch eager in fp32 and under bf16 autocast (bench/torch_llama.py), `zt pretrain` in fp32,
# in bf16 (oneDNN's GEMMs where zt has them), in bf16 on zt's own GEMM kernels and, where zt runs
# its fp32 products on oneDNN, in fp32 on OpenBLAS alone (both ZT_DNNL=0),
# each without activation recomputation as PyTorch's eager loop trains
# (model.activation_checkpointing = false), then fp32 and bf16 again with zt's default
# (checkpointing on: a third more products in the layers, for less memory). A part that is
# missing or fails shows as "missing" and the rest still runs. zt's tokens/s is the mean of
# metrics.jsonl's input_tokens_per_s over steps 3..10; the table gives the median of the rounds.
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

# --- 2. PyTorch and zt, in rounds ---------------------------------------------------------------
# Every configuration runs once a round, the rounds one after another (BENCH_ROUNDS, default 3),
# so that a slow minute of a shared machine falls on every configuration alike: the table shows
# each one's median over the rounds and each ratio's median over the rounds' own ratios.
ROUNDS=${BENCH_ROUNDS:-3}
FPT=$($PY bench/torch_llama.py --print-flops)
# Without AVX-512 BF16 PyTorch's bf16 autocast runs a plain-loop matmul (on a Zen 3, 140 s a step
# of this shape): there a warm-up step and 2 timed ones, in the first round only.
BF16_STEPS="" BF16_EVERY=1
grep -q avx512_bf16 /proc/cpuinfo || { BF16_STEPS="--warmup 1 --steps 2"; BF16_EVERY=0; }
RESULTS=$OUT/rounds.txt # one line a run: round, configuration, tokens/s
: > "$RESULTS"
TORCH_VER=""

# torch_run ROUND DTYPE [args...]: one PyTorch run, its tokens/s into RESULTS
torch_run() {
    local round=$1 dtype=$2
    shift 2
    log "round $round: pytorch $dtype ($THREADS threads)"
    if $TORCH_PY bench/torch_llama.py --threads "$THREADS" --dtype "$dtype" "$@" > "$OUT/torch-$dtype.out" \
            2> "$OUT/torch-$dtype.log"; then
        TORCH_VER=$(json "$OUT/torch-$dtype.out" torch)
        echo "$round torch-$dtype $(json "$OUT/torch-$dtype.out" tokens_per_s)" >> "$RESULTS"
    else
        log "pytorch $dtype failed: see $OUT/torch-$dtype.log"
    fi
}

# zt_run ROUND NAME [overrides...]: trains the recipe, the mean tokens/s of steps 3..10 into RESULTS
zt_run() {
    local round=$1 name=$2
    shift 2
    log "round $round: zt $name"
    if ! ./zt pretrain "$RECIPE" output.dir="$OUT/run-$name" "$@" > "$OUT/zt-$name.log" 2>&1; then
        log "zt $name failed: see $OUT/zt-$name.log"
        return
    fi
    $PY - "$OUT/run-$name/metrics.jsonl" "$round zt-$name" >> "$RESULTS" <<'EOF'
import json, sys
rows = []
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{"):
        r = json.loads(line)
        if "input_tokens_per_s" in r and 3 <= r.get("step", 0) <= 10 and r.get("split") is None:
            rows.append(r["input_tokens_per_s"])
if rows:
    print(f"{sys.argv[2]} {sum(rows) / len(rows):.2f}")
EOF
}

ZT_OK=0
if [ -x ./zt ]; then
    if bench/make-model.sh > "$OUT/zt-init.log" 2>&1; then ZT_OK=1; else log "zt init failed: see $OUT/zt-init.log"; fi
else
    log "./zt not built: zt rows missing"
fi
# zt's runs: each without activation recomputation as PyTorch's eager loop trains, then fp32 and
# bf16 again with zt's default (checkpointing on: a third more products in the layers)
NOCK=model.activation_checkpointing=false
DNNL=$([ -x ./zt ] && ./zt env 2>/dev/null | grep -q '^bf16 gemm: oneDNN' && echo 1)
for round in $(seq "$ROUNDS"); do
    torch_run "$round" fp32
    if [ "$round" = 1 ] || [ $BF16_EVERY = 1 ]; then torch_run "$round" bf16 $BF16_STEPS; fi
    if [ $ZT_OK = 1 ]; then
        zt_run "$round" fp32 $NOCK
        zt_run "$round" bf16 $NOCK model.dtype=bf16
        ZT_DNNL=0 zt_run "$round" bf16-own $NOCK model.dtype=bf16
        [ "$DNNL" = 1 ] && ZT_DNNL=0 zt_run "$round" fp32-blas $NOCK
        zt_run "$round" fp32-ck
        zt_run "$round" bf16-ck model.dtype=bf16
    fi
done

# --- table -------------------------------------------------------------------------------------
GEMM=$([ -x ./zt ] && ./zt env 2>/dev/null | sed -n 's/^bf16 gemm: //p')
TABLE=$($PY - "$FPT" "$PEAK" "${GEMM:-?}" "$RESULTS" <<'EOF'
import statistics, sys
fpt, peak, gemm, results = sys.argv[1:5]
fpt = float(fpt)
peak = float(peak) if peak else None
runs = {}  # configuration -> {round: tokens/s}
for line in open(results):
    f = line.split()
    if len(f) == 3:
        runs.setdefault(f[1], {})[f[0]] = float(f[2])

def ratio(name, base):
    """the median over the rounds of name's tokens/s over base's in the same round; against a
    base that ran in fewer rounds (PyTorch bf16 without AVX-512 BF16), over base's median"""
    a, b = runs.get(name, {}), runs.get(base, {})
    if not a or not b:
        return ""
    same = [a[r] / b[r] for r in a if r in b]
    if len(same) < len(a):
        same = [v / statistics.median(b.values()) for v in a.values()]
    return f"{statistics.median(same):.2f}x"

# each row against PyTorch in its own precision (fp32 eager, or bf16 autocast), and a bf16 row
# against zt fp32 run alike
out = ["| run | tokens/s (median) | rounds: min–max | GFLOP/s | % of sgemm peak | vs PyTorch (same precision) | vs zt fp32 |",
       "|---|---:|---:|---:|---:|---:|---:|"]
out.append(f"| OpenBLAS sgemm peak | | | {peak:.1f} | 100% | | |" if peak else "| OpenBLAS sgemm peak | missing | | | | | |")
ck = ", activation checkpointing (zt's default)"
for label, name, base, fp32 in (("PyTorch eager fp32", "torch-fp32", None, None),
                                ("PyTorch eager, bf16 autocast", "torch-bf16", None, None),
                                ("zt fp32", "zt-fp32", "torch-fp32", None),
                                ("zt fp32 (OpenBLAS alone: ZT_DNNL=0)", "zt-fp32-blas", "torch-fp32", "zt-fp32"),
                                (f"zt bf16 ({gemm})", "zt-bf16", "torch-bf16", "zt-fp32"),
                                ("zt bf16 (zt's own GEMM kernels)", "zt-bf16-own", "torch-bf16", "zt-fp32"),
                                ("zt fp32" + ck, "zt-fp32-ck", "torch-fp32", None),
                                (f"zt bf16 ({gemm})" + ck, "zt-bf16-ck", "torch-bf16", "zt-fp32-ck")):
    v = runs.get(name)
    if not v and name == "zt-fp32-blas":
        continue  # zt runs its fp32 products on OpenBLAS anyway
    if not v:
        out.append(f"| {label} | missing | | | | | |")
        continue
    tps = statistics.median(v.values())
    g = tps * fpt / 1e9
    pct = f"{100 * g / peak:.0f}%" if peak else ""
    out.append(f"| {label} | {tps:.1f} | {len(v)}: {min(v.values()):.1f}–{max(v.values()):.1f} | {g:.1f} | {pct} "
               f"| {ratio(name, base) if base else ''} | {ratio(name, fp32) if fp32 else ''} |")
print("\n".join(out))
EOF
)

COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo "no commit")
[ -n "$(git status --porcelain 2>/dev/null | head -1)" ] && COMMIT+=" (uncommitted changes)"
CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
SHAPE="llama hidden 512, 8 layers, 8 heads / 4 KV, intermediate 1408, vocab 32000, seq 256, batch 4"
HEAD="### $(date -u '+%Y-%m-%d %H:%M UTC') · $COMMIT"
INFO="- CPU: $CPU ($(nproc) cores online), OpenBLAS core: ${CORE:-?}, zt CPU level: $([ -x ./zt ] && ./zt env 2>/dev/null | grep -i -m1 -o 'avx[a-z0-9-]*\|scalar' || echo '?'), bf16 GEMM: ${GEMM:-?}
- environment: $ENVLINE; load average at the start: $LOAD, at the end: $(cut -d' ' -f1-3 /proc/loadavg)
- $ROUNDS rounds, each configuration once a round$([ $BF16_EVERY = 1 ] || echo " (PyTorch bf16 in the first only, 2 steps)")
- model: $SHAPE; $(printf "%.1f" "$($PY -c "print($FPT / 1e6)")") MFLOP per token; torch ${TORCH_VER:-?}"

printf '\n%s\n%s\n\n%s\n' "$HEAD" "$INFO" "$TABLE"
[ -f bench/RESULTS.md ] || printf '# Benchmark results\n\nAppended by bench/run.sh (`make bench`); newest last.\n' > bench/RESULTS.md
printf '\n%s\n%s\n\n%s\n' "$HEAD" "$INFO" "$TABLE" >> bench/RESULTS.md

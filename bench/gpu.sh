#!/usr/bin/env bash
# bench/gpu.sh: zt on one GPU against PyTorch and against the GPU's bf16 GEMM rate, on a 1B-class
# Llama (hidden 2048, 16 layers, 32 heads / 8 KV, intermediate 8192, vocab 128256, untied; 4 x 2048
# tokens a step, bf16), then zt with offload.optimizer = "cpu" against none. Run on the GPU machine
# from the repository root; it finishes within 6 minutes, prints a table and writes it to
# ${OUT:-build/bench}/gpu.md (the integrator copies it into bench/RESULTS.md), all output to gpu.log.
#
#   zt init       the model (6 GB of fp32 weights, drawn on all cores: about 20 s) and 64 random
#                 sequences, in the background while PyTorch runs
#   PyTorch       bench/torch_llama.py --device cuda --dtype bf16 --gemm-peak: torch.matmul of two
#                 8192 x 8192 bf16 matrices (mean of 10 after 3 warm-ups), then eager training with
#                 bf16 autocast over fp32 parameters, SDPA, fused AdamW: mean of 8 steps after 2
#   zt            zt pretrain, model.device = "cuda", bf16, activation checkpointing off, micro-batch 4
#                 (2 if 4 runs out of memory), 8 steps: the mean of metrics.jsonl's input_tokens_per_s over steps 3..8
#   zt offload    the same with offload.optimizer = "cpu", 6 steps (3..6); "not supported" if zt
#                 refuses the combination
#   zt offload-param  zero.stage = 3 with offload.param and offload.optimizer = "cpu": the GPU holds
#                 only the layers in use; GPU peak memory of each zt run from summary.json
#   accumulation 8  zt, zt offload and zt offload-param again at gradient accumulation 8 (as offload is
#                 used in practice), 3 steps each; the offload rows say their ratio to the run without
#   zt profile    4 steps with ZT_CUDA_PROFILE=1: GPU time per backend entry (profile.txt)
# MFU = tokens/s x FLOPs per token (bench/torch_llama.py --print-flops: the project's count) / 989
# TFLOP/s (H100 and H200 dense bf16, the datasheet) and / the measured GEMM rate. Every part runs
# under `timeout` within the 6 minutes; one that fails or is cut shows as "missing" or partial.
# With .gpu/ (tests/gpu/pack.sh) it runs the packed zt after `. .gpu/env.sh`, else it builds ./zt.
# To try it without a GPU: ZT_GPU_DEVICE=cpu BENCH_GPU_TINY=1 bench/gpu.sh (a tiny shape, all on the CPU).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-build/bench}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
if [ "${1:-}" != --no-log ]; then
    OUT=$OUT bash "$ROOT/bench/gpu.sh" --no-log 2>&1 | tee "$OUT/gpu.log"
    exit "${PIPESTATUS[0]}"
fi
WORK=$ROOT/build/bench-gpu  # the model is 6 GB: never under $OUT, whose files travel back
rm -rf "$WORK" && mkdir -p "$WORK"
DEVICE=${ZT_GPU_DEVICE:-cuda}
log() { echo "bench: $*" >&2; }

if [ -f .gpu/env.sh ]; then
    . .gpu/env.sh
    ZT=$ZT_GPU/bin/zt
else
    make -j"$(nproc)" all || { log "zt did not build"; exit 1; }
    ZT=$ROOT/zt
fi
# python3 runs with the machine's libraries, not the packed ones
py() { LD_LIBRARY_PATH=${ZT_GPU_SYSTEM_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}} python3 "$@"; }

# the shape: hidden, layers, heads, KV heads, intermediate, vocab, sequence, micro-batch
if [ -n "${BENCH_GPU_TINY:-}" ]; then
    read -r H L NH KV I V S B <<< "128 2 4 2 256 512 128 4"
else
    read -r H L NH KV I V S B <<< "2048 16 32 8 8192 128256 2048 4"
fi
SHAPE=(--hidden "$H" --layers "$L" --heads "$NH" --kv-heads "$KV" --intermediate "$I" --vocab "$V" --seq "$S")
FPT=$(py bench/torch_llama.py --print-flops "${SHAPE[@]}")
START=$SECONDS
BUDGET=${BENCH_GPU_BUDGET:-320}  # seconds for everything below, under the 6 minutes
# limit WANT RESERVE: WANT seconds, or fewer so that RESERVE seconds stay for what follows
limit() {
    local t=$((BUDGET - (SECONDS - START) - $2))
    [ "$t" -lt "$1" ] || t=$1
    [ "$t" -gt 5 ] || t=5
    echo "$t"
}

# --- the model and data, in the background -------------------------------------------------------
log "zt init: hidden $H, $L layers, $NH heads / $KV KV, intermediate $I, vocab $V (background)"
(
    t0=$SECONDS
    timeout 150 "$ZT" init --arch llama --out "$WORK/model" --seed 1 hidden_size="$H" intermediate_size="$I" \
        num_hidden_layers="$L" num_attention_heads="$NH" num_key_value_heads="$KV" vocab_size="$V" \
        max_position_embeddings="$S" tie_word_embeddings=false &&
        py - "$V" "$S" > "$WORK/tokens.jsonl" <<'EOF' &&
import json, random, sys
r = random.Random(1)
v, s = int(sys.argv[1]), int(sys.argv[2])
for _ in range(64):
    print(json.dumps({"input_ids": [r.randrange(v) for _ in range(s)]}))
EOF
        echo $((SECONDS - t0)) > "$WORK/init.s"
) > "$WORK/init.log" 2>&1 &
INIT=$!

# --- PyTorch -------------------------------------------------------------------------------------
log "pytorch: bf16 autocast on $DEVICE, batch $B"
GEMM_FLAG=()
[ "$DEVICE" = cuda ] && GEMM_FLAG=(--gemm-peak)
timeout "$(limit 90 110)" env LD_LIBRARY_PATH="${ZT_GPU_SYSTEM_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}}" python3 \
    bench/torch_llama.py --device "$DEVICE" --dtype bf16 --threads 8 --batch "$B" "${SHAPE[@]}" "${GEMM_FLAG[@]}" \
    > "$WORK/torch.json" || log "pytorch failed or was cut"
cat "$WORK/torch.json"

wait $INIT
cat "$WORK/init.log"
if [ -f "$WORK/init.s" ]; then
    log "zt init took $(cat "$WORK/init.s") s"
else
    log "zt init failed or was cut: no zt rows"
fi
printf '%s\n' '[model]' "path = \"$WORK/model\"" 'dtype = "bf16"' 'activation_checkpointing = false' \
    "device = \"$DEVICE\"" '[data]' "train = \"$WORK/tokens.jsonl\"" 'format = "tokens"' "max_length = $S" \
    'packing = false' 'shuffle = false' "cache_dir = \"$WORK/cache\"" \
    '[train]' 'max_steps = 8' "micro_batch_size = $B" 'learning_rate = 1e-4' 'logging_steps = 1' \
    '[output]' 'overwrite = true' 'tensorboard = false' > "$WORK/recipe.toml"

# zt_run NAME LIMIT_S [overrides...]: trains into $WORK/NAME, the log in $WORK/NAME.log
zt_run() {
    local name=$1 t=$2
    shift 2
    log "zt $name:${*:+ $*} (at most $t s)"
    OMP_NUM_THREADS=$(nproc) timeout "$t" "$ZT" pretrain "$WORK/recipe.toml" output.dir="$WORK/$name" "$@" \
        > "$WORK/$name.log" 2>&1
    local rc=$?
    cat "$WORK/$name.log"
    return $rc
}
# steps NAME: the rows metrics.jsonl has
steps() {
    local n
    n=$(grep -c '^{' "$WORK/$1/metrics.jsonl" 2>/dev/null)
    echo "${n:-0}"
}

MAIN="" MICRO=$B
if [ -f "$WORK/init.s" ]; then
    zt_run main "$(limit 100 50)" || log "zt failed or was cut"
    MAIN=main
    if [ "$(steps main)" = 0 ] && grep -qi 'memory' "$WORK/main.log" && [ "$B" -gt 1 ] &&
            [ "$(limit 60 0)" -ge 60 ]; then
        MICRO=$((B / 2))
        zt_run main-half "$(limit 90 40)" train.micro_batch_size=$MICRO || log "zt failed or was cut"
        MAIN=main-half
    fi
    OFFLOAD_RC=0
    zt_run offload "$(limit 70 5)" train.micro_batch_size=$MICRO train.max_steps=6 offload.optimizer=cpu ||
        OFFLOAD_RC=$?
    if [ "$OFFLOAD_RC" = 2 ] && [ "$(steps offload)" = 0 ] && [ "$(steps "$MAIN")" != 0 ]; then
        log "offload.optimizer = \"cpu\" with model.device = \"$DEVICE\": not supported"
        echo "not supported: $(grep -m1 'error' "$WORK/offload.log" | cut -c1-100)" > "$WORK/offload.refused"
    fi
    # the GPU holding only the layers in use: weights' slices and AdamW on the host
    zt_run offload-param "$(limit 70 45)" train.micro_batch_size=$MICRO train.max_steps=6 zero.stage=3 \
        offload.param=cpu offload.optimizer=cpu || log "zt offload-param failed or was cut"
    # at gradient accumulation 8, as offload is used in practice: 3 steps each (steps 3..3 timed)
    A8=(train.micro_batch_size=$MICRO train.max_steps=3 train.gradient_accumulation_steps=8)
    zt_run main-a8 "$(limit 50 120)" "${A8[@]}" || log "zt at accumulation 8 failed or was cut"
    zt_run offload-a8 "$(limit 60 60)" "${A8[@]}" offload.optimizer=cpu || log "zt offload at accumulation 8 failed or was cut"
    zt_run offload-param-a8 "$(limit 60 40)" "${A8[@]}" zero.stage=3 offload.param=cpu offload.optimizer=cpu ||
        log "zt offload-param at accumulation 8 failed or was cut"
    # where the GPU's time goes: 4 steps with the per-entry profile (lib/backend/profile_cuda.c)
    [ "$DEVICE" = cuda ] && ZT_CUDA_PROFILE=1 zt_run profile "$(limit 40 0)" train.micro_batch_size=$MICRO \
        train.max_steps=4 >/dev/null 2>&1 && grep -A40 'CUDA profile' "$WORK/profile.log" | tee "$OUT/profile.txt"
fi

# --- the table -----------------------------------------------------------------------------------
GPU=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
TABLE=$(py - "$WORK" "$FPT" "$MAIN" "$MICRO" <<'EOF'
import json, os, sys
work, fpt, main, micro = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
DATASHEET = 989e12

def last_json(path):
    try:
        lines = [l for l in open(path) if l.lstrip().startswith("{")]
        return json.loads(lines[-1]) if lines else {}
    except (OSError, ValueError):
        return {}

def zt_tps(name):
    """mean input_tokens_per_s of steps 3.. ; a run cut short gives what it has after step 1, marked"""
    try:
        rows = [json.loads(l) for l in open(os.path.join(work, name, "metrics.jsonl")) if l.startswith("{")]
    except (OSError, ValueError):
        return None, ""
    rows = [r for r in rows if "input_tokens_per_s" in r and r.get("split") is None]
    late = [r["input_tokens_per_s"] for r in rows if r["step"] >= 3]
    if late:
        return sum(late) / len(late), f"steps 3..{rows[-1]['step']}"
    early = [r["input_tokens_per_s"] for r in rows if r["step"] >= 2] or [r["input_tokens_per_s"] for r in rows]
    return (sum(early) / len(early), f"only {len(rows)} step(s)") if early else (None, "")

torch = last_json(os.path.join(work, "torch.json"))
gemm = torch.get("gemm_bf16_tflops")
gemm = gemm * 1e12 if gemm else None
out = ["| run | tokens/s | TFLOP/s | MFU (989 TFLOP/s) | MFU (measured GEMM) | vs PyTorch | note |",
       "|---|---:|---:|---:|---:|---:|---|"]
if gemm:
    out.append(f"| cuBLAS bf16 GEMM 8192³ (torch.matmul) | | {gemm / 1e12:.0f} | {100 * gemm / DATASHEET:.0f}% "
               "| 100% | | |")
else:
    out.append("| cuBLAS bf16 GEMM 8192³ (torch.matmul) | missing | | | | | |")
ttps = torch.get("tokens_per_s")

def device_gib(name):
    try:
        return json.load(open(os.path.join(work, name, "summary.json")))["device_peak_bytes"] / 2**30
    except (OSError, ValueError, KeyError):
        return None

def row(name, tps, note):
    if tps is None:
        out.append(f"| {name} | {note or 'missing'} | | | | | |")
        return
    f = tps * fpt
    mfu_g = f"{100 * f / gemm:.1f}%" if gemm else ""
    vs = f"{tps / ttps:.2f}x" if ttps else ""
    out.append(f"| {name} | {tps:.0f} | {f / 1e12:.1f} | {100 * f / DATASHEET:.1f}% | {mfu_g} | {vs} | {note} |")

mem = torch.get("peak_memory_gib")
row("PyTorch eager, bf16 autocast, SDPA, fused AdamW", ttps,
    f"peak {mem} GiB" if mem is not None else "")
def with_memory(name, note):
    gib = device_gib(name)
    return f"{note}; GPU peak {gib:.1f} GiB" if gib else note

base, note = zt_tps(main) if main else (None, "")
row(f"zt bf16, micro-batch {micro}", base, with_memory(main, note) if main else note)
def offload_row(name, run, base):
    tps, note = zt_tps(run)
    if tps and base:
        note = f"{tps / base:.2f}x no offload; {note}"
    row(name, tps, with_memory(run, note))
refused = os.path.join(work, "offload.refused")
if os.path.exists(refused):
    row('zt bf16, offload.optimizer = "cpu"', None, open(refused).read().strip().replace("|", "/"))
else:
    offload_row('zt bf16, offload.optimizer = "cpu"', "offload", base)
offload_row('zt bf16, stage 3, offload.param and .optimizer = "cpu"', "offload-param", base)
base8, note = zt_tps("main-a8")
row("zt bf16, gradient accumulation 8", base8, with_memory("main-a8", note))
offload_row('zt bf16, accumulation 8, offload.optimizer = "cpu"', "offload-a8", base8)
offload_row('zt bf16, accumulation 8, stage 3, offload.param and .optimizer = "cpu"', "offload-param-a8", base8)
print("\n".join(out))
EOF
)
ZTV=$("$ZT" version 2>/dev/null | head -1)
TORCHV=$(py -c 'import json, sys; print(json.load(open(sys.argv[1])).get("torch", "?"))' "$WORK/torch.json" 2>/dev/null)
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo 'no git')
GFLOP=$(py -c "print(f'{$FPT / 1e9:.2f}')")
INIT_S=$(cat "$WORK/init.s" 2>/dev/null || echo '?')
{
    echo "### GPU: $(date -u '+%Y-%m-%d %H:%M UTC') · ${ZTV:-zt ?} · $COMMIT"
    echo "- GPU: ${GPU:-none ($DEVICE)}; torch ${TORCHV:-?}; host: $(nproc) cores"
    echo "- model: llama hidden $H, $L layers, $NH heads / $KV KV, intermediate $I, vocab $V (untied), sequence $S,"
    echo "  batch $B (zt micro-batch $MICRO); $GFLOP GFLOP per token; zt init $INIT_S s"
    echo
    echo "$TABLE"
} > "$OUT/gpu.md"
echo
cat "$OUT/gpu.md"
log "done in $((SECONDS - START)) s"
[ -n "$MAIN" ] && [ "$(steps "$MAIN")" != 0 ]  # exit 1 without a zt row

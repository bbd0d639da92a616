#!/usr/bin/env bash
# bench/moe.sh: a mixture of experts trained by zt and by transformers' own Qwen3-MoE model, on
# the same weights and tokens, in one environment. The shape is bench/run.sh's Llama with its MLP
# split into experts: hidden 512, 8 layers, 8 heads / 4 KV (head_dim 64), 16 experts of 352, 4 a
# token (a token's experts hold as many weights as the dense model's MLP of 1408), vocab 32000,
# micro-batches of 4 x 256 tokens, the load-balancing loss in the loss (output_router_logits).
#
#   BENCH_TORCH_PYTHON=/path/to/venv/bin/python bench/moe.sh    # a Python with torch, transformers >= 4.51
#
# BENCH_ROUNDS rounds (default 2), each: transformers in fp32 and under bf16 autocast
# (bench/torch_moe.py), zt in fp32 and bf16 without activation checkpointing (as the eager loop
# trains); tokens/s are the mean of steps 3..10, the table the median of the rounds. Without
# AVX-512 BF16 PyTorch's bf16 autocast runs a plain-loop matmul (minutes a step): there it runs a
# warm-up step and 2 timed ones, in the first round only (bench/run.sh does the same).
set -u
cd "$(dirname "$0")/.."
OUT=build/bench-moe
. bench/lib.sh
. bench/record.sh
TORCH_PY=${BENCH_TORCH_PYTHON:-/usr/bin/python3}
ROUNDS=${BENCH_ROUNDS:-2}
rm -rf "$OUT/model"
./zt init --arch qwen3_moe --out "$OUT/model" --seed 1 hidden_size=512 moe_intermediate_size=352 num_experts=16 \
    num_experts_per_tok=4 norm_topk_prob=true output_router_logits=true num_hidden_layers=8 num_attention_heads=8 \
    num_key_value_heads=4 head_dim=64 vocab_size=32000 max_position_embeddings=256 >/dev/null || exit 1
/usr/bin/python3 -c '
import json, random
r = random.Random(1)
for _ in range(64):
    print(json.dumps({"input_ids": [r.randrange(32000) for _ in range(256)]}))' > "$OUT/tokens.jsonl"
cat > "$OUT/recipe.toml" <<TOML
[model]
path = "model"
dtype = "fp32"
activation_checkpointing = false
[data]
train = "tokens.jsonl"
format = "tokens"
max_length = 256
packing = true
shuffle = false
[train]
micro_batch_size = 4
max_steps = 10
logging_steps = 1
learning_rate = 1e-4
[output]
overwrite = true
TOML

BF16_STEPS="" BF16_EVERY=1
grep -q avx512_bf16 /proc/cpuinfo || { BF16_STEPS="--warmup 1 --steps 3"; BF16_EVERY=0; }
: > "$OUT/rounds.txt"
# torch_run ROUND DTYPE: transformers' run, its tokens/s into rounds.txt
torch_run() {
    local steps=""
    [ "$2" = bf16 ] && steps=$BF16_STEPS
    log "round $1: transformers $2"
    if $TORCH_PY bench/torch_moe.py "$OUT/model" "$OUT/tokens.jsonl" --threads "$OMP_NUM_THREADS" --dtype "$2" \
        $steps > "$OUT/torch-$2.out" 2> "$OUT/torch-$2.err"; then
        /usr/bin/python3 -c 'import json, sys; print(sys.argv[1], json.loads(open(sys.argv[2]).read())["tokens_per_s"])' \
            "torch-$2" "$OUT/torch-$2.out" >> "$OUT/rounds.txt"
    else
        log "transformers $2 failed: $(tail -1 "$OUT/torch-$2.err")"
    fi
}

# zt_run ROUND DTYPE: zt's run, the mean tokens/s of steps 3..10 into rounds.txt
zt_run() {
    log "round $1: zt $2"
    if (cd "$OUT" && ../../zt pretrain recipe.toml model.dtype="$2" output.dir="run-$2" > "zt-$2.log" 2>&1); then
        /usr/bin/python3 - "$OUT/run-$2/metrics.jsonl" "zt-$2" >> "$OUT/rounds.txt" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"input_tokens_per_s"' in l]
tps = [r["input_tokens_per_s"] for r in rows if r["step"] >= 3]
print(sys.argv[2], sum(tps) / len(tps))
PY
    else
        log "zt $2 failed: $(tail -1 "$OUT/zt-$2.log")"
    fi
}

for round in $(seq 1 "$ROUNDS"); do
    for dtype in fp32 bf16; do
        if [ $dtype = fp32 ] || [ "$round" = 1 ] || [ $BF16_EVERY = 1 ]; then torch_run "$round" $dtype; fi
        zt_run "$round" $dtype
    done
done
TABLE=$(/usr/bin/python3 - "$OUT/rounds.txt" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, v = line.split()
    runs.setdefault(name, []).append(float(v))
med = {k: statistics.median(v) for k, v in runs.items()}
out = ["| run | tokens/s (median) | rounds: min–max | vs transformers (same precision) |", "|---|---:|---:|---:|"]
for name in ("torch-fp32", "torch-bf16", "zt-fp32", "zt-bf16"):
    if name not in med:
        out.append(f"| {name} | missing | | |")
        continue
    base = med.get(name.replace("zt-", "torch-"))
    ratio = f"{med[name] / base:.2f}x" if name.startswith("zt-") and base else ""
    out.append(f"| {name} | {med[name]:.0f} | {min(runs[name]):.0f}–{max(runs[name]):.0f} | {ratio} |")
print("\n".join(out))
PY
)
VERS=$($TORCH_PY -c 'import torch, transformers; print(f"torch {torch.__version__}, transformers {transformers.__version__}")' 2>/dev/null || echo "torch missing")
bench_record "mixture of experts (bench/moe.sh): zt against transformers' Qwen3-MoE" \
    "- CPU: $(bench_cpu); $OMP_NUM_THREADS threads; $VERS; load before: $(cut -d' ' -f1-3 /proc/loadavg)
- model: Qwen3-MoE shape, hidden 512, 8 layers, 16 experts of 352, 4 a token, vocab 32000; 4 x 256 tokens a step; zt without activation checkpointing" \
    "$TABLE"

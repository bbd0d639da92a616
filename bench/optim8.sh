#!/usr/bin/env bash
# bench/optim8.sh: full fine-tuning with AdamW's moments in 8 bits (train.optim = "adamw_8bit",
# docs/distributed.md) against fp32 moments (adamw_torch), in one process with the same threads.
# Model: Qwen3-0.6B's shape (zt init --arch qwen3: hidden 1024, 28 layers, 16/8 heads of 128,
# intermediate 3072, vocabulary 151936, tied head; 596M parameters, random weights, kept under
# build/bench/optim8), model.dtype = "bf16", 4 steps of 1 x 128 tokens of a periodic sequence at
# lr 1e-5, activation checkpointing on. Per optimizer: zt validate's predicted peak, the training's
# peak RSS and optimizer-state bytes (summary.json), the mean time of steps 2-4, the last loss.
# Prints and appends to bench/RESULTS.md. Not in `make bench` (about 5 minutes).
set -u
cd "$(dirname "$0")/.."
OUT=$PWD/build/bench/optim8
. bench/lib.sh
. bench/record.sh
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)

if [ ! -f "$OUT/model/config.json" ]; then
    log "zt init: Qwen3-0.6B's shape"
    ./zt init --arch qwen3 --out "$OUT/model" --seed 1 --dtype bf16 hidden_size=1024 intermediate_size=3072 \
        num_hidden_layers=28 num_attention_heads=16 num_key_value_heads=8 head_dim=128 vocab_size=151936 \
        tie_word_embeddings=true >"$OUT/init.log" 2>&1 || { log "zt init failed: see $OUT/init.log"; exit 1; }
fi
{ printf '[model]\npath = "%s/model"\ndtype = "bf16"\n' "$OUT"; steps_recipe 128 4 1e-5; } > "$OUT/recipe.toml"

for optim in adamw_torch adamw_8bit; do
    log "$optim"
    ./zt validate "$OUT/recipe.toml" train.optim=$optim > "$OUT/validate-$optim.txt" 2>&1
    rm -rf "$OUT/run-$optim"
    ./zt pretrain "$OUT/recipe.toml" train.optim=$optim output.dir="$OUT/run-$optim" > "$OUT/run-$optim.log" 2>&1 \
        || log "$optim failed: see $OUT/run-$optim.log"
done

TABLE=$(/usr/bin/python3 - "$OUT" <<'PY'
import json, re, sys
out = sys.argv[1]
rows, losses = [], {}
for optim in ("adamw_torch", "adamw_8bit"):
    try:
        v = open(f"{out}/validate-{optim}.txt").read()
        s = json.load(open(f"{out}/run-{optim}/summary.json"))
        m = [json.loads(l) for l in open(f"{out}/run-{optim}/metrics.jsonl")]
    except (OSError, ValueError):
        rows.append(f"| {optim} | missing | | | | |")
        continue
    total = float(re.search(r"^#   total +([0-9.]+) MiB", v, re.M).group(1)) * 2**20
    opt_v = float(re.search(r"^#   optimizer state +([0-9.]+) MiB", v, re.M).group(1)) * 2**20
    steps = [b["elapsed_s"] - a["elapsed_s"] for a, b in zip(m, m[1:])]
    losses[optim] = m[-1]["loss"]
    rows.append(f"| {optim} | {opt_v / 2**30:.2f} GiB | {s['model_state_bytes']['optimizer'] / 2**30:.2f} GiB "
                f"| {total / 2**30:.2f} GiB | {s['peak_rss_train_bytes'] / 2**30:.2f} GiB "
                f"| {sum(steps) / len(steps):.1f} s | {m[-1]['loss']:.6f} |")
print("| optim | optimizer state, zt validate | optimizer state, summary.json | peak, zt validate "
      "| peak RSS (training) | step (mean of 2-4) | loss at step 4 |")
print("|---|---:|---:|---:|---:|---:|---:|")
print("\n".join(rows))
if len(losses) == 2:
    a, b = losses["adamw_8bit"], losses["adamw_torch"]
    print(f"\nloss at step 4, adamw_8bit against adamw_torch: {abs(a - b) / b:.1e} relative")
PY
)
bench_record "8-bit AdamW moments against fp32 on Qwen3-0.6B's shape (bench/optim8.sh)" \
    "- $(bench_cpu) threads $OMP_NUM_THREADS; load average $LOAD; full fine-tuning, model.dtype bf16, 4 steps of 1 x 128 tokens, checkpointing on" \
    "$TABLE"

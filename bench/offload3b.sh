#!/usr/bin/env bash
# bench/offload3b.sh: the ZeRO-Infinity headline on this machine: full fine-tuning steps
# (forward, backward, AdamW on every parameter) of a 3-billion-parameter Llama shape (hidden
# 3072, 28 layers, 24 heads, 8 KV heads, intermediate 8192, vocab 32000, untied; bf16 weights,
# fp32 master and moments) with offload.param = nvme and offload.optimizer = nvme, one process.
# Without offload the same run needs about 16 bytes a parameter in memory (48 GB: zt validate
# prints it), twice what the machine has.
#
# Makes the model once (zt init --dtype bf16, 6 GB, under build/bench/3b; kept between runs),
# a periodic token sequence the loss can fall on, then trains BENCH_3B_STEPS (4) steps of one
# sequence of BENCH_3B_SEQ (64) tokens, the swap file under build/bench/3b/swap. Prints zt
# validate's plan (memory, I/O bytes per step, predicted step time), then per step: seconds,
# exposed I/O wait, bytes read and written, and the disk bandwidth they mean, and the peak RSS,
# with validate's predictions beside them (its disk probe made afresh first, on the idle disk);
# appends it to bench/RESULTS.md (BENCH_RECORD=0: print only). BENCH_3B_TILES=K computes the
# embedding, each MLP and the LM head in K tiles (memory-centric tiling). Checks the free disk first:
# about 20 bytes a parameter (model 2, swap file 16, final/ 2), 62 GB.
set -u
cd "$(dirname "$0")/.."
OUT=$PWD/build/bench/3b  # absolute: the recipe's paths are read relative to its directory
PY=/usr/bin/python3
STEPS=${BENCH_3B_STEPS:-4}
SEQ=${BENCH_3B_SEQ:-64}
TILES=${BENCH_3B_TILES:-1}
SHAPE="hidden_size=3072 intermediate_size=8192 num_hidden_layers=28 num_attention_heads=24 num_key_value_heads=8
       vocab_size=32000 max_position_embeddings=4096 tie_word_embeddings=false"
. bench/lib.sh

have_model=$([ -f "$OUT/model/config.json" ] && echo 1)
rm -rf "$OUT/run" "$OUT/swap"
need_disk $((have_model ? 56 : 62)) "model, swap file, final/"
if [ -z "$have_model" ]; then
    log "zt init: the 3B model in bf16"
    /usr/bin/time -f "init: %e s, peak RSS %M KiB" ./zt init --arch llama --out "$OUT/model" --seed 1 --dtype bf16 $SHAPE ||
        { rm -rf "$OUT/model"; exit 1; }
fi
{ cat <<TOML
[model]
path = "$OUT/model"
dtype = "bf16"
TOML
    steps_recipe $SEQ $STEPS 1e-4
    cat <<TOML
[zero]
stage = 3
prefetch_layers = 1
embedding_tiles = $TILES
mlp_tiles = $TILES
head_tiles = $TILES
[offload]
param = "nvme"
optimizer = "nvme"
TOML
    nvme_recipe
} > "$OUT/recipe.toml"
rm -f "$HOME"/.cache/zt/disk2-*.txt # validate measures the disk again, now
./zt validate "$OUT/recipe.toml" | sed -n '/^# memory per rank/,$p' | tee "$OUT/validate.txt"
./zt validate "$OUT/recipe.toml" offload.param=none offload.optimizer=none zero.stage=0 zero.embedding_tiles=1 \
    zero.mlp_tiles=1 zero.head_tiles=1 |
    awk '/# memory per rank/ {on = 1} on && $2 == "total" {print "# without offload: " $3 " " $4 " per rank"}' | tee -a "$OUT/validate.txt"
log "zt pretrain: $STEPS steps"
t0=$(date +%s)
ZT_LOG=info /usr/bin/time -f "%M" -o "$OUT/maxrss" ./zt pretrain "$OUT/recipe.toml" 2> "$OUT/train.log" || { tail -5 "$OUT/train.log"; exit 1; }
t1=$(date +%s)
$PY - "$OUT" $((t1 - t0)) <<'PY' | tee "$OUT/table.md"
import json, re, sys, time
out, wall = sys.argv[1], int(sys.argv[2])
rows = [json.loads(l) for l in open(out + "/run/metrics.jsonl")]
summary = json.load(open(out + "/run/summary.json"))
plan = open(out + "/validate.txt").read()
m = re.search(r"per optimizer step: (\d+) bytes read, (\d+) written", plan)
pred_rd, pred_wr = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
m = re.search(r"step time, predicted: ([0-9.]+) s", plan)
pred_s = float(m.group(1)) if m else 0
params = re.search(r"(\d+) parameters", plan)
tiles = re.search(r"^embedding_tiles = (\d+)", open(out + "/recipe.toml").read(), re.M)
tiled = f", embedding, MLPs and LM head in {tiles.group(1)} tiles each" if tiles and tiles.group(1) != "1" else ""
print(f"\n### {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} · 3B full fine-tuning, offload.param = nvme, offload.optimizer = nvme{tiled} (bench/offload3b.sh)")
print(f"- {params.group(1) if params else '?'} parameters, bf16 weights, fp32 master and moments; 1 × {rows[0]['target_tokens'] if rows else '?'} target tokens a step; one process, 2 cores, 24 GiB RAM, one virtual disk")
print(f"- peak RSS {int(open(out + '/maxrss').read()) / 2**20:.2f} GiB (whole process, loading and final save included); during training {summary['peak_rss_train_bytes'] / 2**30:.2f} GiB; wall {wall} s for everything")
steps = [b["elapsed_s"] - a["elapsed_s"] for a, b in zip(rows, rows[1:])]  # step 1 also pays for the first faults
mean = sum(steps) / len(steps) if steps else 0
print(f"- zt validate predicts {pred_rd / 1e9:.1f} GB read and {pred_wr / 1e9:.1f} GB written a step, and a step of {pred_s:.1f} s; "
      f"steps 2..{len(rows)} took {mean:.1f} s on average: predicted / measured = {pred_s / mean if mean else 0:.2f}\n")
print("| step | loss | seconds | exposed I/O wait s | compute and the rest s | GB read | GB written | disk GB/s over the step | read vs validate | written vs validate |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
prev = 0.0
for r in rows:
    dt = r["elapsed_s"] - prev
    prev = r["elapsed_s"]
    rd, wr = r["io_read_bytes"], r["io_write_bytes"]
    print(f"| {r['step']} | {r['loss']:.4f} | {dt:.1f} | {r['io_wait_s']:.1f} | {dt - r['io_wait_s']:.1f} | {rd / 1e9:.2f} | {wr / 1e9:.2f} | "
          f"{(rd + wr) / dt / 1e9:.2f} | {rd / pred_rd if pred_rd else 0:.3f} | {wr / pred_wr if pred_wr else 0:.3f} |")
PY
if [ "${BENCH_RECORD:-1}" = 1 ]; then  # BENCH_RECORD=0: print only
    { cat "$OUT/table.md"; echo; echo '```'; cat "$OUT/validate.txt"; echo '```'; } >> bench/RESULTS.md
fi
rm -rf "$OUT/swap"

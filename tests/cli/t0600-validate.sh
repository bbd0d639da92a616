#!/usr/bin/env bash
# zt validate prints the resolved recipe (valid TOML that loads back) and a memory
# estimate per rank that shrinks with ZeRO sharding and is within 25% of the peak
# RSS a real run measures.
# kernel levels: own only (what it checks does not depend on the CPU kernels)
. "$(dirname "$0")/lib.sh"

make_tiny model hidden_size=64 intermediate_size=160 vocab_size=256
$PY - <<'PY'
import json, random
r = random.Random(1)
with open("data.jsonl", "w") as f:
    for i in range(64):
        f.write(json.dumps({"input_ids": [r.randrange(256) for _ in range(r.randrange(10, 60))]}) + "\n")
PY
printf '[model]\npath = "model"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 64\n[train]\nmax_steps = 3\nmicro_batch_size = 8\n' > recipe.toml

expect_ok "validate" "$ZT" validate recipe.toml
sed -n '/^# memory/,$p' "$TMP/out" >&2
sed '/^#/d' "$TMP/out" > resolved.toml
expect_ok "the resolved recipe loads back" "$ZT" validate resolved.toml
total() { sed -n 's/^#   total *\([0-9.]*\) MiB.*/\1/p' "$TMP/out"; }
one=$(total)
expect_ok "validate, 4 ranks, ZeRO-3" "$ZT" validate recipe.toml --world-size 4 zero.stage=3
four=$(total)
$PY -c "import sys; sys.exit(0 if float('$four') < float('$one') else 1)" && say "ok - 4 ranks need less per rank ($four < $one MiB)" \
  || fail "ZeRO-3 over 4 ranks does not shrink the estimate ($four vs $one MiB)"
expect_exit 2 "hpz that does not divide the world" "hpz_partition_size" "$ZT" validate recipe.toml --world-size 4 zero.hpz_partition_size=3

for ckpt in false true; do
  expect_ok "validate (checkpointing $ckpt)" "$ZT" validate recipe.toml model.activation_checkpointing=$ckpt model.dtype=fp32
  est=$(total)
  expect_ok "train (checkpointing $ckpt)" "$ZT" pretrain recipe.toml model.activation_checkpointing=$ckpt model.dtype=fp32 output.dir=run-$ckpt
  $PY - "$est" run-$ckpt/summary.json <<'PY' && say "ok - estimate $est MiB within 25% of the peak RSS" || fail "estimate $est MiB is off"
import json, sys
est = float(sys.argv[1]) * 2**20
rss = json.load(open(sys.argv[2]))["peak_rss_bytes"]
print("estimate %.1f MiB, peak RSS %.1f MiB" % (est / 2**20, rss / 2**20), file=sys.stderr)
sys.exit(0 if abs(est - rss) <= 0.25 * rss else 1)
PY
done

# model.device = "cuda": the GPU's share, estimated without a GPU. The 1.5B shape of bench/gpu.sh (a
# config.json is all validate reads), against what an H200 measured (bench/RESULTS.md, GPU run 4):
# 47.4 GiB plain, 36.2 with offload.optimizer = cpu, 25.2 with offload.param = cpu as well; within 5%.
# That run kept no bf16 copies of the products' inputs on the GPU; the arrays the copies add (every
# layer's ln1, att, ln2 and h, and lnf, in bf16: 16 x 8192 x (2048 + 2048 + 2048 + 8192) x 2 bytes
# + 8192 x 2048 x 2) are added to what it measured until a GPU run measures them.
COPIES_GIB=$($PY -c 'print((16 * 8192 * (3 * 2048 + 8192) * 2 + 8192 * 2048 * 2) / 2**30)')
mkdir -p big
$PY - > big/config.json <<'PY'
import json
print(json.dumps({"model_type": "llama", "vocab_size": 128256, "hidden_size": 2048, "intermediate_size": 8192,
                  "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
                  "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}))
PY
printf '[model]\npath = "big"\ndtype = "bf16"\ndevice = "cuda"\nactivation_checkpointing = false\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 2048\n[train]\nmicro_batch_size = 4\n' > gpu.toml
gpu_total() { sed -n '/# GPU memory/,$p' "$TMP/out" | awk '$2 == "total" {print $3}'; }
for spec in "47.4|" "36.2|offload.optimizer=cpu" "25.2|zero.stage=3 offload.param=cpu offload.optimizer=cpu"; do
  measured=${spec%%|*} keys=${spec#*|}
  expect_ok "validate on a GPU${keys:+, $keys}" "$ZT" validate gpu.toml $keys
  est=$(gpu_total)
  measured=$($PY -c "print(round($measured + $COPIES_GIB, 2))")
  $PY -c "import sys; e = float(sys.argv[1]) / 1024; m = float(sys.argv[2]); sys.exit(abs(e - m) > 0.05 * m)" \
    "${est:-0}" "$measured" && say "ok - GPU estimate ${est:-?} MiB against $measured GiB (measured, with the copies)" ||
    fail "GPU estimate ${est:-?} MiB against $measured GiB (measured, with the copies)"
done
done_testing

#!/usr/bin/env bash
# Runs a fixed set of small training runs with one zt binary and prints, per run, a digest of
# its final weights (every tensor's bytes) and of its metrics.jsonl losses. Two binaries (the
# commits before and after a refactor that must not change results) give the same lines iff
# every run is bitwise alike:
#     scripts/same-results.sh OLD/zt > before.txt; scripts/same-results.sh ./zt > after.txt
#     diff before.txt after.txt
# Runs: one rank fp32 and bf16; ZeRO 1 and 3 on 2 ranks; ZeRO++ (qwZ + hpZ + qgZ) on 4 ranks as
# 2 nodes × 2; optimizer and parameters offloaded to NVMe (a swap file); DPO; GRPO.
# usage: scripts/same-results.sh ZT_BINARY [WORK_DIR]   (WORK_DIR: a new temporary one)
set -euo pipefail
ZT=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${2:-$(mktemp -d)}
mkdir -p "$WORK" && cd "$WORK"
export OMP_NUM_THREADS=1 ZT_LOG=warn HOME=$WORK/home
PY=/usr/bin/python3
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none"

# digest RUN_DIR: sha256 of every tensor's name, dtype, shape and bytes, and of the loss columns
digest() {
  $PY - "$1" <<'PY'
import hashlib, json, struct, sys
d = sys.argv[1]
w = hashlib.sha256()
with open(d + "/final/model.safetensors", "rb") as f:
    blob = f.read()
n = struct.unpack("<Q", blob[:8])[0]
h = json.loads(blob[8:8 + n]); h.pop("__metadata__", None)
for name in sorted(h):
    e = h[name]
    w.update(f"{name} {e['dtype']} {e['shape']}".encode())
    w.update(blob[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]])
rows = [json.loads(l) for l in open(d + "/metrics.jsonl")]
losses = [(r.get("split", "train"), r["step"], {k: v for k, v in r.items() if "loss" in k}) for r in rows]
print("%-12s weights %s  losses %s (%d rows)" % (d, w.hexdigest()[:16],
      hashlib.sha256(json.dumps(losses, sort_keys=True).encode()).hexdigest()[:16], len(rows)))
PY
}

"$ZT" init --arch llama --out tiny --seed 1 hidden_size=32 intermediate_size=64 num_hidden_layers=2 \
  num_attention_heads=4 num_key_value_heads=2 vocab_size=64 max_position_embeddings=64 >/dev/null
$PY - <<'PY'
import json, random
r = random.Random(5)
with open("tokens.jsonl", "w") as f:
    for i in range(60):
        f.write(json.dumps({"input_ids": [r.randrange(64) for _ in range(r.randrange(5, 30))]}) + "\n")
PY
printf '[model]\npath = "tiny"\ndtype = "fp32"\n[data]\ntrain = "tokens.jsonl"\nformat = "tokens"\nmax_length = 32\npacking = false\n[train]\nmax_steps = 4\nmicro_batch_size = 1\ngradient_accumulation_steps = 4\nlearning_rate = 1e-3\nlogging_steps = 1\n[offload]\nnvme_path = "swap"\n' > base.toml
mkdir -p swap
"$ZT" pretrain base.toml output.dir=fp32
"$ZT" pretrain base.toml output.dir=bf16 model.dtype=bf16
$MPI -np 2 "$ZT" pretrain base.toml output.dir=zero1 zero.stage=1 train.gradient_accumulation_steps=2
$MPI -np 2 "$ZT" pretrain base.toml output.dir=zero3 zero.stage=3 train.gradient_accumulation_steps=2
$MPI -np 4 -x ZT_RANKS_PER_NODE=2 "$ZT" pretrain base.toml output.dir=zeropp zero.stage=3 \
  train.gradient_accumulation_steps=1 zero.quantized_weights=true zero.hpz_partition_size=2 zero.quantized_gradients=true
"$ZT" pretrain base.toml output.dir=nvme zero.stage=3 offload.optimizer=nvme offload.param=nvme

# DPO and GRPO on the demo task with a character-level SentencePiece tokenizer
$PY "$ROOT/scripts/demo_data.py" . >/dev/null
$PY "$ROOT/scripts/demo_rl_data.py" . >/dev/null
head -200 pref_train.jsonl > pref.jsonl
head -16 prompts_train.jsonl > prompts.jsonl
spm_train --input=corpus.txt --model_prefix=tok --vocab_size=60 --model_type=char --minloglevel=2 \
  --user_defined_symbols='<|im_start|>,<|im_end|>' --hard_vocab_limit=false >/dev/null 2>&1
"$ZT" init --arch llama --out chat --seed 1 vocab_size=40 hidden_size=64 intermediate_size=128 num_hidden_layers=2 \
  num_attention_heads=4 num_key_value_heads=2 max_position_embeddings=128 bos_token_id=1 eos_token_id=2 >/dev/null
cp tok.model chat/tokenizer.model
printf '[model]\npath = "chat"\n[tokenizer]\nchat_template = "chatml"\n[data]\ntrain = "pref.jsonl"\nformat = "preference"\nmax_length = 64\n[train]\nmax_steps = 4\nmicro_batch_size = 4\nlearning_rate = 3e-4\nlogging_steps = 1\nseed = 1\n[rlhf]\nalgorithm = "dpo"\nbeta = 0.1\n' > dpo.toml
"$ZT" rlhf dpo.toml output.dir=dpo
printf '[model]\npath = "chat"\n[tokenizer]\nchat_template = "chatml"\n[data]\ntrain = "prompts.jsonl"\nformat = "prompt"\nmax_length = 64\nshuffle = false\n[train]\nmax_steps = 2\nmicro_batch_size = 4\nlearning_rate = 1e-4\nlogging_steps = 1\nseed = 3\n[rlhf]\nalgorithm = "grpo"\nnum_generations = 4\nmax_new_tokens = 12\nbeta = 0.05\n' > grpo.toml
"$ZT" rlhf grpo.toml output.dir=grpo "rlhf.reward_command=$PY $ROOT/scripts/demo_reward.py"

for d in fp32 bf16 zero1 zero3 zeropp nvme dpo grpo; do digest $d; done

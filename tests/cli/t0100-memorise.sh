#!/usr/bin/env bash
# A tiny model trained on one fixed sequence drives the loss below 0.05, and the
# same recipe and seed give bitwise-identical final/ weights across two runs.
. "$(dirname "$0")/lib.sh"

make_tiny model
$PY - <<'PY'
import json
seq = [(i * 7 + 3) % 64 for i in range(48)]
with open("data.jsonl", "w") as f:
    f.write(json.dumps({"input_ids": seq}) + "\n")
PY
cat > recipe.toml <<'TOML'
[model]
path = "model"
dtype = "fp32"
activation_checkpointing = false
[data]
train = "data.jsonl"
format = "tokens"
max_length = 48
[train]
max_steps = 120
micro_batch_size = 1
learning_rate = 1e-2
lr_scheduler_type = "constant"
adam_beta2 = 0.99
max_grad_norm = 1.0
logging_steps = 10
seed = 7
TOML

expect_ok "train run 1" "$ZT" pretrain recipe.toml output.dir=run1
last=$(tail -n 1 run1/metrics.jsonl)
$PY -c "import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if r['loss'] < 0.05 else 1)" "$last" \
  && say "ok - memorised: $last" || fail "loss not below 0.05: $last"
expect_ok "train run 2" "$ZT" pretrain recipe.toml output.dir=run2
cmp -s run1/final/model.safetensors run2/final/model.safetensors && say "ok - bitwise identical" \
  || fail "final weights differ between two runs of the same recipe"
for f in run.json recipe.resolved.toml summary.json train.log final/config.json final/generation_config.json; do
  [ -s "run1/$f" ] || fail "run directory lacks $f"
done
$PY "$ROOT/tests/unit/st_check.py" run1/final --any-values >/dev/null && say "ok - final is valid safetensors" \
  || fail "final/model.safetensors does not pass the independent check"
# the saved model reloads to the same values: its eval loss equals the trained model's loss on the same data
expect_ok "eval final" "$ZT" eval recipe.toml --checkpoint run1/final
$PY -c "import json,sys; r=json.load(open('$TMP/out')); sys.exit(0 if r['loss'] < 0.05 and r['target_tokens'] == 47 else 1)" \
  && say "ok - eval of final: $(cat "$TMP/out")" || fail "eval of final: $(cat "$TMP/out")"
# activation checkpointing changes nothing but memory
expect_ok "train with checkpointing" "$ZT" pretrain recipe.toml output.dir=run3 model.activation_checkpointing=true
cmp -s run1/final/model.safetensors run3/final/model.safetensors && say "ok - checkpointing gives identical weights" \
  || fail "activation checkpointing changed the weights"
# bf16 compute (fp32 masters, bf16 weight copy and matmul operands) learns the same sequence
expect_ok "train in bf16" "$ZT" pretrain recipe.toml output.dir=run4 model.dtype=bf16
last=$(tail -n 1 run4/metrics.jsonl)
$PY -c "import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if r['loss'] < 0.05 else 1)" "$last" \
  && say "ok - bf16 memorised: $last" || fail "bf16: loss not below 0.05: $last"
# run.json names the kernels that ran, as zt env does
gemm=$("$ZT" env | sed -n 's/^bf16 gemm: //p')
$PY -c "import json,sys; r=json.load(open('run4/run.json')); sys.exit(0 if r['bf16_gemm'] == sys.argv[1] and r['cpu_kernels'] else 1)" "$gemm" \
  && say "ok - run.json: bf16 GEMM $gemm" || fail "run.json does not name the bf16 GEMM '$gemm': $(cat run4/run.json)"
$PY - <<'PY' || fail "final/ of a bf16 run is not stored as BF16"
import json, struct
b = open("run4/final/model.safetensors", "rb").read()
h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
h.pop("__metadata__")
assert all(e["dtype"] == "BF16" for e in h.values())
PY
done_testing

#!/usr/bin/env bash
# zt export: a checkpoint written as rank shards (by test_state --make-checkpoint) exports
# to a Hugging Face directory that evaluates to exactly the model's loss (fp32), a close
# one (bf16), also sharded; a run directory exports its newest complete checkpoint, or
# its final/ when it has none; bad input exits 2 naming the file.
. "$(dirname "$0")/lib.sh"

build=build
[ "$(basename "$ZT")" = zt-san ] && build=build-san
TOOL="$ROOT/$build/tests/test_state"
[ -x "$TOOL" ] || { fail "$TOOL is not built (make tests)"; done_testing; }

make_tiny model
"$ZT" init --arch qwen2 --out qwen --seed 2 hidden_size=32 intermediate_size=64 num_hidden_layers=2 \
  num_attention_heads=4 num_key_value_heads=2 vocab_size=64 max_position_embeddings=64 tie_word_embeddings=true \
  >/dev/null 2>&1 || fail "zt init qwen2"
$PY - <<'PY'
import json
with open("data.jsonl", "w") as f:
    for i in range(6):
        f.write(json.dumps({"input_ids": [(i * 7 + j * 5) % 64 for j in range(24)]}) + "\n")
PY
printf '[model]\npath = "model"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\n[train]\nmax_steps = 1\nmicro_batch_size = 2\n' > recipe.toml

loss_of() { $PY -c 'import json,sys; print(json.loads(open(sys.argv[1]).read())["loss"])' "$1"; }
# same_loss WHAT DIR: zt eval of DIR prints the model's line exactly
same_loss() {
  expect_ok "eval of $2" "$ZT" eval recipe.toml --checkpoint "$2"
  [ "$(cat "$TMP/out")" = "$base" ] && say "ok - $1: the same loss" || fail "$1: $(cat "$TMP/out") != $base"
}

expect_ok "eval of the model" "$ZT" eval recipe.toml
base=$(cat "$TMP/out")

expect_ok "a 3-rank checkpoint at step 7" "$TOOL" --make-checkpoint model run 7 3
ckpt=run/checkpoints/step-000007
expect_ok "export of the checkpoint" "$ZT" export "$ckpt" --out x
for f in config.json model.safetensors generation_config.json; do
  [ -f "x/$f" ] || fail "x/$f missing"
done
same_loss "fp32 export of the checkpoint" x
$PY "$ROOT/tests/unit/st_check.py" x --any-values >/dev/null && say "ok - export passes the independent check" \
  || fail "x fails tests/unit/st_check.py"
cmp -s x/model.safetensors model/model.safetensors && say "ok - the same bytes as zt init wrote" \
  || fail "x/model.safetensors differs from the model's"

expect_ok "sharded export" "$ZT" export "$ckpt" --out xs --max-shard-size 20KB
[ -f xs/model.safetensors.index.json ] && ls xs/model-00002-of-*.safetensors >/dev/null 2>&1 \
  && say "ok - an index and shards" || fail "no shards: $(ls xs)"
same_loss "sharded export" xs
$PY "$ROOT/tests/unit/st_check.py" xs --any-values >/dev/null && say "ok - sharded export passes the independent check" \
  || fail "xs fails tests/unit/st_check.py"

expect_ok "bf16 export" "$ZT" export "$ckpt" --out xb --dtype bf16
$PY - "$(loss_of <(echo "$base"))" xb <<'PY' && say "ok - bf16 export is BF16 with torch_dtype bfloat16" || fail "bf16 export"
import json, struct, sys
b = open(sys.argv[2] + "/model.safetensors", "rb").read()
h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
assert all(v["dtype"] == "BF16" for k, v in h.items() if k != "__metadata__")
assert json.load(open(sys.argv[2] + "/config.json"))["torch_dtype"] == "bfloat16"
PY
expect_ok "eval of the bf16 export" "$ZT" eval recipe.toml --checkpoint xb
# bf16 keeps 8 significant bits: each weight moves by at most 2^-9 of itself, each product's
# output by at most 2^-9 of the sum of its terms' magnitudes; through two layers (the norms
# renormalise) and the head a logit moves by at most about 4·2^-9 of the magnitudes, and the
# loss (≈ log 64 ≈ 4.2) by at most twice the largest logit change: within 1e-2 relative while
# the logits stay below about 1e-2·4.2 / (8·2^-9) ≈ 2.7, as the init's small weights keep them
$PY -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not (a != b and abs(a - b) < 1e-2 * abs(a)))' \
  "$(loss_of <(echo "$base"))" "$(loss_of "$TMP/out")" && say "ok - bf16 loss is close" \
  || fail "bf16 loss $(cat "$TMP/out") vs $base"

# a run: its newest complete checkpoint (step 9, 2 ranks), not the incomplete step 11
expect_ok "a 2-rank checkpoint at step 9" "$TOOL" --make-checkpoint model run 9 2
expect_ok "an interrupted checkpoint at step 11" "$TOOL" --make-checkpoint qwen run 11 1
rm run/checkpoints/step-000011/DONE
ZT_LOG=info expect_ok "export of the run" "$ZT" export run --out xr
grep -q "step 9 from 'run/checkpoints/step-000009'" "$TMP/err" && say "ok - the newest complete checkpoint" \
  || fail "not step 9: $(cat "$TMP/err")"
same_loss "export of the run" xr

# a run without checkpoints: its final/, converted (the same bf16 bytes as from the checkpoint)
mkdir run2 && cp -r model run2/final
expect_ok "export of a run's final/" "$ZT" export run2 --out xf --dtype bf16
cmp -s xf/model.safetensors xb/model.safetensors && say "ok - final/ converts like the checkpoint" \
  || fail "xf and xb differ"

# the tokenizer files and generation config travel from the checkpoint to the export
cp -r model modeltok
echo '{"model": {"type": "BPE"}}' > modeltok/tokenizer.json
echo '{"chat_template": "{{ messages }}"}' > modeltok/tokenizer_config.json
echo '{"eos_token_id": [2, 7]}' > modeltok/generation_config.json
expect_ok "a checkpoint with tokenizer files" "$TOOL" --make-checkpoint modeltok runtok 1 2
expect_ok "export with tokenizer files" "$ZT" export runtok --out xt
for f in tokenizer.json tokenizer_config.json generation_config.json; do
  cmp -s "modeltok/$f" "xt/$f" && say "ok - $f carried" || fail "xt/$f differs or is missing"
done

# tied embeddings and biases (qwen2)
expect_ok "a qwen2 checkpoint" "$TOOL" --make-checkpoint qwen runq 3 4
expect_ok "export of the qwen2 run" "$ZT" export runq --out xq
expect_ok "eval of qwen2" "$ZT" eval recipe.toml --checkpoint qwen
base=$(cat "$TMP/out")
same_loss "qwen2 export (tied, biases)" xq

# bad input: exit 2, the file named
expect_exit 2 "incomplete checkpoint" "step-000011.*DONE" "$ZT" export run/checkpoints/step-000011 --out e1
cp -r "$ckpt" noshard && rm noshard/rank-00001-of-00003.bin
expect_exit 2 "missing shard" "noshard/rank-00001-of-00003.bin" "$ZT" export noshard --out e2
cp -r "$ckpt" shortshard && truncate -s -4 shortshard/rank-00002-of-00003.bin
expect_exit 2 "truncated shard" "shortshard/rank-00002-of-00003.bin.*truncated" "$ZT" export shortshard --out e3
cp -r "$ckpt" badstate && echo '{"format": "zt-trainer-state"' > badstate/trainer_state.json
expect_exit 2 "bad trainer_state.json" "badstate/trainer_state.json" "$ZT" export badstate --out e4
cp -r "$ckpt" wrongcfg && $PY -c 'import json; p="wrongcfg/config.json"; c=json.load(open(p)); c["intermediate_size"]=96; json.dump(c, open(p,"w"))'
expect_exit 2 "config.json of another model" "wrongcfg/trainer_state.json.*parameters" "$ZT" export wrongcfg --out e5
expect_exit 2 "no such directory" "nosuch.*no such directory" "$ZT" export nosuch --out e6
expect_exit 2 "not a run or checkpoint" "'e7': not a run" bash -c "mkdir e7 && '$ZT' export e7 --out e8"
expect_exit 2 "bad dtype" "dtype 'fp16'" "$ZT" export "$ckpt" --out e9 --dtype fp16
expect_exit 2 "bad shard size" "max-shard-size" "$ZT" export "$ckpt" --out e9 --max-shard-size lots
expect_exit 2 "no --out" "needs RUN_OR_CHECKPOINT_DIR and --out" "$ZT" export "$ckpt"
expect_exit 2 "output is the source" "the source itself" "$ZT" export run2 --out run2/final
[ ! -e e1 ] && [ ! -e e2 ] && [ ! -e e3 ] && say "ok - failed exports wrote nothing" || fail "a failed export left output"
done_testing

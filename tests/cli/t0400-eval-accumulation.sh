#!/usr/bin/env bash
# zt eval prints one JSON line; data.valid_split holds out examples; gradient
# accumulation normalises the loss by the target tokens of the whole step, so
# micro-batch 2 equals micro-batch 1 with two accumulation steps; the positions zt eval computes
# follow the data's tokens, not data.max_length.
. "$(dirname "$0")/lib.sh"

make_tiny model
$PY - <<'PY'
import json, random
r = random.Random(3)
with open("data.jsonl", "w") as f:
    for i in range(40):
        n = r.randrange(3, 30)  # documents of different lengths: per-micro-batch means would differ
        f.write(json.dumps({"input_ids": [r.randrange(64) for _ in range(n)]}) + "\n")
PY
printf '[model]\npath = "model"\nactivation_checkpointing = false\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\npacking = false\nshuffle = false\n[train]\nmax_steps = 5\nmicro_batch_size = 2\nlearning_rate = 1e-3\nlogging_steps = 1\n' > recipe.toml

expect_ok "eval" "$ZT" eval recipe.toml
$PY -c "
import json, math
r = json.loads(open('$TMP/out').read())
assert set(r) == {'loss', 'tokens', 'positions', 'perplexity'}, r
assert abs(r['perplexity'] - math.exp(r['loss'])) < 1e-9 * r['perplexity'], r
" && say "ok - eval JSON: $(cat "$TMP/out")" || fail "eval output: $(cat "$TMP/out")"
all_tokens=$($PY -c "import json; print(json.loads(open('$TMP/out').read())['tokens'])")
expect_ok "eval with valid_split" "$ZT" eval recipe.toml data.valid_split=0.25
split_tokens=$($PY -c "import json; print(json.loads(open('$TMP/out').read())['tokens'])")
[ "$split_tokens" -gt 0 ] && [ "$split_tokens" -lt "$all_tokens" ] && say "ok - valid_split evaluates $split_tokens of $all_tokens tokens" \
  || fail "valid_split: $split_tokens of $all_tokens tokens"

# the cost follows the data, not max_length: one 165-token paragraph at max_length 2048 computes the
# positions it does at 256 (its tokens rounded up to 64), with bitwise the same loss
make_tiny long max_position_embeddings=2048
$PY -c "
import json, random
r = random.Random(4)
print(json.dumps({'input_ids': [r.randrange(64) for _ in range(165)]}))" > paragraph.jsonl
for T in 256 2048; do
  expect_ok "eval, a paragraph at max_length $T" "$ZT" eval recipe.toml model.path=long data.train=paragraph.jsonl \
    data.max_length=$T train.micro_batch_size=1
  cp "$TMP/out" eval-$T.json
done
$PY - <<'PY' && say "ok - ...the same $(cat eval-2048.json)" || fail "max_length 2048 against 256: $(cat eval-2048.json eval-256.json)"
import json
a, b = (json.load(open(f"eval-{T}.json")) for T in (256, 2048))
assert a["positions"] == b["positions"] == 192 and a["loss"] == b["loss"] and a["tokens"] == b["tokens"] == 164, (a, b)
PY

expect_ok "micro-batch 2" "$ZT" pretrain recipe.toml output.dir=a
expect_ok "micro-batch 1 × accumulation 2" "$ZT" pretrain recipe.toml output.dir=b train.micro_batch_size=1 train.gradient_accumulation_steps=2
$PY - <<'PY' && say "ok - losses per step agree" || fail "accumulation changed the losses"
import json
a = [json.loads(l) for l in open("a/metrics.jsonl")]
b = [json.loads(l) for l in open("b/metrics.jsonl")]
assert len(a) == len(b) == 5
for x, y in zip(a, b):
    assert x["target_tokens"] == y["target_tokens"], (x, y)
    assert abs(x["loss"] - y["loss"]) <= 1e-5 * abs(x["loss"]), (x["loss"], y["loss"])
    assert abs(x["grad_norm"] - y["grad_norm"]) <= 1e-4 * abs(x["grad_norm"]), (x["grad_norm"], y["grad_norm"])
PY
done_testing

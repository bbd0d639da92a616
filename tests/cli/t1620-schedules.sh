#!/usr/bin/env bash
# Hugging Face's schedules by their names with lr_scheduler_kwargs, through a training run: the
# lr logged at every step is what transformers' lr_lambda gives (written out below in Python,
# transformers 4.51.3's formulas); recipe.resolved.toml keeps the kwargs and reads back the same.
. "$(dirname "$0")/lib.sh"

make_tiny model
random_tokens data.jsonl 3 40
printf '[model]\npath = "model"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\n[train]\nmax_steps = 12\nwarmup_steps = 2\nmicro_batch_size = 2\nlearning_rate = 1e-3\nlogging_steps = 1\n' > recipe.toml

check_lrs() { # check_lrs NAME DIR: DIR/metrics.jsonl's lr of every step against HF's lambda for NAME
  $PY - "$1" "$2" <<'PY' && say "ok - $1: every step's lr is Hugging Face's" || fail "$1: the logged lr differ"
import json, math, sys
name, d = sys.argv[1], sys.argv[2]
W, S, lr = 2, 12, 1e-3
def lam(s):
    if s < W:
        return s / max(1, W)
    p = (s - W) / max(1, S - W)
    if name == "restarts":  # num_cycles 2
        return 0.0 if p >= 1 else max(0.0, 0.5 * (1.0 + math.cos(math.pi * ((2.0 * p) % 1.0))))
    if name == "polynomial":  # power 2, lr_end 1e-5
        return (((lr - 1e-5) * (1 - (s - W) / (S - W)) ** 2.0 + 1e-5) / lr) if s <= S else 1e-5 / lr
    return 1.0 / math.sqrt((s + W - W) / W)  # inverse_sqrt: timescale = W
rows = [json.loads(l) for l in open(d + "/metrics.jsonl") if '"lr"' in l]
assert [r["step"] for r in rows] == list(range(1, S + 1)), rows
for r in rows:
    want = lr * lam(r["step"] - 1)
    assert abs(r["lr"] - want) <= 1e-12 * want + 1e-30, (r["step"], r["lr"], want)
PY
}
expect_ok "cosine_with_restarts, num_cycles 2" "$ZT" pretrain recipe.toml output.dir=restarts \
  train.lr_scheduler_type=cosine_with_restarts 'train.lr_scheduler_kwargs={num_cycles = 2}'
check_lrs restarts restarts
expect_ok "polynomial, power 2" "$ZT" pretrain recipe.toml output.dir=poly train.lr_scheduler_type=polynomial \
  'train.lr_scheduler_kwargs={power = 2, lr_end = 1e-5}'
check_lrs polynomial poly
expect_ok "inverse_sqrt" "$ZT" pretrain recipe.toml output.dir=isqrt train.lr_scheduler_type=inverse_sqrt
check_lrs inverse_sqrt isqrt
grep -q '^lr_scheduler_kwargs = {power = 2' poly/recipe.resolved.toml \
  && expect_ok "the resolved recipe reads back" "$ZT" pretrain poly/recipe.resolved.toml output.dir=again \
  || fail "recipe.resolved.toml: $(grep lr_scheduler poly/recipe.resolved.toml)"
cmp -s poly/final/model.safetensors again/final/model.safetensors && say "ok - and trains the same weights" \
  || fail "the resolved recipe trains other weights"
expect_exit 2 "a keyword the schedule does not take" "lr_scheduler_kwargs: the linear schedule takes no 'power'" \
  "$ZT" pretrain recipe.toml output.dir=bad train.lr_scheduler_type=linear 'train.lr_scheduler_kwargs={power = 2}'
done_testing

#!/usr/bin/env bash
# ZeRO data parallelism: 1, 2, 3 and 4 ranks (accumulation scaled so the global batch
# is the same) at stages 0, 1, 2 and 3 train like one rank: the loss of every step within
# 1e-5 relative, the final weights within 1e-5 of each tensor's largest value; the
# gradient reduce moves the expected bytes.
. "$(dirname "$0")/lib.sh"
need_mpi

make_tiny model
random_tokens data.jsonl 5 60
printf '[model]\npath = "model"\ndtype = "fp32"\nactivation_checkpointing = false\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\npacking = false\n[train]\nmax_steps = 4\nmicro_batch_size = 1\nlearning_rate = 1e-3\nlogging_steps = 1\nmax_grad_norm = 0.5\n' > recipe.toml

expect_ok "one rank, accumulation 12" "$ZT" pretrain recipe.toml output.dir=ref train.gradient_accumulation_steps=12
for stage in 0 1 2 3; do
  for n in 2 3 4; do
    expect_ok "$n ranks, stage $stage" $MPI -np $n "$ZT" pretrain recipe.toml output.dir=r$n-s$stage \
      train.gradient_accumulation_steps=$((12 / n)) zero.stage=$stage
    $PY - ref r$n-s$stage $n <<'PY' && say "ok - $n ranks, stage $stage: same losses and weights" || fail "$n ranks, stage $stage differ"
import json, struct, sys
import numpy as np
ref, run, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
a = [json.loads(l) for l in open(ref + "/metrics.jsonl")]
b = [json.loads(l) for l in open(run + "/metrics.jsonl")]
assert len(a) == len(b) == 4, (len(a), len(b))
for x, y in zip(a, b):
    assert x["target_tokens"] == y["target_tokens"], (x["target_tokens"], y["target_tokens"])
    assert abs(x["loss"] - y["loss"]) <= 1e-5 * abs(x["loss"]), (x["loss"], y["loss"])
    assert y["comm_bytes_grad_reduce"] > 0
def load(d):
    blob = open(d + "/final/model.safetensors", "rb").read()
    k = struct.unpack("<Q", blob[:8])[0]
    h = json.loads(blob[8:8 + k]); h.pop("__metadata__")
    return {t: np.frombuffer(blob[8 + k + e["data_offsets"][0]:8 + k + e["data_offsets"][1]], "<f4") for t, e in h.items()}
wa, wb = load(ref), load(run)
for t in wa:
    err = np.abs(wa[t] - wb[t]).max() / max(np.abs(wa[t]).max(), 1e-30)
    assert err <= 1e-5, (t, err)
assert json.load(open(run + "/run.json"))["world_size"] == n
PY
  done
done
# epochs count global batches: 3 ranks with accumulation 4 take as many steps as one with 12
expect_ok "one rank, one epoch" "$ZT" pretrain recipe.toml output.dir=e1 train.max_steps=0 train.num_train_epochs=1 \
  train.gradient_accumulation_steps=12
expect_ok "3 ranks, one epoch" $MPI -np 3 "$ZT" pretrain recipe.toml output.dir=e3 train.max_steps=0 \
  train.num_train_epochs=1 train.gradient_accumulation_steps=4 zero.stage=3
$PY -c "
import json
a, b = (json.load(open(d + '/summary.json'))['steps'] for d in ('e1', 'e3'))
assert a == b == 5, (a, b)
" && say "ok - an epoch is 5 global batches on 1 and on 3 ranks" || fail "epochs on several ranks: $(cat e3/summary.json)"
done_testing
